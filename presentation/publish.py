"""Writing a findings folder: every trial row of the runs (trials.parquet), their run records
(runs.parquet), the m*-against-T figure, findings.md and the folder's SHA256SUMS, made from the
results store by ``attnsweep report RUN_ID --publish``.

Beside the report's own files (report.html, verdicts.json, figures/ and m_star.csv, see
presentation/report.py) the folder gets

* ``trials.parquet``: every trial row of the runs, one file, so that every number can be
  recomputed without rerunning (``attnsweep``'s m* code, or any Parquet reader);
* ``m_star_vs_T.png``: m* against T for 3-way AND (presentation/m_star_figure.py);
* ``findings.md``: the verdicts with their statistics, intervals and reasons, exactly the
  strings of verdicts.json (presentation/findings_boolean.py, findings_symmetry.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from attnsweep.analysis.symmetry import SymmetryAnalysis
from attnsweep.orchestrator.trials_table import run_schema
from attnsweep.presentation.findings_boolean import render
from attnsweep.presentation.findings_symmetry import render_symmetry
from attnsweep.presentation.folder import FIGURE, RUNS, SUMS, TRIALS
from attnsweep.presentation.m_star_figure import laws_of, plot_main_series
from attnsweep.presentation.markdown import md_text
from attnsweep.results import ResultsStore
from attnsweep.results.outputs import replacing, write_text
from attnsweep.stats.boolean_cells import read_reference


def publish(
    store: ResultsStore,
    runs: list[tuple[str, str]],
    out_dir: Path,
    union: pl.DataFrame | None,
    claims: list[dict],
    reference: Path | str,
    ci: float,
    caveats: list[str] = (),
    symmetry: Sequence[SymmetryAnalysis] = (),
    untested: str = "",
) -> Path:
    """Write trials.parquet, runs.parquet, the m*-against-T figure (with sparse-Boolean runs)
    and findings.md into ``out_dir``.

    Args:
        runs: ``(sweep, run_id)`` of the runs, in the report's order.
        union: the report's m* table of the sparse-Boolean runs (one row per cell, with a
            ``replicates`` list column); None when the report has none.
        claims: the report's verdicts (dicts with ``claim``, ``verdict``, ``statistic``,
            ``interval``, ``why``), as written to verdicts.json.
        reference: the paper's read-off (CSV).
        ci: the intervals' coverage.
        caveats: warnings the page must carry (a run unfinished or incomplete).
        symmetry: the analyses of the report's symmetry runs (their figures are in
            ``out_dir/figures/RUN_ID/``).
        untested: the line naming the paper's claims the runs do not test (analysis/claims.py
            ``untested_line``), shown under the first claims table; "" when all are tested.

    Returns:
        The path of findings.md.
    """
    out_dir = Path(out_dir)
    rows = write_rows(store, runs, out_dir / TRIALS)
    write_runs(store, runs, out_dir / RUNS)
    write_sums(out_dir)
    if union is not None:
        plot_main_series(union, read_reference(reference), out_dir / FIGURE, ci, laws=laws_of(union, claims))
    path = out_dir / "findings.md"
    records = run_records(store, runs)
    parts = [own_claims_section(claims)] if any(v.get("origin") == "spec" for v in claims) else []
    if union is not None:
        parts.append(render(records, claims, union, base="", caveats=caveats, rows=rows, untested=untested))
    if symmetry:
        parts.append(
            render_symmetry(
                records,
                claims,
                symmetry,
                base="",
                caveats=caveats,
                out_dir=out_dir,
                full=True,
                untested="" if union is not None else untested,
            )
        )
    return write_text(path, "\n".join(parts))


def own_claims_section(claims: list[dict]) -> str:
    """The runs' own claims (their specs' ``claims:``, ``origin`` ``spec``) as the findings'
    first section: one table row each, as the paper's claims' tables show them."""
    lines = [
        "## Your claims",
        "",
        "The claims of the runs' specs (`claims:`, docs/spec.md), judged by the rules of the paper's claims: every "
        "estimator of m*, a bound never used as a value, the span and AICc rules for a growth law, pre-set effect "
        "sizes (docs/claims.md, section 5).",
        "",
        "| claim | verdict | statistic | interval | why |",
        "|---|---|---|---|---|",
    ]
    for v in claims:
        if v.get("origin") == "spec":
            lines.append(
                "| " + " | ".join(md_text(v[k]) for k in ("claim", "verdict", "statistic", "interval", "why")) + " |"
            )
    return "\n".join([*lines, ""])


def write_rows(store: ResultsStore, runs: Sequence[tuple[str, str]], path: Path) -> pl.DataFrame:
    """Every trial row of ``runs`` as one Parquet file at ``path``, sorted by run and trial id
    (so the file made again from its own rows is the same file), with page checksums (so that
    presentation/published.py ``load`` finds a damaged page instead of reading it).

    Returns:
        The rows written, one per trial.
    """
    frames = [store.scan_run_trials(sweep, run_id).collect() for sweep, run_id in runs]
    rows = pl.concat(frames, how="diagonal_relaxed").sort("run_id", "trial_id")
    with replacing(path) as temp:  # a link at the name is replaced (results/outputs.py)
        pq.write_table(rows.to_arrow(), temp, write_page_checksum=True, write_statistics=True)
    return rows


def write_runs(store: ResultsStore, runs: list[tuple[str, str]], path: Path) -> Path:
    """The runs' records (the store's ``runs`` rows, with ``sweep`` and ``run_id``) as one
    Parquet file: with trials.parquet, all :func:`load` needs to rebuild a store."""
    schema = run_schema().append(pa.field("sweep", pa.string())).append(pa.field("run_id", pa.string()))
    rows = [
        {
            **{k: v for k, v in store.read_run(sweep, run_id).items() if k in schema.names},
            "sweep": sweep,
            "run_id": run_id,
        }
        for sweep, run_id in runs
    ]
    with replacing(path) as temp:
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), temp, write_page_checksum=True)
    return path


def write_sums(folder: Path) -> Path:
    """:data:`SUMS` in ``folder``: the SHA-256 of runs.parquet and trials.parquet, in the
    format ``sha256sum -c`` checks. Page checksums miss a changed byte in a file's footer
    (its schema, its statistics); the whole-file digest does not."""
    lines = [f"{sha256_file(Path(folder) / name)}  {name}\n" for name in (RUNS, TRIALS)]
    path = Path(folder) / SUMS
    return write_text(path, "".join(lines), encoding="ascii")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_records(store: ResultsStore, runs: list[tuple[str, str]]) -> list[dict]:
    """Each run's record (the ``runs`` table) with its ``sweep`` and ``run_id``; a run still
    recorded as running with the counts of the trials stored (:func:`analysis.completeness.as_stored`),
    as its warning counts them."""
    from attnsweep.analysis.completeness import as_stored

    return [
        dict(as_stored(store, sweep, run_id, store.read_run(sweep, run_id)), sweep=sweep, run_id=run_id)
        for sweep, run_id in runs
    ]
