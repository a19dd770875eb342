"""A finished run's store damaged as a user's disk, a hand edit or an archive would damage it,
read through the CLI: every command still answers, without a traceback, from the rows it
could check, and says which cells lack rows and why."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow  # damaged stores made by sweeps through the CLI

ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="250")
SPEC = (
    "name: dmg\nseeds: 2\ngrid: {T: [8, 16], m: [16, 32]}\n"
    "fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 100, lr: 3e-3, max_epochs: 5}\n"
    "execution: {pack_size: 1, flush_rows: 1}\n"
)  # one row per part file


def _cli(*args, cwd, prefix=(), **kw):
    return subprocess.run(
        [*prefix, sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=kw.pop("env", ENV),
        capture_output=True,
        text=True,
        timeout=600,
        **kw,
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A store holding one finished run of 8 trials, 2 cells of 4, one file per trial."""
    root = tmp_path_factory.mktemp("finished")
    (root / "spec.yaml").write_text(SPEC)
    done = _cli("run", "spec.yaml", "--local", "--no-analyze", cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.fixture()
def work(finished, tmp_path) -> Path:
    shutil.copytree(finished, tmp_path / "w")
    return tmp_path / "w"


def _files(work: Path) -> list[Path]:
    return sorted((work / "results-store" / "trials").rglob("*.parquet"))


def _run_id(work: Path) -> str:
    return next((work / "results-store" / "runs" / "sweep=dmg").iterdir()).name.removeprefix("run_id=")


def _damage_a_page(path: Path, column: str = "test_acc") -> None:
    """Flip a bit in the last byte of ``column``'s page: data, not footer, is changed."""
    meta = pq.read_metadata(path)
    chunk = next(
        meta.row_group(0).column(i)
        for i in range(meta.num_columns)
        if meta.row_group(0).column(i).path_in_schema == column
    )
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size - 1] ^= 0x40
    path.write_bytes(bytes(data))
    assert pq.read_metadata(path).num_rows == 1  # the footer still reads


def _flat(text: str) -> str:
    """The text as one line (the terminal console wraps long lines)."""
    return " ".join(text.split())


def _T_of(path: Path) -> int:
    return pq.read_table(path, columns=["T"])["T"][0].as_py()


def test_damaged_pages_are_set_aside_never_counted_and_the_incomplete_cell_is_named(work):
    victim = _files(work)[0]
    T = _T_of(victim)
    _damage_a_page(victim)
    query = _cli("query", "SELECT count(*) AS n FROM trials", "--format", "csv", cwd=work)
    assert query.returncode == 0, query.stderr
    assert query.stdout.split() == ["n", "7"]  # not 8: the damaged row is not counted
    assert victim.name in query.stderr.replace("\n", "") and "CRC" in query.stderr and "quarantine" in query.stderr

    # After the file was moved: analyze warns which cell lacks a row, and why.
    analyze = _cli("analyze", cwd=work)
    assert analyze.returncode == 0 and "Traceback" not in analyze.stderr, analyze.stderr[-3000:]
    said = _flat(analyze.stderr)
    assert "7 of the 8 trials it recorded are read" in said
    assert f"T={T}: 3/4" in said and "quarantine" in said
    assert f"T={24 - T}:" not in said  # the other cell is complete

    report = _cli("report", _run_id(work), "--out", "rep", cwd=work)
    assert report.returncode == 0, report.stderr[-3000:]
    assert f"T={T}: 3/4" in _flat(report.stderr)
    page = (work / "rep" / "report.html").read_text()
    assert "is incomplete" in page and f"T={T}: 3/4" in page

    check = _cli("store", "check", cwd=work)
    assert check.returncode == 1 and "Traceback" not in check.stdout + check.stderr
    assert "unreadable" in check.stdout and victim.name in check.stdout.replace("\n", "")


def test_replicate_says_its_baseline_is_incomplete(work):
    baseline = _run_id(work)
    _damage_a_page(_files(work)[0])
    rep = _cli("replicate", "spec.yaml", "--baseline", baseline, "--local", "--report", "rep", cwd=work)
    assert rep.returncode in (0, 1) and "Traceback" not in rep.stderr, rep.stderr[-3000:]
    assert f"run {baseline} is incomplete" in _flat(rep.stderr)
    assert "is incomplete" in (work / "rep" / "report.md").read_text()


def test_one_file_with_a_string_metric_is_set_aside_and_everything_else_reads(work):
    source = _files(work)[0]
    t = pq.read_table(source)
    i = t.schema.get_field_index("test_acc")
    odd = t.set_column(i, "test_acc", pc.cast(t["test_acc"], pa.string())).set_column(0, "trial_id", pa.array(["odd"]))
    pq.write_table(odd, source.with_name("part-odd.parquet"))
    query = _cli("query", "SELECT count(*) AS n, avg(test_acc) AS a FROM trials", "--format", "csv", cwd=work)
    assert query.returncode == 0, query.stderr
    assert query.stdout.split()[1].split(",")[0] == "8"
    assert "part-odd.parquet" in query.stderr.replace("\n", "") and "test_acc is string, but double" in _flat(
        query.stderr
    )
    analyze = _cli("analyze", cwd=work)
    assert analyze.returncode == 0 and "critical sample size" in analyze.stdout, analyze.stderr[-3000:]
    assert "incomplete" not in analyze.stderr  # all 8 rows of the run are read
    report = _cli("report", _run_id(work), "--out", "rep", cwd=work)
    assert report.returncode == 0 and "part-odd.parquet" in report.stderr.replace("\n", "")
    check = _cli("store", "check", cwd=work)
    assert (
        check.returncode == 1 and "schema" in check.stdout and "test_acc is string" in check.stdout.replace("\n", " ")
    )


def _read_only():
    """A command prefix under which even root obeys file modes: without CAP_DAC_OVERRIDE."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only store cannot be made here")
    return ("setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner")


def test_a_read_only_store_with_a_damaged_file_still_reads(work):
    victim = _files(work)[0]
    _damage_a_page(victim)
    store = work / "results-store"
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    prefix = _read_only()
    try:
        probe = subprocess.run([*prefix, "touch", str(store / "probe")], capture_output=True)
        assert probe.returncode != 0, "the store should not be writable"
        query = _cli("query", "SELECT count(*) AS n FROM trials", "--format", "csv", cwd=work, prefix=prefix)
        assert query.returncode == 0, query.stderr
        assert query.stdout.split() == ["n", "7"]
        assert "skipped where it is" in _flat(query.stderr) and victim.exists()
        analyze = _cli("analyze", "--figures", str(work / "figs"), cwd=work, prefix=prefix)
        assert analyze.returncode == 0 and "critical sample size" in analyze.stdout, analyze.stderr[-3000:]
        assert "7 of the 8 trials" in _flat(analyze.stderr) and victim.name in analyze.stderr.replace("\n", "")
        check = _cli("store", "check", cwd=work, prefix=prefix)
        assert check.returncode == 1 and "unreadable" in check.stdout and "Traceback" not in check.stderr
    finally:
        for p in [store, *store.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_run_records_rows_per_cell(work):
    from attnsweep.results import ResultsStore

    store = ResultsStore(work / "results-store")
    record = store.read_run("dmg", _run_id(work))
    import json

    counts = json.loads(record["cell_counts"])
    rows = store.scan_run_trials("dmg", _run_id(work)).group_by("T", "m").len().sort("T", "m").collect()
    assert counts["fields"] == ["T", "m"]
    assert counts["cells"] == [list(r) for r in rows.iter_rows()] == [[8, 16, 2], [8, 32, 2], [16, 16, 2], [16, 32, 2]]
    assert pl.DataFrame(counts["cells"], orient="row")[:, -1].sum() == 8


def test_a_part_file_copied_in_twice_is_counted_once_and_said(work, finished):
    source = _files(work)[0]
    shutil.copy(source, source.with_name("part-99999999999999999999-copy.parquet"))
    twice = _cli("analyze", cwd=work)
    once = _cli("analyze", cwd=finished)
    assert twice.returncode == 0 and once.returncode == 0, twice.stderr[-3000:]
    assert twice.stdout == once.stdout  # the same m* table: the repeated trial is counted once
    assert "holds 9 rows for its 8 trials; 1 rows repeat a trial id" in _flat(twice.stderr)
    query = _cli("query", "SELECT count(*) AS n FROM trials", "--format", "csv", cwd=work)
    assert query.stdout.split() == [
        "n",
        "9",
    ]  # query shows what is stored; store check names the duplicate
    check = _cli("store", "check", cwd=work)
    assert check.returncode == 1 and "duplicate" in check.stdout


def test_a_trial_replaced_by_a_copy_of_another_is_said_and_counted_once(work):
    files = _files(work)
    T = _T_of(files[0])
    shutil.copy(next(f for f in files[1:] if _T_of(f) == T), files[0])  # one trial gone, another twice
    analyze = _cli("analyze", cwd=work)
    said = _flat(analyze.stderr)
    assert analyze.returncode == 0 and "is incomplete: 7 of the 8 trials it recorded are read" in said
    assert f"T={T}: 3/4" in said and "1 rows repeat a trial id" in said
