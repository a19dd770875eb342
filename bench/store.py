"""The results store at sweep scale: writing, a filtered query and the m* analysis.

Builds a store of ``--rows`` (default 1,000,000) synthetic sparse_boolean trial rows in a
temporary folder and times three things:

1. Writing: the rows go through ``results.TrialWriter`` (flush_rows 5000, as the driver
   uses) with ``orchestrator.trials_table.trial_schema()``. Rows are made as the driver's
   ``_rows`` makes them (config fields, worker results, code_version, finished_at) in
   batches of 5000 dicts; only ``TrialWriter.append`` and the final ``flush`` are timed
   (dict -> Arrow table, Parquet encoding, fsync, rename), not making the dicts. One pass:
   writing again would need another store of the same size.
2. The first query after the run, which reads every file in full to check it (page
   checksums, decoding) and records the checked versions, and ``store check``, which
   always reads everything. Then a filtered query (T == 1024, transformer; 4 columns), through ``results.run_query``
   (what ``attnsweep query`` runs) and through polars directly, ``--query-repeats`` times;
   each call scans the store afresh (new ResultsStore, new lazy scan; the OS file cache
   is warm).
3. The m* analysis: ``analysis.boolean.analyze_run`` (reads the run, m* per cell
   with 1000 bootstrap replicates, growth-law fits, checks; no figures), and
   ``results.critical_sample_sizes`` alone on the rows already in memory; ``--repeats``
   times each. Every time reported is the median of its repeats.

Outcomes follow a known truth: cells are task {and} x model {transformer, mlp} x 21 values
of T (8..8192, half octaves) x 20 values of m (8..32768), seeds fill up the rows; P(success) is a
logistic function of ln m around m* = 10 ln T (transformer) or 2T (MLP), and test_acc is
drawn at or above 0.95 exactly for the successes. Rows arrive in the spec's order (T,
m, model, seeds fastest), as a sweep's packs roughly do.

    python bench/store.py [--rows 1000000] [--repeats 3] [--query-repeats 5] [--out bench-store.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from attnsweep.analysis.boolean import CELL_FIELDS, analyze_run
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore, TrialWriter, run_query
from attnsweep.results.integrity import check_store
from attnsweep.results.store import RACY_S
from attnsweep.stats import critical_sample_sizes
from attnsweep.workers import BooleanTrialConfig

SWEEP, RUN_ID, BATCH = "bench-store", "run-0001", 5000
T_GRID = np.round(2 ** np.arange(3, 13.01, 0.5)).astype(int)  # 21 half-octaves, 1024 among them
M_GRID = np.unique(np.round(np.geomspace(8, 32768, 20)).astype(int))
MODELS = ("transformer", "mlp")
QUERY_COLS = ["trial_id", "m", "seed", "test_acc"]
SQL = "SELECT trial_id, m, seed, test_acc FROM trials WHERE T = 1024 AND model = 'transformer'"
SPEC_YAML = """name: bench-store
seeds: 8
grid: {T: [8, 16], m: [8, 16], model: [transformer, mlp]}
fixed: {task: and, s: 3, d: 32, heads: 4, lr: 3e-3, max_epochs: 1000}
analysis: {acc_threshold: 0.95, success_frac: 0.5, n_boot: 1000}
"""


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or platform.machine(),
    )
    return dict(
        platform=platform.platform(),
        cpu=cpu,
        cores=os.cpu_count(),
        python=platform.python_version(),
        polars=pl.__version__,
        pyarrow=pa.__version__,
        date=dt.date.today().isoformat(),
    )


def batches(n_rows: int, seed: int = 0):
    """Lists of at most BATCH row dicts, shaped like the driver's rows of finished packs."""
    rng = np.random.default_rng(seed)
    combos = [(T, m, model) for T in T_GRID for m in M_GRID for model in MODELS]
    seeds = -(-n_rows // len(combos))
    base = {
        "experiment": "sparse_boolean",
        **BooleanTrialConfig(task="and", T=8, s=3, m=8, seed=0, d=32, heads=4, lr=3e-3, max_epochs=1000).model_dump(),
        "error_type": None,
        "error": None,
        "pack_size": 8,
        "worker_host": "ray-worker-3",
        "device": "cpu",
        "code_version": "3f9c2a61d0be",
    }
    start = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    for lo in range(0, n_rows, BATCH):
        i = np.arange(lo, min(lo + BATCH, n_rows))
        n = len(i)
        T, m, model = (np.array(v)[i // seeds] for v in zip(*combos, strict=True))
        tr = model == "transformer"
        m_star = np.where(tr, 10 * np.log(T), 2.0 * T)
        success = rng.random(n) < 1 / (1 + np.exp(-3 * (np.log(m) - np.log(m_star))))
        u = rng.random(n)
        status = np.where(u < 0.002, "failed", np.where(u < 0.005, "diverged", "done"))
        done, failed = status == "done", status == "failed"
        # Accuracies on n_test=2000 samples; successes exactly at >= 0.95, failures below.
        hits = np.where(success, rng.integers(1900, 2001, n), rng.integers(1000, 1900, n))
        converged = rng.random(n) < np.where(success, 0.95, 0.6)
        support = np.sort(rng.random((n, 3)), 1) * (T[:, None] - 2) // 1 + np.arange(3)
        norms = rng.lognormal(1.0, 0.5, (n, 2))
        cols = dict(
            trial_id=[f"{x:016x}" for x in rng.integers(0, 2**63, n)],
            T=T.tolist(),
            m=m.tolist(),
            seed=(i % seeds).tolist(),
            model=model.tolist(),
            status=status.tolist(),
            support=[None if f else s for f, s in zip(failed, support.astype(int).tolist(), strict=True)],
            redraws=np.where(failed, 100, rng.poisson(0.3, n)).tolist(),
            train_acc=_some(done, np.where(converged, 1.0, 0.9 + 0.1 * rng.random(n))),
            train_loss=_some(done, rng.exponential(0.05, n)),
            test_acc=_some(done, hits / 2000),
            test_loss=_some(done, rng.exponential(0.2, n)),
            epochs=_some(~failed, rng.integers(1, 1001, n)),
            converged=_some(~failed, converged),
            diverged_epoch=_some(status == "diverged", rng.integers(1, 300, n)),
            norm_qk=_some(tr & done, norms[:, 0]),
            norm_v=_some(tr & done, norms[:, 1]),
            norm_hidden=_some(~tr & done, norms[:, 0]),
            norm_readout=_some(~tr & done, norms[:, 1]),
            wall_s=rng.exponential(2.0, n).tolist(),
            finished_at=[start + dt.timedelta(milliseconds=50 * int(k)) for k in i],
        )
        rows = [{**base, **dict(zip(cols, vals, strict=True))} for vals in zip(*cols.values(), strict=True)]
        for r, f in zip(rows, failed, strict=True):
            if f:
                r.update(
                    error_type="AmbiguousTrainingSetError",
                    error="no unambiguous training set in 100 redraws",
                )
        yield rows


def _some(keep: np.ndarray, values: np.ndarray) -> list:
    """``values`` as Python scalars, None where ``keep`` is False (a null in the store)."""
    return [v if k else None for k, v in zip(keep.tolist(), values.tolist(), strict=True)]


def write_store(root: Path, n_rows: int) -> dict:
    store = ResultsStore(root)
    writer = TrialWriter(store, SWEEP, RUN_ID, trial_schema())  # flush_rows=5000, as the driver
    t_gen = t_write = 0.0
    t0 = time.perf_counter()
    for rows in batches(n_rows):
        t1 = time.perf_counter()
        writer.append(rows)
        t_write += time.perf_counter() - t1
    t1 = time.perf_counter()
    writer.flush()
    t_write += time.perf_counter() - t1
    t_gen = time.perf_counter() - t0 - t_write
    now = dt.datetime.now(dt.UTC)
    # analyze_run finds the run through its record; settings_of reads spec_yaml's analysis.
    record = dict(
        status="finished",
        started_at=now,
        ended_at=now,
        wall_s=0.0,
        n_trials=n_rows,
        n_done=n_rows,
        n_failed=0,
        n_diverged=0,
        n_lost=0,
        spec_name=SWEEP,
        spec_hash="0" * 16,
        spec_yaml=SPEC_YAML,
        executor="bench",
        host=platform.node(),
        code_version="3f9c2a61d0be",
        packages="{}",
        experiment="sparse_boolean",
        trial_fields=",".join(BooleanTrialConfig.model_fields),
    )
    store.write_run(SWEEP, RUN_ID, record, run_schema())
    files = [p for p in (root / "trials").rglob("*.parquet")]
    return dict(
        rows=writer.rows_written,
        write_s=t_write,
        rows_per_s=writer.rows_written / t_write,
        make_dicts_s=t_gen,
        part_files=len(files),
        bytes=sum(p.stat().st_size for p in files),
    )


def timed(fn, repeats: int) -> dict:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return dict(
        median_s=statistics.median(times),
        times_s=times,
        result_rows=len(out) if hasattr(out, "__len__") else None,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each analysis timing")
    ap.add_argument("--query-repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("bench-store.json"))
    args = ap.parse_args()
    info = machine()
    print(
        f"# {info['cpu']}, {info['cores']} cores, {info['platform']}, Python {info['python']}, "
        f"polars {info['polars']}, pyarrow {info['pyarrow']}, {info['date']}"
    )
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        w = write_store(root, args.rows)

        def polars_query():
            where = (pl.col("T") == 1024) & (pl.col("model") == "transformer")
            return ResultsStore(root).scan_trials().filter(where).select(QUERY_COLS).collect()

        # The first read checks every page of every file (results/store.py read_checked) and
        # records the versions (results/checked.py, here in a fresh cache folder); later reads
        # find them recorded. store check always reads everything.
        os.environ["ATTNSWEEP_CACHE_DIR"] = str(root / "checked-cache")
        time.sleep(RACY_S + 0.1)  # files younger than this are not recorded
        first = timed(lambda: run_query(ResultsStore(root), SQL), 1)
        check = timed(lambda: check_store(ResultsStore(root)), 1)
        sql = timed(lambda: run_query(ResultsStore(root), SQL), args.query_repeats)
        direct = timed(polars_query, args.query_repeats)
        analysis = timed(lambda: analyze_run(ResultsStore(root), RUN_ID, figures_dir=None).m_star, args.repeats)
        cols = [c for c in CELL_FIELDS if c in set(trial_schema().names)]
        data = (
            ResultsStore(root)
            .scan_run_trials(SWEEP, RUN_ID)
            .select([*cols, "m", "seed", "status", "test_acc"])
            .collect()
        )
        crit = timed(lambda: critical_sample_sizes(data, cols, n_boot=1000)[0], args.repeats)
    total = time.perf_counter() - t_start
    q, r = f"median of {args.query_repeats}", f"median of {args.repeats}"
    table = [
        (
            "write: TrialWriter.append + flush (Arrow table, Parquet, fsync, rename)",
            f"{w['write_s']:.1f} s = {w['rows_per_s']:,.0f} rows/s",
            "",
            None,
        ),
        ("(not timed above) making the row dicts", f"{w['make_dicts_s']:.1f} s", "", None),
        (
            "part files / bytes on disk",
            f"{w['part_files']} / {w['bytes'] / 2**20:.1f} MiB",
            "",
            None,
        ),
        (
            "first query after the run: every file read in full and checked, then the query",
            f"{first['median_s']:.3f} s",
            "",
            None,
        ),
        ("store check (every file read in full, always)", f"{check['median_s']:.3f} s", "", None),
        (
            f"query T=1024, transformer via run_query (SQL), {q}",
            f"{sql['median_s']:.3f} s ({sql['result_rows']:,} rows)",
            "< 1 s",
            sql["median_s"] < 1,
        ),
        (
            f"same query via polars scan_trials().filter(), {q}",
            f"{direct['median_s']:.3f} s ({direct['result_rows']:,} rows)",
            "< 1 s",
            direct["median_s"] < 1,
        ),
        (
            f"analyze_run (read, m* n_boot=1000, fits, checks; no figures), {r}",
            f"{analysis['median_s']:.2f} s ({analysis['result_rows']} cells)",
            "< 5 s",
            analysis["median_s"] < 5,
        ),
        (f"critical_sample_sizes alone, n_boot=1000, {r}", f"{crit['median_s']:.2f} s", "", None),
    ]
    print(f"\n| measure ({args.rows:,} rows) | value | target | met |\n|---|---|---|---|")
    for name, value, target, ok in table:
        print(f"| {name} | {value} | {target} | {'' if ok is None else ('yes' if ok else 'NO')} |")
    print(f"\ntotal {total:.0f} s")
    args.out.write_text(
        json.dumps(
            dict(
                machine=info,
                rows=args.rows,
                write=w,
                query_sql=sql,
                query_polars=direct,
                analyze_run=analysis,
                critical_sample_sizes=crit,
                total_s=total,
                first_query=first,
                store_check=check,
            ),
            indent=2,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
