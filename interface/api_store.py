"""The Python API's reading side: open a store, read its tables, analyse a run (what
``attnsweep analyze`` computes), without the terminal output: polars frames and dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnsweep.orchestrator.errors import ArgumentError, AttnsweepError

if TYPE_CHECKING:
    import polars as pl

    from attnsweep.results import ResultsStore
    from attnsweep.stats.verdict_common import Verdict

DEFAULT_STORE = "results-store"
"""The store a CLI command uses without ``--store``."""


def open_store(path: str | Path = DEFAULT_STORE) -> Store:
    """The results store at ``path`` (a folder, or an fsspec URI such as ``s3://bucket/store``).

    Nothing is read until a table is asked for; a folder that does not exist yet is an
    empty store.

    Raises:
        AttnsweepError: ``path`` is empty, or exists and is not a folder.
    """
    return Store(path)


class Store:
    """A results store, read as the CLI reads it: every file checked once per version,
    damaged files set aside with a warning (results/store.py).

    Args:
        path: the store's folder or URI.

    Raises:
        AttnsweepError: ``path`` is empty, or exists and is not a folder.
    """

    def __init__(self, path: str | Path = DEFAULT_STORE):
        from attnsweep.results import ResultsStore

        if not isinstance(path, (str, Path)):
            raise ArgumentError(f"store: give a folder or a URI as a str or a Path, not {type(path).__name__}")
        text = str(path)
        if not text.strip():
            raise AttnsweepError("store: an empty path; give a folder (default results-store)")
        if "://" not in text and Path(text).exists() and not Path(text).is_dir():
            raise AttnsweepError(f"store: {text} exists and is not a folder")
        self.path = text
        self.results: ResultsStore = ResultsStore(text)
        """The underlying :class:`results.ResultsStore`."""

    def __repr__(self) -> str:
        return f"Store({self.path!r})"

    def trials(self, sweep: str | None = None, run: str | None = None) -> pl.LazyFrame:
        """Trial rows (one per trial, config and results, plus ``sweep`` and ``run_id``), as a
        polars LazyFrame; ``sweep`` and ``run`` filter them.

        A trial id stored twice in a run (a copied file) is read once, the latest copy, as
        every analysis reads it; ``attnsweep query`` shows the stored rows as they are.

        Raises:
            results.StoreError: the store holds no trials, no run of ``sweep``, or no run ``run``.
            AttnsweepError: ``run`` is a run of another sweep than ``sweep``.
        """
        import polars as pl

        from attnsweep.results import StoreError

        check_names(sweep=sweep, run=run)
        if run is not None:
            sweep_of_run = self.results.sweep_of(run)
            if sweep is not None and sweep != sweep_of_run:
                raise AttnsweepError(f"run {run} is a run of sweep {sweep_of_run!r}, not {sweep!r}")
            return self.results.scan_run_trials(sweep_of_run, run)
        scan = self.results.scan_trials()
        if sweep is not None:
            if self.runs(sweep).select("run_id").collect().is_empty():
                raise StoreError(f"no run of sweep {sweep!r} in the store at {self.path}")
            scan = scan.filter(pl.col("sweep") == sweep)
        if "trial_id" in scan.collect_schema():
            scan = scan.unique(subset=["sweep", "run_id", "trial_id"], keep="last", maintain_order=True)
        return scan

    def runs(self, sweep: str | None = None, run: str | None = None) -> pl.LazyFrame:
        """Run records (one row per run: spec, status, counts, provenance, attempts), as a
        polars LazyFrame (nothing is read until ``.collect()``), ordered by start time;
        ``sweep`` and ``run`` filter them.

        Raises:
            results.StoreError: the store holds no runs.
        """
        import polars as pl

        check_names(sweep=sweep, run=run)
        scan = self.results.scan_runs()
        if sweep is not None:
            scan = scan.filter(pl.col("sweep") == sweep)
        if run is not None:
            scan = scan.filter(pl.col("run_id") == run)
        return scan.sort("started_at")

    def latest_run(self, sweep: str | None = None) -> str:
        """The id (a str) of the run that started last (of ``sweep``, if given).

        Raises:
            results.StoreError: no runs (of that sweep).
        """
        from attnsweep.results import StoreError

        ids = self.runs(sweep).select("run_id").collect()["run_id"]
        if ids.is_empty():
            raise StoreError(f"no run of sweep {sweep!r} in the store at {self.path}")
        return ids[-1]

    def analyze(self, run: str | None = None, figures: str | Path | None = None) -> RunAnalysis:
        """Analyse a run as ``attnsweep analyze`` does: m* per cell with bootstrap intervals,
        the verdicts of its spec's own claims first (``claims:``, docs/spec.md; ``origin``
        ``spec``), then those of its experiment (L1-L4 and R for a sparse-Boolean run, S1-S4
        for a symmetry run; docs/claims.md), and its figures where ``figures`` is given. Writes no
        file without ``figures`` (the store is only read).

        Args:
            run: the run id, or a sweep's name for that sweep's latest run (default: the
                latest run).
            figures: a folder to write the PNG figures into (made where missing); None: no
                figure is drawn.

        Returns:
            A :class:`RunAnalysis`: the m* table (polars DataFrame), the verdicts, the
            figures written (empty without ``figures``), caveats and the full analysis.

        Raises:
            results.StoreError: no such run, or it has no trained trials.
            orchestrator.SpecError: the run's stored spec has invalid settings (the message names
                the run and the field).
            OSError: the figure folder cannot be written.
        """
        from attnsweep.analysis.boolean import run_caveats
        from attnsweep.analysis.context import RunContext
        from attnsweep.analysis.experiments import analysis_of

        check_names(run=run)
        if figures is not None and not isinstance(figures, (str, Path)):
            raise ArgumentError(f"figures: give a folder as a str or a Path, not {type(figures).__name__}")
        if figures is not None and Path(figures).exists() and not Path(figures).is_dir():
            raise ArgumentError(f"figures: {figures} exists and is not a folder")
        run = self.latest_run() if run is None else self.results.resolve_run(run)[0]  # a sweep's name: its latest run
        sweep = self.results.sweep_of(run)
        context = RunContext.load(self.results, sweep, run)
        folder = Path(figures) if figures is not None else None
        experiment = context.experiment
        kind = analysis_of(experiment)
        detail = kind.analyze(self.results, context, folder, False)
        verdicts = kind.verdicts(detail, context)
        if context.claims:  # the spec's own claims first, as analyze and report show them
            from attnsweep.analysis.claims import judge_own

            verdicts = [*judge_own(self.results, context, kind.m_star(detail)), *verdicts]
        return RunAnalysis(
            sweep,
            run,
            experiment,
            detail.m_star,
            verdicts,
            list(detail.figures),
            run_caveats(self.results, sweep, run, context),
            detail,
        )


@dataclass(frozen=True)
class CriticalSampleSize:
    """One cell's m* as the rows allow it to be stated (stats/critical.py, docs/claims.md 2).

    Attributes:
        cell: the cell's settings (every setting but m and the seed).
        estimate: m* in samples when ``bound`` is ``exact``; for a bound, the bound's value
            (``lower``: m* is above it, e.g. the largest m tried when no m reached the
            success rate; ``upper``: m* is at or below it); NaN for ``none``.
        ci_lo, ci_hi: its 95% interval (samples); a lower bound's runs from the bound (or
            below, where some resamples reach the rate) to ``inf``.
        bound: ``exact``, ``lower``, ``upper`` or ``none``.
        flags: ``non-monotone``, ``out-of-epochs``, ``budget-limited``, ``few-seeds``.
        m_star_grid: the smallest m tried whose success rate reaches the threshold (NaN if none).
        n_seeds, m_min, m_max: the seeds and the range of m tried.
        text: as the tables write it (``45.2``, ``> 1024``, ``≤ 8``).
    """

    cell: dict
    estimate: float
    ci_lo: float
    ci_hi: float
    bound: str
    flags: tuple[str, ...]
    m_star_grid: float
    n_seeds: int
    m_min: int
    m_max: int
    text: str


@dataclass
class RunAnalysis:
    """What :meth:`Store.analyze` found for one run.

    Attributes:
        m_star: one row per cell: ``m_star`` (the critical sample size: the 50% point of
            the success rate against m, stats/critical.py; for a bound the bound's value),
            ``bound`` (``exact``, ``lower``, ``upper``, ``none``), its 95% interval
            ``ci_lo``/``ci_hi``, ``flags`` and ``censored`` (``below``/``above``: m*
            outside the m tried). :meth:`m_star_of` gives one cell.
        verdicts: one dict per claim (docs/claims.md): ``id`` (``L1``... ``S4``), ``claim``,
            ``verdict`` (``supported``, ``not supported``, ``inconclusive``, ``not tested``),
            ``statistic``, ``interval``, ``why`` as text, and as numbers ``series`` (per judged
            series: ``cells``, its settings; ``verdict``; ``numbers``, quantities as
            ``{"estimate", "ci_lo", "ci_hi", "bound"}``), ``not_judged`` and ``flags``
            (stats/boolean_verdicts.py).
        figures: the PNG files written.
        caveats: what a reader must know (an unfinished run, missing rows), else empty.
        detail: the full analysis (:class:`analysis.boolean.Analysis`: fits and checks;
            or :class:`analysis.symmetry.SymmetryAnalysis`: the error tables,
            and for a run over several (n, k, d) its ``scale``: S1-S4 per group in
            ``scale.groups``, S2's advantage in ``scale.advantage``, the slopes across scale
            in ``scale.advantage_slopes`` and ``scale.error_slopes``, polars DataFrames).
    """

    sweep: str
    run_id: str
    experiment: str
    m_star: pl.DataFrame
    verdicts: list[Verdict]
    figures: list[Path] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    detail: Any = None

    def verdict_table(self) -> pl.DataFrame:
        """The verdicts as a DataFrame: id, claim, verdict, statistic, interval, why."""
        import polars as pl

        columns = ("id", "claim", "verdict", "statistic", "interval", "why")
        return pl.DataFrame(
            [{c: str(v.get(c, "")) for c in columns} for v in self.verdicts],
            schema={c: pl.String for c in columns},
        )

    @property
    def fits(self) -> pl.DataFrame:
        """The growth laws of m* against T per series of a sparse-Boolean run, one row per
        (series, law), the series' settings as columns (e.g. ``model``; see
        :meth:`analysis.boolean.Analysis.fit_table`); empty for a symmetry run."""
        import polars as pl

        fit_table = getattr(self.detail, "fit_table", None)
        return fit_table() if fit_table is not None else pl.DataFrame()

    def m_star_of(self, **cell) -> CriticalSampleSize:
        """One cell's m*, e.g. ``m_star_of(model="transformer", T=1024)``: the settings that
        pick one row of :attr:`m_star` (those that do not vary need not be given; None
        matches an unset setting such as an unbounded ``norm_bound``).

        Raises:
            AttnsweepError: a setting the table has no column for, no cell matches, or
                several do (the message names the settings that tell them apart).
            orchestrator.ArgumentError: a value of another type than its setting's (a str
                for T, a list for anything).
        """
        import polars as pl

        from attnsweep.stats.boolean_cells import RESULT_COLUMNS
        from attnsweep.stats.critical import format_m_star

        table = self.m_star
        unknown = sorted(set(cell) - set(table.columns))
        if unknown:
            fields = [c for c in table.columns if c not in RESULT_COLUMNS]
            raise AttnsweepError(
                f"m_star_of: no setting {', '.join(unknown)}; the cells are named by {', '.join(fields)}"
            )
        for name, value in cell.items():
            _comparable(name, value, table.schema[name])
            table = table.filter(pl.col(name).is_null() if value is None else pl.col(name) == value)
        if table.is_empty():
            have = {name: _sorted(self.m_star[name].unique().to_list()) for name in cell}
            raise AttnsweepError(
                f"m_star_of: no cell with {_settings(cell)}; the run has "
                + "; ".join(f"{k}: {v}" for k, v in have.items())
            )
        if table.height > 1:
            apart = [c for c in table.columns if c not in RESULT_COLUMNS and table[c].n_unique() > 1]
            raise AttnsweepError(
                f"m_star_of: {table.height} cells have {_settings(cell)}; give also "
                + ", ".join(f"{c} (one of {_sorted(table[c].unique().to_list())})" for c in apart)
            )
        r = table.row(0, named=True)
        fields = {c: r[c] for c in table.columns if c not in RESULT_COLUMNS}
        return CriticalSampleSize(
            cell=fields,
            estimate=_float(r["m_star"]),
            ci_lo=_float(r["ci_lo"]),
            ci_hi=_float(r["ci_hi"]),
            bound=r["bound"],
            flags=tuple(f for f in (r.get("flags") or "").split("; ") if f),
            m_star_grid=_float(r["m_star_grid"]),
            n_seeds=r["n_seeds"],
            m_min=r["m_min"],
            m_max=r["m_max"],
            text=format_m_star(r["m_star"], r["bound"]),
        )

    def show(self) -> None:
        """Display the run's figures inline in Jupyter or IPython; elsewhere (a script)
        print their paths."""
        try:
            from IPython import get_ipython
            from IPython.display import Image, display
        except ImportError:
            get_ipython = None
        if get_ipython is None or get_ipython() is None:
            for path in self.figures:
                print(path)
            return
        for path in self.figures:
            display(Image(filename=str(path)))


def _comparable(name: str, value, dtype) -> None:
    """Raise ArgumentError unless ``value`` (None, or one value) is of the kind the column
    ``name`` of polars type ``dtype`` holds."""
    import polars as pl

    if value is None:
        return
    if dtype.is_numeric():
        ok, kind = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif dtype == pl.Boolean:
        ok, kind = isinstance(value, bool), "True or False"
    else:
        ok, kind = isinstance(value, str), "a str"
    if not ok:
        raise ArgumentError(f"m_star_of: {name}={value!r}: give {kind} (or None), one value")


def check_names(**names) -> None:
    """Raise ArgumentError unless each given sweep or run name is a str (or None)."""
    for key, value in names.items():
        if value is not None and not isinstance(value, str):
            raise ArgumentError(f"{key}: give the name as a str, not {type(value).__name__} ({value!r})")


def _sorted(values: list) -> list:
    """Values in order (numbers by value, None first); mixed types by their text."""
    try:
        return sorted(values, key=lambda v: (v is not None, v))
    except TypeError:
        return sorted(values, key=str)


def _float(value) -> float:
    return float("nan") if value is None else float(value)


def _settings(cell: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cell.items()) or "no settings"
