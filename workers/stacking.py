"""Whether a pack trains stacked (workers/stacked.py) or one trial after the other: the rule,
measured in bench/packing.py and written in docs/decisions.md.

The rule reads only the settings a pack's trials share (their shape key), never the pack's size
or its trials, so a trial takes the same path alone and in any pack and its row stays its own.
No torch here: ``validate`` and the packer read it.
"""

from __future__ import annotations

from attnsweep.workers.builtin_models import loaded_or_none
from attnsweep.workers.builtin_models import working_bytes as boolean_trial_working_bytes
from attnsweep.workers.config import BooleanTrialConfig, SymmetryTrialConfig  # noqa: F401 - in signatures
from attnsweep.workers.memory import STACKED_SLOTS

# The built-ins' measured CPU rules, named here too, where the stacking rule was first written.
from attnsweep.workers.stacking_rules import (  # noqa: F401
    MLP_MAX_BATCH_WIDTH,
    MLP_MAX_STEP_FLOPS,
    ONE_LAYER_MAX_T,
    mlp_step_flops,
)

STACKED_MAX_BYTES = 2**30
"""Largest working set of a lane group (``STACKED_SLOTS`` trials' working sets, bytes) that
trains stacked: a lone trial is padded to a full group, so a group must fit any worker."""


def boolean_stacks(cfg: BooleanTrialConfig, device_type: str = "cpu") -> bool:
    """Whether a sparse-Boolean trial's pack trains stacked on a device of ``device_type``
    (``"cpu"``, ``"cuda"``...): never for a model that cannot (workers/boolean_models.py
    ``stackable``); else on a GPU always (one trial's tiny kernels leave it waiting), on a CPU
    as measured for the built-ins (:data:`ONE_LAYER_MAX_T`, :data:`MLP_MAX_STEP_FLOPS`,
    :data:`MLP_MAX_BATCH_WIDTH`) and for every model while a lane group fits
    :data:`STACKED_MAX_BYTES`. A package's model that is not loaded (``validate``) or does not
    load counts as stackable: its pack is then sized for every slot, which errs high."""
    model = loaded_or_none(cfg.model)
    if model is not None and not model.stackable:
        return False
    if device_type != "cpu":
        return True
    if model is not None and model.paths is not None and not model.paths.stacks_on_cpu(cfg):
        return False
    return STACKED_SLOTS * boolean_trial_working_bytes(cfg) <= STACKED_MAX_BYTES


def symmetry_stacks(cfg: SymmetryTrialConfig, device_type: str = "cpu") -> bool:
    """Whether a symmetry trial's pack trains stacked on a device of ``device_type``: on a GPU
    always; on a CPU never. There a student's step is bound by torch's kernel for many tiny
    matrix products, whose cost grows with their number whether they come from one trial or 32:
    a full lane group ran 1.0-1.7x faster than its trials one by one (bench/packing.py), and a
    pack of 5 seeds padded to 16 slots would run about 2x slower."""
    return device_type != "cpu"
