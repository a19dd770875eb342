"""Adaptive m* search: put trials where they decide the critical sample size.

A spec with ``search: {mode: adaptive, ...}`` (orchestrator/spec.py, SearchSettings) runs one *flow* per
cell, a sequence of *rounds* in up to four phases; a round is one batch of trials of that cell, streamed
into the store like a grid sweep's, every row carrying ``search_phase`` and ``search_round`` (the round's
number within its cell, counted across the phases). The flows are independent: a cell starts its next round
as soon as its last one has every row, while other cells' packs still train (orchestrator/driver.py,
``PackRunner.run_cells``).

1. ``search``: bisection on log m of the success rate with the spec's own settings. Round 0 tries
   ``initial_points`` log-spaced m over ``search.m`` (both ends included; with ``smallest_first``, ``m.min``
   alone, then the others only if it fails there); each later round splits the bracket [lo, hi] (lo: the
   largest tried m below hi whose success rate is below ``analysis.success_frac``; hi: the smallest tried m
   whose rate reaches it) at ``points_per_round`` log-spaced interior points, until hi / lo <= 1 +
   ``rel_tol`` or hi - lo <= 1. A cell whose largest m fails (m* above the range) or whose smallest m
   succeeds (m* at or below it) stops at once. Every tried m runs all of the spec's seeds, so m* and its
   bootstrap interval come from stats/critical.py exactly as for a grid. 2. ``tune`` (with ``search.tune``):
   an Optuna TPE study over the learning rate and weight decay, ``tune.batch`` parameter sets per round,
   each trained on ``tune.seeds`` seeds at the probe sample size: by default the bracket's lo from phase 1,
   where the spec's own settings just fail, so a better setting shows (:func:`probe_m`). The study lives in
   a JournalStorage file, one per cell (:func:`study_dir`). The best set is adopted only when it beats the
   spec's settings, scored on the same seeds at the same m, in at least ``tune.confidence`` of seed-
   bootstrap resamples (:func:`robust_choice`). 3. ``tuned`` (when a set was adopted): phase 1 again with
   the adopted settings. The analysis (analysis/boolean.py) compares the two m* and flags a cell where
   tuning made m* worse. 4. ``budget`` (``search.budget_check``): for cells with a context length T, at the
   largest T of each series, phase 1 again with the cell's final settings and twice ``max_epochs``; the
   analysis marks that cell's m* budget-limited when the m* found with the doubled budget falls outside its
   interval. For cells without T (the symmetry experiment), every cell's deciding m
   (:func:`deciding_points`) again at twice ``max_epochs``; the analysis marks the cell budget-limited when
   the outcome at one of them (success rate at or above ``analysis.success_frac``, or not) changes with the
   doubled budget. Trials whose twin stopped before its epochs ran out are reused, not trained again
   (:func:`reuse_stopped_twins`).

Resuming after a crash replays the flows: each round's choices depend only on the rows of the cell's earlier
rounds, which the store holds, so the replay makes the same choices, and trials the run already holds (by
trial id) are skipped, never repeated. Optuna trials asked but not told before the crash are read back from
the journal and completed from the store."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import math
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import optuna
import polars as pl

from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.orchestrator.spec import SweepSpec, trial_id
from attnsweep.results import ResultsStore, StoreError

PHASES = ("search", "tune", "tuned", "budget")


@dataclass
class Request:
    """A round of an adaptive search's cell: trials to run, and columns for their rows."""

    configs: list
    extra: dict = field(default_factory=dict)


Flow = Generator[Request, None, Any]


class TrialRunner(Protocol):
    """What the search needs of whoever runs its trials (the driver's ``PackRunner``):
    the search never imports the driver, the driver hands it one of these."""

    rows_by_id: dict[str, dict]
    """The rows of the run so far, by trial id (filled by :meth:`keep_rows`, then by every pack)."""
    console: Any
    writer: Any

    def keep_rows(self, store: ResultsStore, sweep: str, run_id: str) -> None: ...

    def record_reused(self, rows: list[dict]) -> int: ...

    def run_cells(self, flows: list[Flow], label: str) -> None:
        """Advance every flow, running the trials of each :class:`Request` it yields."""


def run_adaptive(spec: SweepSpec, store: ResultsStore, run_id: str, runner: TrialRunner) -> None:
    """Run the adaptive search (module docstring) through ``runner`` (:class:`TrialRunner`;
    the driver's ``PackRunner`` skips trials the run already holds and holds the rows of
    the run so far in ``rows_by_id``)."""
    cells = list(spec.cells())
    runner.keep_rows(store, spec.name, run_id)
    largest = {cell_key(c) for c in budget_cells(spec, cells)} if spec.search.budget_check else set()
    if spec.search.budget_check and cells and "T" not in _defaults(spec, cells[0]):
        largest = {cell_key(c) for c in cells}  # no T: every cell's deciding m is checked
    flows = [cell_flow(spec, store, run_id, cell, runner, cell_key(cell) in largest) for cell in cells]
    runner.run_cells(flows, f"{spec.name} {run_id}: adaptive search of {len(cells)} cells")


def cell_flow(spec: SweepSpec, store: ResultsStore, run_id: str, cell: dict[str, Any], runner, budget: bool) -> Flow:
    """The rounds of one cell, phase by phase (module docstring); ``budget``: the cell gets
    the budget check (the largest T of its series; every cell without T)."""
    rounds = itertools.count()
    rates = yield from bisect(spec, cell, "search", runner, rounds)
    final = cell
    if spec.search.tune is not None:
        chosen = yield from tune_cell(spec, store, run_id, cell, rates, runner, rounds)
        if chosen is not None:
            final = {**cell, **chosen}
            rates = yield from bisect(spec, final, "tuned", runner, rounds)
    if budget:
        doubled = {**final, "max_epochs": 2 * _defaults(spec, final)["max_epochs"]}
        if "T" in _defaults(spec, final):
            yield from bisect(spec, doubled, "budget", runner, rounds, reuse=(store, run_id))
        else:
            points = deciding_points(rates, spec.analysis.success_frac)
            extra = {"search_phase": "budget", "search_round": next(rounds)}
            plan = reuse_stopped_twins(
                spec,
                store,
                run_id,
                [_config(spec, doubled, m, seed) for m in points for seed in spec.seeds],
                runner,
                extra,
            )
            if plan:
                yield Request(plan, extra)


def deciding_points(rates: dict[int, float], success_frac: float) -> list[int]:
    """The sample sizes that decide a searched cell's m*: the smallest m whose success rate reaches
    ``success_frac`` and the largest tried m below it (the bracket), or the largest m tried when none
    reaches it (m* beyond the range). More epochs move m* only by changing the outcome at one of them."""
    ms = sorted(rates)
    reached = [m for m in ms if rates[m] >= success_frac]
    if not reached:
        return ms[-1:]
    below = [m for m in ms if m < reached[0]]
    return [*below[-1:], reached[0]]


# --- bisection on log m ----------------------------------------------------------------------------------


def initial_points(m_min: int, m_max: int, n: int) -> list[int]:
    """``n`` log-spaced integer sample sizes from ``m_min`` to ``m_max``, ends included,
    duplicates (after rounding) dropped."""
    return list(dict.fromkeys(int(round(m)) for m in np.geomspace(m_min, m_max, n)))


def next_points(
    rates: dict[int, float],
    m_min: int,
    m_max: int,
    success_frac: float,
    rel_tol: float,
    n_initial: int,
    per_round: int,
    smallest_first: bool = False,
) -> list[int]:
    """The sample sizes a cell tries next; empty when its m* is pinned (module docstring).

    Args:
        rates: success rate over seeds at each m tried so far (an m with no trained trial
            counts as rate 0: nothing was learned there).
        m_min, m_max: the search range.
        success_frac: the rate that defines m*.
        rel_tol: stop when the bracket's hi / lo <= 1 + rel_tol.
        n_initial: points of the first round; per_round: points of each later round.
        smallest_first: the first round is ``m_min`` alone, and the rest of the first points
            follow only if it fails there (a cell that succeeds at ``m_min`` is settled).
    """
    if smallest_first and not rates:
        return [m_min]
    if smallest_first and set(rates) == {m_min} and rates[m_min] < success_frac:
        return initial_points(m_min, m_max, n_initial)[1:]
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


def bisect(spec: SweepSpec, cell: dict[str, Any], phase: str, runner, rounds, reuse=None) -> Flow:
    """Bisection rounds on log m (module docstring, phase 1) for one cell until its m* is
    pinned or ``search.max_rounds`` rounds after the first have run.

    Args:
        cell: the cell's settings.
        phase: the ``search_phase`` its rows carry.
        runner: the run's PackRunner (its ``rows_by_id`` are read after each round).
        rounds: the cell's round counter (an iterator of ints).
        reuse: ``(store, run_id)`` for the budget check: twins that stopped early are reused.

    Returns:
        The success rate at each m tried.
    """
    s = spec.search
    tried: list[int] = []
    first = 2 if s.smallest_first else 1  # rounds that place the first points
    for i in range(1 + first + s.max_rounds):
        rates = {m: _rate(spec, cell, m, runner.rows_by_id) for m in tried}
        points = next_points(
            rates,
            s.m.min,
            s.m.max,
            spec.analysis.success_frac,
            s.rel_tol,
            s.initial_points,
            s.points_per_round,
            s.smallest_first,
        )
        if not points:
            return rates
        if i == first + s.max_rounds:  # the rounds are spent and the cell still wants points
            runner.console.print(
                f"[yellow]warning[/]: {phase}: cell {_describe(cell)}: m = {points} left untried after "
                f"search.max_rounds = {s.max_rounds}: its m* is not pinned to search.rel_tol "
                "(raise max_rounds or points_per_round)"
            )
            return rates
        tried += points
        extra = {"search_phase": phase, "search_round": next(rounds)}
        plan = [_config(spec, cell, m, seed) for m in points for seed in spec.seeds]
        if reuse is not None:
            plan = reuse_stopped_twins(spec, *reuse, plan, runner, extra)
        if plan:
            yield Request(plan, extra)
    return {m: _rate(spec, cell, m, runner.rows_by_id) for m in tried}


def _describe(cell: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in cell.items())


# Draw failures that do not depend on the training budget (the data come from the seed).
BUDGET_FREE_ERRORS = ("AmbiguousTrainingSetError", "AmbiguityCheckTooLargeError")


def reuse_stopped_twins(
    spec: SweepSpec, store: ResultsStore, run_id: str, plan: list, runner, extra: dict[str, Any]
) -> list:
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
    runner.writer.flush()  # the twins' rows may still be in the write buffer
    try:
        rows = (
            store.scan_run_trials(spec.name, run_id)
            .filter(pl.col("trial_id").is_in(list(twins.values())))
            .collect()
            .drop("sweep", "run_id")
        )
    except StoreError:
        return plan
    by_id = {r["trial_id"]: r for r in rows.iter_rows(named=True)}
    reused, todo = [], []
    now = dt.datetime.now(dt.UTC)
    for config in plan:
        tid = trial_id(config)
        twin = by_id.get(twins[tid])
        stopped = twin is not None and (
            (
                twin["status"] in ("done", "diverged")
                and twin["epochs"] is not None
                and twin["epochs"] < config.max_epochs // 2
            )
            or (twin["status"] == "failed" and twin["error_type"] in BUDGET_FREE_ERRORS)
        )
        if stopped:
            reused.append(
                {
                    **twin,
                    **extra,
                    "trial_id": tid,
                    "max_epochs": config.max_epochs,
                    "reused_from": twin["trial_id"],
                    "wall_s": 0.0,
                    "attempts": 0,
                    "finished_at": now,
                }
            )
        else:
            todo.append(config)
    if reused:
        runner.record_reused(reused)
    return todo


def budget_cells(spec: SweepSpec, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per series (a cell without T), the cell at the largest T: the cells the budget check
    searches again at twice ``max_epochs``. Empty when the cells have no T."""
    if not cells or "T" not in _defaults(spec, cells[0]):
        return []
    largest: dict[str, tuple[int, dict]] = {}
    for cell in cells:
        T = _defaults(spec, cell)["T"]
        key = json.dumps({k: v for k, v in cell.items() if k != "T"}, sort_keys=True, default=str)
        if key not in largest or largest[key][0] < T:
            largest[key] = (T, cell)
    return [cell for _, cell in largest.values()]


# --- tuning with Optuna ----------------------------------------------------------------------------------


def study_dir(store: ResultsStore, sweep: str, run_id: str) -> Path:
    """Where a run's Optuna journals live: ``studies/sweep=S/run_id=R/`` under a local store
    root; for a store on an object store, a folder of the driver's machine
    (``~/.cache/attnsweep/studies/<hash of the store URI>/...``), as JournalStorage needs a
    local file with working locks."""
    if store.local:
        base = Path(store.root)
    else:
        base = (
            Path.home() / ".cache" / "attnsweep" / "studies" / hashlib.sha256(str(store.root).encode()).hexdigest()[:16]
        )
    return base / "studies" / f"sweep={sweep}" / f"run_id={run_id}"


def cell_key(cell: dict[str, Any]) -> str:
    """16 hex digits naming a cell (its study file, its sampler seed)."""
    return hashlib.sha256(json.dumps(cell, sort_keys=True, default=str).encode()).hexdigest()[:16]


def probe_m(rates: dict[int, float], success_frac: float, m_max: int) -> int | None:
    """The sample size tuning probes: the bracket's lo (the largest tried m below the first
    that reaches ``success_frac``), where the spec's settings just fail, so a setting that
    needs fewer samples scores higher there; ``m_max`` when no tried m reaches it; None when
    the smallest m already does (m* is at the range's start: tuning cannot lower it)."""
    ms = sorted(rates)
    reached = [m for m in ms if rates[m] >= success_frac]
    if not reached:
        return m_max
    below = [m for m in ms if m < reached[0]]
    return below[-1] if below else None


@dataclass(frozen=True)
class TuningChoice:
    """The outcome of :func:`robust_choice` (fractions of bootstrap resamples of the seeds)."""

    best: int
    """Index of the candidate with the highest mean score."""
    win_frac: float
    """How often ``best`` has the highest mean among the candidates and the default."""
    beats_default: float
    """How often ``best``'s mean is above the default's (a tie counts one half)."""
    adopted: bool
    """``beats_default >= confidence``: the cell's search uses ``best``."""


def robust_choice(
    candidates: np.ndarray,
    default: np.ndarray,
    confidence: float,
    n_boot: int = 1000,
    seed: int = 0,
) -> TuningChoice:
    """Choose among tuned parameter sets so that seed noise cannot pick a worse one.

    The seeds are resampled with replacement ``n_boot`` times, the same resample for every
    set (the scores are paired by seed), and the best set by mean score is adopted only when
    it beats the default in at least ``confidence`` of the resamples.

    Args:
        candidates: ``(sets, seeds)`` float scores of the tuned sets (higher is better).
        default: ``(seeds,)`` scores of the spec's own settings on the same seeds and m.
        confidence: the fraction of resamples the best set must win against the default.
        n_boot: resamples; seed: of the resampling generator (fixed: the choice replays).

    Raises:
        ValueError: no candidate, or the seeds of candidates and default differ in number.
    """
    candidates = np.asarray(candidates, dtype=np.float64)
    default = np.asarray(default, dtype=np.float64)
    if candidates.ndim != 2 or not candidates.shape[0] or candidates.shape[1] != default.shape[0]:
        raise ValueError(
            f"need (sets, seeds) scores and (seeds,) default scores, got {candidates.shape} and {default.shape}"
        )
    best = int(np.argmax(candidates.mean(axis=1)))
    idx = np.random.default_rng(seed).integers(0, default.shape[0], size=(n_boot, default.shape[0]))
    means = np.vstack([default[idx].mean(axis=1), candidates[:, idx].mean(axis=2)])  # (1 + sets, n_boot)
    win = float(np.mean(np.argmax(means, axis=0) == best + 1))  # ties go to the default (row 0)
    beats = float(np.mean(means[best + 1] > means[0]) + 0.5 * np.mean(means[best + 1] == means[0]))
    return TuningChoice(best, win, beats, beats >= confidence)


def tune_cell(
    spec: SweepSpec,
    store: ResultsStore,
    run_id: str,
    cell: dict[str, Any],
    rates: dict[int, float],
    runner,
    rounds,
) -> Flow:
    """Optuna TPE over the tuned settings of one cell (module docstring, phase 2).

    Returns:
        The adopted parameters, or None when the spec's own settings stay (no set beat
        them robustly, or m* is already at the range's start).
    """
    tune = spec.search.tune
    probe = tune.m or probe_m(rates, spec.analysis.success_frac, spec.search.m.max)
    if probe is None:
        return None
    dists = {k: optuna.distributions.FloatDistribution(r.min, r.max, log=True) for k, r in tune.params().items()}
    seeds = spec.seeds[: tune.seeds or 8]
    folder = study_dir(store, spec.name, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    study = _study(folder, cell, tune)
    defaults = [_config(spec, cell, probe, seed) for seed in seeds]  # usually already run by phase 1
    for b in range(math.ceil(tune.n_trials / tune.batch)):
        asked = _asked(study, range(b * tune.batch, min((b + 1) * tune.batch, tune.n_trials)), dists)
        plan = [
            _config(spec, {**cell, **params}, probe, seed) for _, params, told in asked if not told for seed in seeds
        ]
        if plan or (b == 0 and any(trial_id(c) not in runner.rows_by_id for c in defaults)):
            yield Request(
                [*(defaults if b == 0 else []), *plan],
                {"search_phase": "tune", "search_round": next(rounds)},
            )
        if any(not told for _, _, told in asked):
            # The rows must be in the store before the study says the trials are done: a crash
            # between a tell and the writer's next flush would leave told trials whose rows a
            # resume never runs again.
            runner.writer.flush()
        for number, params, told in asked:
            if not told:
                scores = [
                    _score(spec, runner.rows_by_id.get(_trial_id(spec, {**cell, **params}, probe, seed)))
                    for seed in seeds
                ]
                study.tell(number, float(np.mean(scores)))
    sets = [
        dict(t.params)
        for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
        if t.number < tune.n_trials and t.state.is_finished()
    ]
    table = np.array(
        [
            [_score(spec, runner.rows_by_id.get(_trial_id(spec, {**cell, **p}, probe, seed))) for seed in seeds]
            for p in sets
        ]
    )
    default = np.array([_score(spec, runner.rows_by_id.get(trial_id(c))) for c in defaults])
    choice = robust_choice(table, default, tune.confidence)
    return sets[choice.best] if choice.adopted else None


def _study(folder: Path, cell: dict, tune) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    key = cell_key(cell)
    journal = folder / f"{key}.journal"
    # A driver killed while it held the journal's lock leaves the lock behind (a symlink to the
    # journal, dangling when the kill came before the journal's first write), and Optuna's
    # acquire then spins on it forever. Only the driver holding this run's lock reaches here,
    # so a lock left there is a dead driver's.
    stale = Path(f"{journal}.lock")
    if stale.is_symlink() or stale.exists():
        stale.unlink()
    sampler = optuna.samplers.TPESampler(
        seed=int(key[:8], 16),
        constant_liar=True,
        n_startup_trials=max(1, min(tune.batch, tune.n_trials // 2)),
    )
    try:  # the journal is replayed here: a damaged or hostile line (it travels with store export) is one error
        storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
        return optuna.create_study(
            study_name=key, storage=storage, sampler=sampler, direction="maximize", load_if_exists=True
        )
    except Exception as exc:  # noqa: BLE001 - Optuna's replay raises what a line makes it (RecursionError, AssertionError, ...)
        raise AttnsweepError(
            f"{journal}: the adaptive search's Optuna journal of this cell cannot be read ({type(exc).__name__}: "
            f"{str(exc)[:200]}): the run cannot resume this cell's tuning from it"
        ) from None


def _asked(study: optuna.Study, want: range, dists: dict) -> list[tuple[int, dict, bool]]:
    """The study's trials numbered ``want``, as ``(number, params, told)``: those a crashed
    attempt already asked are reused, the rest asked now."""
    have = {t.number: t for t in study.get_trials(deepcopy=False) if t.number in want}
    out = []
    for number in want:
        if number in have:
            t = have[number]
            params = dict(t.params)
            if not t.state.is_finished() and set(params) != set(dists):
                # A crash between the journal's "new trial" and its parameters left some unset:
                # fill them with a draw fixed by the study and number, so a resume that reads
                # this trial again trains the settings it records (not the spec's defaults).
                rng = np.random.default_rng([int(study.study_name[:8], 16), number])
                for name, dist in dists.items():
                    if name not in params:
                        value = float(np.exp(rng.uniform(math.log(dist.low), math.log(dist.high))))
                        study._storage.set_trial_param(t._trial_id, name, dist.to_internal_repr(value), dist)
                        params[name] = value
            out.append((number, params, t.state.is_finished()))
        else:
            t = study.ask(dists)
            out.append((t.number, dict(t.params), False))
    return out


def _score(spec: SweepSpec, row: dict | None) -> float:
    """A tuning trial's score (higher is better), as its experiment defines it
    (workers/experiments.py ``tuning_score``): sparse_boolean, test accuracy (0.5, chance, when
    it did not train or diverged); symmetry, -log10 of the relative test error (0 when it did
    not train)."""
    return spec.family.tuning_score(row)


# --- shared ----------------------------------------------------------------------------------------------


def _config(spec: SweepSpec, cell: dict, m: int, seed: int):
    return spec.family.config(**cell, m=m, seed=seed)


def _trial_id(spec: SweepSpec, cell: dict, m: int, seed: int) -> str:
    return trial_id(_config(spec, cell, m, seed))


def _defaults(spec: SweepSpec, cell: dict) -> dict:
    """The cell's full settings, defaults included."""
    return _config(spec, cell, spec.search.m.min, spec.seeds[0]).model_dump()


def _success(spec: SweepSpec, row: dict) -> bool:
    """Success as stats/critical.py defines it: status done and the experiment's measure reached
    (workers/experiments.py ``succeeds``)."""
    return spec.family.succeeds(row, spec.analysis)


def _rate(spec: SweepSpec, cell: dict, m: int, results: dict[str, dict]) -> float:
    """Success rate over the seeds that trained at (cell, m); 0 when none trained."""
    rows = [results.get(_trial_id(spec, cell, m, seed)) for seed in spec.seeds]
    trained = [r for r in rows if r is not None and r["status"] in ("done", "diverged")]
    return sum(_success(spec, r) for r in trained) / len(trained) if trained else 0.0
