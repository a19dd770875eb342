"""The store at a URI: a `file://` URI (local) and an fsspec `memory://` filesystem (the
remote code path: no renames, no local paths), written and read the way a sweep does."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
import warnings

import pytest
from rich.console import Console

from attnsweep.orchestrator import LocalExecutor, parse_spec, run_sweep
from attnsweep.results import ResultsStore, StoreError, run_query
from attnsweep.results.defensive_reads import StoreWarning
from attnsweep.results.integrity import check_store, compact_store

SPEC = (
    "name: remote\nseeds: 2\ngrid: {T: [8], m: [8, 16]}\n"
    "fixed: {task: and, s: 1, max_epochs: 3, n_test: 100, d: 8, heads: 1}\nexecution: {pack_size: 1, flush_rows: 1}\n"
)


@pytest.fixture(params=["file", "memory"])
def root(request, tmp_path):
    return f"file://{tmp_path}/store" if request.param == "file" else f"memory://attnsweep-{uuid.uuid4().hex[:8]}/store"


def test_a_sweep_resume_check_and_compact_at_a_uri(root):
    spec = parse_spec(SPEC)
    store = ResultsStore(root)
    summary = run_sweep(spec, store, LocalExecutor(spec.execution), console=Console(file=io.StringIO()))
    assert store.local == root.startswith("file://")
    rows = store.scan_trials().collect()
    assert rows.height == 4 and rows["trial_id"].n_unique() == 4 and set(rows["sweep"]) == {"remote"}
    assert store.read_run("remote", summary.run_id)["n_done"] == 4
    assert run_query(store, "SELECT count(*) AS n FROM trials WHERE m = 16")["n"][0] == 2
    assert store.arrow_dataset("trials").to_table().num_rows == 4
    again = run_sweep(
        spec,
        store,
        LocalExecutor(spec.execution),
        run_id=summary.run_id,
        resume=True,
        console=Console(file=io.StringIO()),
    )
    assert sum(again.counts.values()) == 0 and ResultsStore(root).scan_trials().collect().height == 4
    assert check_store(store).ok
    report = compact_store(store)
    assert (report.files_before, report.files_after) == (4, 1)
    fresh = ResultsStore(root)
    assert fresh.scan_trials().collect().sort("trial_id").equals(rows.sort("trial_id"))


def test_a_truncated_file_at_a_uri_is_quarantined(root):
    spec = parse_spec(SPEC)
    store = ResultsStore(root)
    run_sweep(spec, store, LocalExecutor(spec.execution), console=Console(file=io.StringIO()))
    victim = sorted((store.root / "trials").rglob("*.parquet"), key=str)[0]
    victim.write_bytes(victim.read_bytes()[:40])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ResultsStore(root).scan_trials().collect().height == 3
    assert any(issubclass(w.category, StoreWarning) for w in caught)
    assert len(check_store(ResultsStore(root)).quarantined) == 1


def test_an_unknown_scheme_is_a_clear_error():
    with pytest.raises(StoreError, match="no filesystem for this URI"):
        ResultsStore("nosuchscheme://bucket/store")


@pytest.mark.parametrize("uri", ["data://x", "http://127.0.0.1:9/store", "zip://x", "DATA://x"])
def test_a_uri_no_store_can_live_at_is_refused_on_opening(uri):
    with pytest.raises(StoreError, match=f"a store cannot live at a {uri.split('://')[0]}:// URI; give a folder"):
        ResultsStore(uri)


@pytest.mark.parametrize(
    "command",
    [
        ["analyze"],
        ["report", "20261201-000000-aaaaaa"],
        ["store", "check"],
        ["store", "compact"],
        ["resume", "20261201-000000-aaaaaa", "--local"],
        ["run", "spec.yaml", "--local"],
        ["query", "SELECT 1"],
    ],
)
def test_every_command_refuses_a_data_uri_store_in_one_line(command, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from attnsweep.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text(SPEC)
    result = CliRunner().invoke(app, [*command, "--store", "data://x"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert (
        result.stderr.startswith("error: --store 'data://x': a store cannot live at a data:// URI")
        and result.stderr.count("\n") == 1
    ), result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["spec.yaml"]  # nothing written


@pytest.mark.slow
def test_the_cli_runs_and_queries_a_file_uri_store(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    uri = f"file://{tmp_path}/uri-store"
    env = dict(os.environ, COLUMNS="200")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "run",
            "spec.yaml",
            "--local",
            "--no-analyze",
            "--store",
            uri,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "uri-store" / "trials").is_dir()
    q = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "query",
            "SELECT count(*) AS n FROM trials",
            "--format",
            "csv",
            "--store",
            uri,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert q.returncode == 0 and q.stdout.split() == ["n", "4"]


@pytest.mark.slow
def test_an_adaptive_search_with_tuning_at_a_uri(root, tmp_path, monkeypatch):
    from attnsweep.orchestrator.adaptive import study_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # where a remote store's Optuna journals go
    spec = parse_spec(
        "name: remote-adaptive\nseeds: 2\ngrid: {T: [8]}\n"
        "fixed: {task: and, s: 1, max_epochs: 20, n_test: 100, d: 8, heads: 1}\n"
        "search: {mode: adaptive, m: {min: 4, max: 32}, rel_tol: 0.5, tune: {n_trials: 2, batch: 1, seeds: 1}}\n"
        "execution: {pack_size: 2, flush_rows: 2}\n"
    )
    store = ResultsStore(root)
    summary = run_sweep(spec, store, LocalExecutor(spec.execution), console=Console(file=io.StringIO()))
    rows = store.scan_trials().collect()
    assert set(rows["search_phase"]) == {"tune", "search", "budget"}
    assert rows["trial_id"].n_unique() == rows.height == store.read_run("remote-adaptive", summary.run_id)["n_trials"]
    folder = study_dir(store, "remote-adaptive", summary.run_id)
    assert len(list(folder.glob("*.journal"))) == 1
    expected_base = tmp_path / "store" if store.local else tmp_path / "home" / ".cache" / "attnsweep"
    assert folder.is_relative_to(expected_base)
    again = run_sweep(
        spec,
        store,
        LocalExecutor(spec.execution),
        run_id=summary.run_id,
        resume=True,
        console=Console(file=io.StringIO()),
    )
    assert sum(again.counts.values()) == 0 and ResultsStore(root).scan_trials().collect().height == rows.height
