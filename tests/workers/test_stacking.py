"""The stacking rule (workers/stacking.py) for the MLP: by its step's arithmetic and its
activations' size, read from the settings a pack shares, never from the pack."""

from __future__ import annotations

from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers.stacking import MLP_MAX_BATCH_WIDTH, MLP_MAX_STEP_FLOPS, boolean_stacks, mlp_step_flops


def _mlp(T: int, m: int, **kw) -> BooleanTrialConfig:
    return BooleanTrialConfig(task="and", s=3, T=T, m=m, seed=0, model="mlp", mlp_width=256, **kw)


def test_mlp_step_flops_counts_the_products():
    b, w = 256, 256  # T = 16, one layer: 2 (b (16 w + w)) forward, the same plus b w back
    assert mlp_step_flops(16, w, 1, b) == 2 * (2 * b * (16 * w + w) + b * w)
    # a second hidden layer adds w^2 per sample forward, and twice that back
    assert mlp_step_flops(16, w, 2, b) - mlp_step_flops(16, w, 1, b) == 2 * 3 * b * w * w


def test_the_mlp_stacks_where_measured_to_win_and_not_beyond():
    # the ratios of BENCHMARKS.md's packing table (stacked pack of 32 against one by one, idle)
    assert boolean_stacks(_mlp(16, 64))  # 4.1x
    assert boolean_stacks(_mlp(16, 256))  # 1.6x
    assert boolean_stacks(_mlp(64, 91))  # decades' median MLP cell, 1.8x
    assert boolean_stacks(_mlp(128, 256))  # 1.1x
    assert not boolean_stacks(_mlp(64, 512))  # 0.86x: the same products as T = 128, m = 256, twice the activations
    assert not boolean_stacks(_mlp(256, 256))  # 0.95x
    assert not boolean_stacks(_mlp(128, 1024))  # 0.54x
    assert not boolean_stacks(_mlp(256, 1024))  # 0.58x
    assert boolean_stacks(_mlp(256, 1024), "cuda")  # a GPU stacks everything
    # a minibatch's step is what counts: the same cell in batches of 64 stacks
    assert boolean_stacks(_mlp(256, 1024, batch_size=64))
    assert mlp_step_flops(64, 256, 1, 512) <= MLP_MAX_STEP_FLOPS < mlp_step_flops(256, 256, 1, 256)
    assert 256 * 256 <= MLP_MAX_BATCH_WIDTH < 512 * 256


def test_the_rule_reads_the_trial_never_its_seed():
    assert boolean_stacks(_mlp(128, 256)) == boolean_stacks(_mlp(128, 256).model_copy(update=dict(seed=7)))
