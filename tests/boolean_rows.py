"""A sparse-Boolean trial's row as a worker reports it, for tests that write runs to a real store
without training (tests/analysis)."""

from __future__ import annotations

from attnsweep.orchestrator.spec import trial_id
from attnsweep.workers import BooleanTrialConfig


def boolean_row(T: int, m: int, seed: int, ok: bool) -> dict:
    """A finished 3-AND trial of a small transformer at ``(T, m, seed)``: test accuracy 1.0
    when ``ok`` (a success), else 0.6; it fitted its training set either way."""
    config = BooleanTrialConfig(task="and", T=T, s=3, m=m, seed=seed, model="transformer", d=16, heads=2)
    return dict(
        config.model_dump(),
        trial_id=trial_id(config),
        experiment="sparse_boolean",
        status="done",
        test_acc=1.0 if ok else 0.6,
        train_acc=1.0,
        converged=True,
        epochs=100,
        test_loss=0.1,
        train_loss=0.1,
    )
