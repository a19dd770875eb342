"""The experiments a sweep can run: each a trial config and the function that trains a pack.

The orchestrator looks an experiment up by the spec's ``experiment`` name; nothing else
in it depends on which experiment it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from attnsweep.workers.builtin_models import working_bytes as boolean_working_bytes
from attnsweep.workers.builtin_students import working_bytes as symmetry_working_bytes
from attnsweep.workers.config import BooleanTrialConfig, SymmetryTrialConfig
from attnsweep.workers.memory import boolean_trial_bytes, symmetry_trial_bytes
from attnsweep.workers.stacking import boolean_stacks, symmetry_stacks

C = TypeVar("C", bound=BaseModel)
"""An experiment's trial config: a pydantic model and a :class:`workers.trial_config.TrialConfig`."""


@dataclass(frozen=True)
class Experiment(Generic[C]):
    """A family of trials, generic in its trial config ``C``.

    Attributes:
        name: the spec's ``experiment`` value.
        config: the pydantic model of one trial.
        train: trains a pack, ``(configs, device, curves=None) -> rows`` (``curves``: a
            :class:`workers.curves.CurvePlan`, or None to keep no learning curves).
        example: a valid value for every required field but those under test (lets a spec
            check each value of an axis on its own).
        cross_fields: fields whose combinations the config's validator checks together.
        memory_bytes: what one trial holds for its whole pack, ``config -> bytes``
        working_bytes: the most one trial uses while it trains or is scored, ``config ->
            bytes``; a pack of P trials needs ``working + P x memory`` (workers/memory.py)
            (:mod:`workers.memory`); sizes packs when ``execution.pack_size`` is ``auto``.
        stacks: whether a trial's pack trains stacked, ``config -> bool`` (workers/stacking.py);
            a stacked pack needs every slot's working set (:func:`workers.memory.pack_bytes`).
        succeeds: ``(row, analysis) -> bool``: whether a finished trial's row is a success as
            stats/critical.py counts it (``analysis``: the spec's analysis settings,
            ``acc_threshold`` or ``target_error``).
        tuning_score: ``row -> float``, higher is better: a tuning trial's score (its row, or
            None when it has none), for the adaptive search's tuner (orchestrator/adaptive.py).
        cell_keys: the settings that alone key a cell of the analysis, which pools the rows of
            a cell over every other setting (symmetry: stats/symmetry.py ``CELL``, the student
            being ``model`` with its ``equivariance``), so ``validate`` names a varied setting
            that would be pooled; None: every setting but m and the seed keys a cell.
        cell_words: the cell's keys as a message names them (``cell_keys`` given).
        claim_quantities: the per-trial measurements a spec's own ``trend`` claim may name
            (orchestrator/spec_claims.py; columns of the trials table, or made from them by
            the analysis: analysis/experiments.py ``claim_trials``).
        m_star_claims: whether a spec's own claims may judge m* (``growth``,
            ``fewer_samples``): the analysis keeps an m* table per cell with its bootstrap
            replicates (sparse Boolean) or does not (symmetry).
    """

    name: str
    config: type[C]
    train: Callable
    example: dict
    cross_fields: tuple[str, ...]
    memory_bytes: Callable[[C], int]
    working_bytes: Callable[[C], int]
    stacks: Callable[[C], bool]
    succeeds: Callable[[dict, Any], bool]
    tuning_score: Callable[[dict | None], float]
    cell_keys: frozenset[str] | None = None
    cell_words: str = ""
    claim_quantities: tuple[str, ...] = ()
    m_star_claims: bool = True


def _boolean_succeeds(row: dict, analysis: Any) -> bool:
    """Done and a test accuracy of at least ``acc_threshold``."""
    return row["status"] == "done" and row["test_acc"] is not None and row["test_acc"] >= analysis.acc_threshold


def _symmetry_succeeds(row: dict, analysis: Any) -> bool:
    """Done and a relative test error of at most ``target_error``."""
    return row["status"] == "done" and row["test_error"] is not None and row["test_error"] <= analysis.target_error


def _boolean_score(row: dict | None) -> float:
    """Test accuracy; 0.5 (chance) when the trial did not train or diverged."""
    acc = row.get("test_acc") if row is not None and row["status"] == "done" else None
    return acc if acc is not None and math.isfinite(acc) else 0.5


def _symmetry_score(row: dict | None) -> float:
    """-log10 of the relative test error; 0 when the trial did not train."""
    err = row.get("test_error") if row is not None and row["status"] == "done" else None
    return -math.log10(max(err, 1e-12)) if err is not None and math.isfinite(err) else 0.0


def _train_boolean(configs, device=None, curves=None):
    from attnsweep.workers.train_boolean import train_pack

    return train_pack(configs, device, curves=curves)


def _train_symmetry(configs, device=None, curves=None):
    from attnsweep.workers.train_symmetry import train_symmetry_pack

    return train_symmetry_pack(configs, device, curves=curves)


EXPERIMENTS: dict[str, Experiment[Any]] = {
    "sparse_boolean": Experiment(
        "sparse_boolean",
        BooleanTrialConfig,
        _train_boolean,
        example={"task": "and", "T": 64, "s": 1, "m": 1, "seed": 0},
        cross_fields=("T", "s", "d", "heads", "model", "positions", "ln_affine"),
        memory_bytes=boolean_trial_bytes,
        working_bytes=boolean_working_bytes,
        stacks=boolean_stacks,
        succeeds=_boolean_succeeds,
        tuning_score=_boolean_score,
        claim_quantities=(
            "test_error",
            "test_acc",
            "test_loss",
            "train_acc",
            "train_loss",
            "margin",
            "margin_normalised",
            "norm_qk",
            "norm_v",
            "norm_readout",
            "epochs",
            "wall_s",
        ),
    ),
    "symmetry": Experiment(
        "symmetry",
        SymmetryTrialConfig,
        _train_symmetry,
        example={"teacher": "equivariant", "n": 4, "k": 2, "d": 4, "m": 1, "seed": 0},
        cross_fields=("model", "equivariance", "width", "heads"),
        memory_bytes=symmetry_trial_bytes,
        working_bytes=symmetry_working_bytes,
        stacks=symmetry_stacks,
        succeeds=_symmetry_succeeds,
        tuning_score=_symmetry_score,
        cell_keys=frozenset({"teacher", "model", "equivariance", "n", "k", "d"}),
        cell_words="teacher, student, n, k and d",
        claim_quantities=(
            "test_error",
            "train_error",
            "eq_error_median",
            "eq_error_max",
            "perm_error_median",
            "perm_error_max",
            "epochs",
            "wall_s",
        ),
        m_star_claims=False,
    ),
}
