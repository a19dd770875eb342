"""Adaptive m* search: put trials where they decide the critical sample size.

A spec with ``search: {mode: adaptive, ...}`` (orchestrator/spec.py, SearchSettings) runs in
up to three phases, each a sequence of *rounds*; a round is one batch of trials run on the
same Ray executor and streamed into the same store as a grid sweep, every row carrying
``search_phase`` and ``search_round`` (the round's number in the run):

1. ``tune`` (with ``search.tune``): per cell, an Optuna TPE study over the learning rate and
   weight decay, ``tune.batch`` parameter sets per round, each trained on ``tune.seeds``
   seeds at the probe sample size. The study lives in a JournalStorage file, one per cell
   (:func:`study_dir`). The cell's search then uses its best parameters.
2. ``search``: per cell, bisection on log m of the success rate. Round 0 tries
   ``initial_points`` log-spaced m over ``search.m`` (both ends included); each later round
   splits the bracket [lo, hi] (lo: the largest tried m below hi whose success rate is
   below ``analysis.success_frac``; hi: the smallest tried m whose rate reaches it) at
   ``points_per_round`` log-spaced interior points, until hi / lo <= 1 + ``rel_tol`` or
   hi - lo <= 1. A cell whose largest m fails (m* above the range) or whose smallest m
   succeeds (m* at or below it) stops at once. Every tried m runs all of the spec's seeds,
   so m* and its bootstrap interval come from results/critical.py exactly as for a grid.
3. ``budget`` (``search.budget_check``, cells with a context length T): the cell at the
   largest T of each series is searched again with twice ``max_epochs``; the analysis
   (orchestrator/analyze.py) marks that cell's m* budget-limited when the m* found with
   the doubled budget falls outside its interval.

Resuming after a crash replays the rounds: each round's choices depend only on the rows of
earlier rounds, which the store holds, so the replay makes the same choices, and trials the
run already holds (by trial id) are skipped, never repeated. Optuna trials asked but not
told before the crash are read back from the journal and completed from the store.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import polars as pl

from orchestrator.spec import SweepSpec, trial_id
from results import ResultsStore, StoreError

PHASES = ("tune", "search", "budget")


def run_adaptive(spec: SweepSpec, store: ResultsStore, run_id: str, batches) -> None:
    """Run the phases of an adaptive search (module docstring) through ``batches``
    (:class:`orchestrator.driver.TrialBatches`, which skips trials the run already holds)."""
    cells = list(spec.cells())
    rounds = _Rounds()
    if spec.search.tune is not None:
        chosen = tune_cells(spec, store, run_id, cells, batches, rounds)
        cells = [{**cell, **params} for cell, params in zip(cells, chosen)]
    search_cells(spec, store, run_id, cells, "search", batches, rounds)
    if spec.search.budget_check:
        doubled = budget_cells(spec, cells)
        if doubled:
            search_cells(spec, store, run_id, doubled, "budget", batches, rounds)


@dataclass
class _Rounds:
    """The run's round counter: rounds are numbered across phases, in the order they run."""

    n: int = 0

    def next(self) -> int:
        self.n += 1
        return self.n - 1


# --- bisection on log m ----------------------------------------------------------------------------------


def initial_points(m_min: int, m_max: int, n: int) -> list[int]:
    """``n`` log-spaced integer sample sizes from ``m_min`` to ``m_max``, ends included,
    duplicates (after rounding) dropped."""
    return list(dict.fromkeys(int(round(m)) for m in np.geomspace(m_min, m_max, n)))


def next_points(rates: dict[int, float], m_min: int, m_max: int, success_frac: float, rel_tol: float,
                n_initial: int, per_round: int) -> list[int]:
    """The sample sizes a cell tries next; empty when its m* is pinned (module docstring).

    Args:
        rates: success rate over seeds at each m tried so far (an m with no trained trial
            counts as rate 0: nothing was learned there).
        m_min, m_max: the search range.
        success_frac: the rate that defines m*.
        rel_tol: stop when the bracket's hi / lo <= 1 + rel_tol.
        n_initial: points of the first round; per_round: points of each later round.
    """
    if not rates:
        return initial_points(m_min, m_max, n_initial)
    ms = sorted(rates)
    reached = [m for m in ms if rates[m] >= success_frac]
    if not reached:
        return [] if ms[-1] >= m_max else [m_max]  # m* above the range
    hi = reached[0]
    below = [m for m in ms if m < hi]
    if not below:
        return [] if hi <= m_min else [m_min]  # m* at or below the range's start
    lo = below[-1]
    if hi / lo <= 1 + rel_tol or hi - lo <= 1:
        return []
    inner = np.exp(np.linspace(math.log(lo), math.log(hi), per_round + 2)[1:-1])
    pts = {min(max(int(round(m)), lo + 1), hi - 1) for m in inner}
    return sorted(pts - set(ms))


@dataclass
class _Cell:
    settings: dict[str, Any]
    tried: list[int] = field(default_factory=list)
    done: bool = False


def search_cells(spec: SweepSpec, store: ResultsStore, run_id: str, cells: list[dict[str, Any]], phase: str,
                 batches, rounds: _Rounds) -> None:
    """Bisection rounds (module docstring, phase 2) over ``cells`` until every m* is pinned
    or ``search.max_rounds`` rounds after the first have run."""
    s = spec.search
    states = [_Cell(c) for c in cells]
    for i in range(2 + s.max_rounds):
        results = _results(store, spec, run_id) if any(c.tried for c in states) else {}
        plan = []
        for cell in states:
            if cell.done:
                continue
            rates = {m: _rate(spec, cell.settings, m, results) for m in cell.tried}
            points = next_points(rates, s.m.min, s.m.max, spec.analysis.success_frac, s.rel_tol,
                                 s.initial_points, s.points_per_round)
            if not points:
                cell.done = True
                continue
            cell.tried += points
            plan += [_config(spec, cell.settings, m, seed) for m in points for seed in spec.seeds]
        if not plan:
            return
        if i == 1 + s.max_rounds:  # the rounds are spent and these cells still want points
            batches.console.print(
                f"[yellow]warning[/]: {phase}: {len(plan) // len(spec.seeds)} m value(s) of "
                f"{sum(not c.done for c in states)} cell(s) left untried after search.max_rounds = {s.max_rounds}: "
                "their m* is not pinned to search.rel_tol (raise max_rounds or points_per_round)")
            return
        r = rounds.next()
        left = sum(not c.done for c in states)
        extra = {"search_phase": phase, "search_round": r}
        if phase == "budget":
            plan = reuse_stopped_twins(spec, store, run_id, plan, batches, extra)
        batches.run_configs(plan, f"{phase} round {r}, {left} cells", extra)


# Draw failures that do not depend on the training budget (the data come from the seed).
BUDGET_FREE_ERRORS = ("AmbiguousTrainingSetError", "AmbiguityCheckTooLargeError")


def reuse_stopped_twins(spec: SweepSpec, store: ResultsStore, run_id: str, plan: list, batches,
                        extra: dict[str, Any]) -> list:
    """The budget check's trials that need training; the others are recorded from their twin.

    A budget trial (``max_epochs`` 2E) has a twin in the run: the same settings with E
    epochs. Training is deterministic given the seed, and a trial stops on its own when it
    fits its training set or diverges, so a twin that stopped before its E epochs, or whose
    training set could not be drawn, is what the doubled budget would give again: its row
    is stored under the budget trial's id with ``reused_from`` naming the twin (wall_s 0,
    attempts 0). Twins that ran out of epochs are trained again with 2E.

    Returns:
        The configs of ``plan`` still to run.
    """
    twins = {trial_id(c): trial_id(c.model_copy(update={"max_epochs": c.max_epochs // 2})) for c in plan}
    try:
        rows = (store.scan_run_trials(spec.name, run_id).filter(pl.col("trial_id").is_in(list(twins.values())))
                .collect().drop("sweep", "run_id"))
    except StoreError:
        return plan
    by_id = {r["trial_id"]: r for r in rows.iter_rows(named=True)}
    reused, todo = [], []
    now = dt.datetime.now(dt.UTC)
    for config in plan:
        tid = trial_id(config)
        twin = by_id.get(twins[tid])
        stopped = twin is not None and (
            (twin["status"] in ("done", "diverged") and twin["epochs"] is not None
             and twin["epochs"] < config.max_epochs // 2)
            or (twin["status"] == "failed" and twin["error_type"] in BUDGET_FREE_ERRORS))
        if stopped:
            reused.append({**twin, **extra, "trial_id": tid, "max_epochs": config.max_epochs,
                           "reused_from": twin["trial_id"], "wall_s": 0.0, "attempts": 0, "finished_at": now})
        else:
            todo.append(config)
    if reused:
        batches.record_reused(reused)
    return todo


def budget_cells(spec: SweepSpec, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per series (a cell without T, without its tuned settings), the cell at the largest T
    with ``max_epochs`` doubled. Empty when the cells have no T."""
    if not cells or "T" not in {**cells[0], **_defaults(spec, cells[0])}:
        return []
    tuned = set(spec.search.tune.params()) if spec.search.tune else set()
    largest: dict[str, dict] = {}
    for cell in cells:
        key = json.dumps({k: v for k, v in cell.items() if k not in tuned | {"T"}}, sort_keys=True, default=str)
        if key not in largest or cell["T"] > largest[key]["T"]:
            largest[key] = cell
    out = []
    for cell in largest.values():
        epochs = _defaults(spec, cell)["max_epochs"]
        out.append({**cell, "max_epochs": 2 * epochs})
    return out


# --- tuning with Optuna ----------------------------------------------------------------------------------


def study_dir(store: ResultsStore, sweep: str, run_id: str) -> Path:
    """Where a run's Optuna journals live: ``studies/sweep=S/run_id=R/`` under a local store
    root; for a store on an object store, a folder of the driver's machine
    (``~/.cache/attnsweep/studies/<hash of the store URI>/...``), as JournalStorage needs a
    local file with working locks."""
    if store.local:
        base = Path(store.root)
    else:
        base = Path.home() / ".cache" / "attnsweep" / "studies" / hashlib.sha256(str(store.root).encode()).hexdigest()[:16]
    return base / "studies" / f"sweep={sweep}" / f"run_id={run_id}"


def cell_key(cell: dict[str, Any]) -> str:
    """16 hex digits naming a cell (its study file, its sampler seed)."""
    return hashlib.sha256(json.dumps(cell, sort_keys=True, default=str).encode()).hexdigest()[:16]


def tune_cells(spec: SweepSpec, store: ResultsStore, run_id: str, cells: list[dict[str, Any]], batches,
               rounds: _Rounds) -> list[dict[str, float]]:
    """Optuna TPE over the tuned settings of every cell (module docstring, phase 1).

    Returns:
        The best parameters of each cell, in the order of ``cells``.
    """
    tune = spec.search.tune
    ranges = tune.params()
    dists = {k: optuna.distributions.FloatDistribution(r.min, r.max, log=True) for k, r in ranges.items()}
    probe = tune.m or int(round(math.sqrt(spec.search.m.min * spec.search.m.max)))
    seeds = spec.seeds[: tune.seeds]
    folder = study_dir(store, spec.name, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    studies = [_study(folder, cell, tune) for cell in cells]
    for b in range(math.ceil(tune.n_trials / tune.batch)):
        want = range(b * tune.batch, min((b + 1) * tune.batch, tune.n_trials))
        asked = [_asked(study, want, dists) for study in studies]
        plan = [_config(spec, {**cell, **params}, probe, seed)
                for cell, trials in zip(cells, asked) for _, params, told in trials if not told for seed in seeds]
        r = rounds.next()
        batches.run_configs(plan, f"tune round {r}, {len(cells)} cells",
                            {"search_phase": "tune", "search_round": r})
        results = _results(store, spec, run_id)
        for study, cell, trials in zip(studies, cells, asked):
            for number, params, told in trials:
                if not told:
                    scores = [_score(spec, results.get(_trial_id(spec, {**cell, **params}, probe, seed)))
                              for seed in seeds]
                    study.tell(number, float(np.mean(scores)))
    return [dict(study.best_trial.params) for study in studies]


def _study(folder: Path, cell: dict, tune) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    key = cell_key(cell)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(folder / f"{key}.journal")))
    sampler = optuna.samplers.TPESampler(seed=int(key[:8], 16), constant_liar=True,
                                         n_startup_trials=max(1, min(tune.batch, tune.n_trials // 2)))
    return optuna.create_study(study_name=key, storage=storage, sampler=sampler, direction="maximize",
                               load_if_exists=True)


def _asked(study: optuna.Study, want: range, dists: dict) -> list[tuple[int, dict, bool]]:
    """The study's trials numbered ``want``, as ``(number, params, told)``: those a crashed
    attempt already asked are reused, the rest asked now."""
    have = {t.number: t for t in study.get_trials(deepcopy=False) if t.number in want}
    out = []
    for number in want:
        if number in have:
            t = have[number]
            out.append((number, dict(t.params), t.state.is_finished()))
        else:
            t = study.ask(dists)
            out.append((t.number, dict(t.params), False))
    return out


def _score(spec: SweepSpec, row: dict | None) -> float:
    """A tuning trial's score (higher is better): sparse_boolean, test accuracy (0.5, chance,
    when it did not train or diverged); symmetry, -log10 of the relative test error (0 when
    it did not train)."""
    done = row is not None and row["status"] == "done"
    if spec.experiment == "symmetry":
        err = row.get("test_error") if done else None
        return -math.log10(max(err, 1e-12)) if err is not None and math.isfinite(err) else 0.0
    acc = row.get("test_acc") if done else None
    return acc if acc is not None and math.isfinite(acc) else 0.5


# --- shared ----------------------------------------------------------------------------------------------


def _config(spec: SweepSpec, cell: dict, m: int, seed: int):
    return spec.family.config(**cell, m=m, seed=seed)


def _trial_id(spec: SweepSpec, cell: dict, m: int, seed: int) -> str:
    return trial_id(_config(spec, cell, m, seed))


def _defaults(spec: SweepSpec, cell: dict) -> dict:
    """The cell's full settings, defaults included."""
    return _config(spec, cell, spec.search.m.min, spec.seeds[0]).model_dump()


def _results(store: ResultsStore, spec: SweepSpec, run_id: str) -> dict[str, dict]:
    """The run's rows so far, by trial id (status and the success measures only)."""
    cols = ["trial_id", "status", "test_acc", "test_error"]
    try:
        rows = store.scan_run_trials(spec.name, run_id).select(cols).collect()
    except StoreError:  # no rows yet: the first round of a new run
        return {}
    return {r["trial_id"]: r for r in rows.iter_rows(named=True)}


def _success(spec: SweepSpec, row: dict) -> bool:
    """Success as results/critical.py defines it: status done and the measure reached."""
    if row["status"] != "done":
        return False
    if spec.experiment == "symmetry":
        return row["test_error"] is not None and row["test_error"] <= spec.analysis.target_error
    return row["test_acc"] is not None and row["test_acc"] >= spec.analysis.acc_threshold


def _rate(spec: SweepSpec, cell: dict, m: int, results: dict[str, dict]) -> float:
    """Success rate over the seeds that trained at (cell, m); 0 when none trained."""
    rows = [results.get(_trial_id(spec, cell, m, seed)) for seed in spec.seeds]
    trained = [r for r in rows if r is not None and r["status"] in ("done", "diverged")]
    return sum(_success(spec, r) for r in trained) / len(trained) if trained else 0.0

