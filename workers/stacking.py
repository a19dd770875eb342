"""Whether a pack trains stacked (workers/stacked.py) or one trial after the other: the rule,
measured in bench/packing.py and written in docs/decisions.md.

The rule reads only the settings a pack's trials share (their shape key), never the pack's size
or its trials, so a trial takes the same path alone and in any pack and its row stays its own.
No torch here: ``validate`` and the packer read it.
"""

from __future__ import annotations

from attnsweep.workers.config import BooleanTrialConfig, SymmetryTrialConfig
from attnsweep.workers.memory import STACKED_SLOTS, boolean_working_bytes, symmetry_working_bytes

STACKED_MAX_BYTES = 2**30
"""Largest working set of a lane group (``STACKED_SLOTS`` trials' working sets, bytes) that
trains stacked: a lone trial is padded to a full group, so a group must fit any worker."""

ONE_LAYER_MAX_T = 1024
"""Largest T at which a one-layer float32 transformer trains stacked. Beyond it each trial takes
the hand-written step of workers/one_layer.py alone, which sums over T bits instead of the 2T
one-hot columns and whose products already fill a core: stacked 16 trials ran 2.1x faster at
T = 256, 1.3x at T = 512 and 1024 (bench/packing.py)."""


def boolean_stacks(cfg: BooleanTrialConfig) -> bool:
    """Whether a sparse-Boolean trial's pack trains stacked."""
    one_layer_step = cfg.model == "transformer" and cfg.layers == 1 and cfg.precision == "float32"
    if one_layer_step and cfg.T > ONE_LAYER_MAX_T:
        return False
    return STACKED_SLOTS * boolean_working_bytes(cfg) <= STACKED_MAX_BYTES


def symmetry_stacks(cfg: SymmetryTrialConfig) -> bool:
    """Whether a symmetry trial's pack trains stacked."""
    return STACKED_SLOTS * symmetry_working_bytes(cfg) <= STACKED_MAX_BYTES
