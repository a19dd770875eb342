"""The measured CPU rules of the built-in sparse-Boolean models (workers/builtin_models.py):
whether a pack of theirs trains stacked on a CPU, before the working-set limit every model
meets (workers/stacking.py). Measured in bench/packing.py and bench/packing_cells.py and written
in docs/decisions.md. Each reads only settings a pack's trials share, never the pack's size.
No torch and no other module of the project: the registry and the stacking rule both read it.
"""

from __future__ import annotations

from typing import Any

ONE_LAYER_MAX_T = 256
"""Largest T at which a one-layer float32 transformer trains stacked. Beyond it each trial takes
the hand-written step of workers/one_layer.py alone, which sums over the T bits instead of the
2T one-hot columns and whose products already fill a core. Measured (bench/packing.py, 16-slot
lane groups, m = 128): a full group ran 2.1x faster than its trials one by one at T = 256 and
1.3x at T = 512 and 1024; a group costs what 7.5 lone trials cost at T = 256, so a pack of 8
breaks even there and would lose beyond it, and packs of 8 seeds are common (the adaptive
search). Not a function of the pack's size, by design (module docstring)."""


MLP_MAX_STEP_FLOPS = 40_000_000
"""Largest training step of one MLP trial (:func:`mlp_step_flops` on its batch) that trains
stacked on a CPU. Below it a trial alone pays more for its calls than for its arithmetic and a
lane group wins; above it both are bound by the same products and GELU, and the group, its
tensors out of cache, loses. Measured (bench/packing_cells.py, 32 trials against one by one, 50
epochs, scoring included, width 256; BENCHMARKS.md, the packing table, on an idle machine at
5723efd): 4.1x at T = 16, m = 64 (1.2 Mflop), 1.6x at T = 16, m = 256 (4.6), 1.1x at T = 128,
m = 256 (34); 0.95x at T = 256, m = 256 (68), 0.54x at T = 128, m = 1024 (135), 0.58x at
T = 256, m = 1024 (269). Not a function of the pack's size (module docstring)."""

MLP_MAX_BATCH_WIDTH = 65_536
"""Largest ``batch x width`` (one trial's hidden activations, floats: 256 KiB, so 8 MiB for a
lane group of 32) of an MLP that trains stacked on a CPU, whatever its products: GELU and its
derivative, which cost the same per trial stacked or not, then work on tensors that leave the
cache. Measured at equal products (34 Mflop a step, the same run as above): T = 128, m = 256
(65,536) 1.1x stacked, T = 64, m = 512 (131,072) 0.86x."""


def mlp_step_flops(T: int, width: int, layers: int, b: int) -> int:
    """Floating-point operations (2 per multiply-add) of one MLP trial's training step on ``b``
    samples through its products: forward ``b (T w + (layers - 1) w^2 + w)``, backward the same
    for the weight gradients plus ``b w`` for the readout's rank-one ``g r^T`` and ``b w^2``
    per hidden layer past the first for the inputs' gradients. GELU and its derivative (about
    ``b w layers`` evaluations each) are not counted."""
    forward = b * (T * width + (layers - 1) * width * width + width)
    backward = forward + b * width + b * (layers - 1) * width * width
    return 2 * (forward + backward)


def mlp_stacks_on_cpu(cfg: Any) -> bool:
    """The MLP's measured CPU rule (:data:`MLP_MAX_STEP_FLOPS`, :data:`MLP_MAX_BATCH_WIDTH`)."""
    batch = min(cfg.m, cfg.batch_size or cfg.m)
    if mlp_step_flops(cfg.T, cfg.mlp_width, cfg.layers, batch) > MLP_MAX_STEP_FLOPS:
        return False
    return batch * cfg.mlp_width <= MLP_MAX_BATCH_WIDTH


def transformer_stacks_on_cpu(cfg: Any) -> bool:
    """The transformer's measured CPU rule: not on the hand-written one-layer step beyond
    :data:`ONE_LAYER_MAX_T`."""
    one_layer_step = cfg.layers == 1 and cfg.precision == "float32"
    return not (one_layer_step and cfg.T > ONE_LAYER_MAX_T)
