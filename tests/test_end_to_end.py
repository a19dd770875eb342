"""A small real sweep through the CLI on an embedded local Ray, then the store and analysis."""

import os
import subprocess
import sys

import duckdb
import polars as pl
import pyarrow.dataset as ds
import pytest

SPEC = """
name: e2e
seeds: 3
grid:
  T: [8, 16, 32]
  m: [8, 64, 256]
  model: [transformer, mlp]
fixed:
  task: and
  s: 1
  heads: 4
  lr: 3e-3
  max_epochs: 150
  n_test: 400
execution:
  pack_size: 3
  flush_rows: 10
analysis:
  n_boot: 200
"""


def _cli(*args, cwd):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    (root / "spec.yaml").write_text(SPEC)
    proc = _cli("run", "spec.yaml", "--store", "store", cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, proc


@pytest.mark.slow
def test_one_row_per_trial_in_every_reader(finished_run):
    root, _ = finished_run
    n = 3 * 3 * 2 * 3
    trials = pl.scan_parquet(root / "store/trials/**/*.parquet", hive_partitioning=True).collect()
    assert trials.height == n
    assert trials["trial_id"].n_unique() == n
    assert set(trials["sweep"]) == {"e2e"}
    assert ds.dataset(root / "store/trials", format="parquet", partitioning="hive").count_rows() == n
    con = duckdb.connect()
    got = con.execute(
        f"select count(*), count(distinct trial_id) from read_parquet('{root}/store/trials/**/*.parquet', hive_partitioning=true)"
    ).fetchone()
    assert got == (n, n)
    # Rows were streamed: flush_rows=10 forces several part files.
    assert len(list((root / "store/trials").rglob("*.parquet"))) >= 2
    # Every config field is its own typed column; results are there.
    assert trials.schema["T"] == pl.Int64 and trials.schema["lr"] == pl.Float64
    assert trials.schema["support"] == pl.List(pl.Int64)
    assert set(trials["status"]) <= {"done", "failed", "diverged"}


@pytest.mark.slow
def test_the_attention_model_learns_one_sparse_and(finished_run):
    root, _ = finished_run
    trials = pl.scan_parquet(root / "store/trials/**/*.parquet", hive_partitioning=True).collect()
    # s=1 AND is y = x_i: with m=256 every trained transformer should reach the target.
    big = trials.filter((pl.col("m") == 256) & (pl.col("model") == "transformer"))
    assert (big["status"] == "done").all()
    assert big["test_acc"].min() >= 0.95
    # The support column holds the relevant position, inside [0, T).
    assert all(0 <= s[0] < T for s, T in zip(big["support"], big["T"], strict=True))


@pytest.mark.slow
def test_runs_table_records_the_run(finished_run):
    root, _ = finished_run
    runs = pl.scan_parquet(root / "store/runs/**/*.parquet", hive_partitioning=True).collect()
    assert runs.height == 1
    row = runs.row(0, named=True)
    assert row["status"] == "finished" and row["n_trials"] == 54
    assert row["n_done"] + row["n_failed"] + row["n_diverged"] + row["n_lost"] == 54
    assert "name: e2e" in row["spec_yaml"] and '"torch"' in row["packages"]
    assert row["ended_at"] >= row["started_at"]


@pytest.mark.slow
def test_run_prints_the_m_star_table_and_writes_figures(finished_run):
    root, proc = finished_run
    assert "critical sample size m*" in proc.stdout
    assert "growth laws" in proc.stdout  # ranked by AIC only from 5 exact cells (presentation/terminal.py)
    assert len(list((root / "figures").rglob("*.png"))) == 2


@pytest.mark.slow
def test_query_and_analyze_commands(finished_run):
    root, _ = finished_run
    proc = _cli(
        "query",
        "SELECT model, count(*) AS n FROM trials GROUP BY model ORDER BY model",
        "--store",
        "store",
        "--format",
        "csv",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == ["model,n", "mlp,27", "transformer,27"]
    refused = _cli("query", "DROP TABLE trials", "--store", "store", cwd=root)
    assert refused.returncode == 2 and "SELECT" in refused.stderr
    again = _cli("analyze", "--store", "store", "--figures", "fig2", cwd=root)
    assert again.returncode == 0, again.stderr
    assert "critical sample size m*" in again.stdout


@pytest.mark.parametrize(
    "spec, field",
    [
        (
            "name: b\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3, colour: red}\n",
            "fixed.colour",
        ),
        ("name: b\ngrid: {T: [3], m: [8]}\nfixed: {task: and, s: 3}\n", "T must be greater than s"),
        ("name: b\ngrid: {T: [8], m: [-8]}\nfixed: {task: and, s: 3}\n", "grid.m"),
        ("name: b\ngrid: {T: [8], m: [8], task: [andd]}\nfixed: {s: 3}\n", "grid.task"),
        ("", "the spec is empty"),
        ("- a list\n", "top level must be a mapping"),
        ("name: b\ngrid: {T: [8, m: [8]\n", "not valid YAML"),
        ("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "aliases (*name) are not allowed"),
        (
            "name: b\nseeds: 1000\ngrid: {T: [8, 16, 32, 64], m: {start: 8, stop: 4096, num: 400}}\n"
            "fixed: {task: and, s: 3}\n",
            "raise --max-trials to confirm",
        ),
        ("name: b\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3, lr: .nan}\n", "fixed.lr"),
        (
            "name: b\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3, weight_decay: .inf}\n",
            "fixed.weight_decay",
        ),
        ("name: b\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3, lr: -0.1}\n", "fixed.lr"),
        (
            "name: b\ngrid: {T: ['8'], m: [8]}\nfixed: {task: and, s: 3}\n",
            "a number is required, not a string",
        ),
        (
            "name: b\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3}\nstore: /etc\n",
            "unknown top-level field(s) 'store'; allowed: ['analysis'",
        ),
    ],
)
def test_bad_spec_exits_2_naming_the_field_and_writes_nothing(tmp_path, spec, field):
    (tmp_path / "bad.yaml").write_text(spec)
    proc = _cli("run", "bad.yaml", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 2
    assert field in proc.stderr
    assert not (tmp_path / "store").exists()
    assert not (tmp_path / "figures").exists()


def test_missing_spec_file_exits_2(tmp_path):
    proc = _cli("validate", "nope.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_bad_cli_values_exit_2_and_write_nothing(tmp_path):
    (tmp_path / "s.yaml").write_text("name: s\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3, max_epochs: 2}\n")
    proc = _cli("run", "s.yaml", "--store", "store", "--max-in-flight", "-1", cwd=tmp_path)
    assert proc.returncode == 2 and "max-in-flight" in proc.stderr
    proc = _cli("run", "s.yaml", "--store", "store", "--address", "127.0.0.1:1", cwd=tmp_path)
    assert proc.returncode == 2 and "no Ray cluster answers" in proc.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
def test_unwritable_query_output_exits_2(finished_run, tmp_path):
    root, _ = finished_run
    proc = _cli(
        "query",
        "SELECT count(*) AS n FROM trials",
        "--store",
        str(root / "store"),
        "--format",
        "csv",
        "--output",
        str(tmp_path / "missing-dir" / "out.csv"),
        cwd=root,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_csv_export_of_list_columns(finished_run):
    root, _ = finished_run
    proc = _cli(
        "query",
        "SELECT trial_id, support FROM trials WHERE m = 256 AND model = 'mlp' ORDER BY trial_id LIMIT 2",
        "--store",
        "store",
        "--format",
        "csv",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr
    header, *lines = proc.stdout.strip().splitlines()
    assert header == "trial_id,support" and len(lines) == 2
    assert all(line.split(",", 1)[1].startswith('"[') or line.split(",", 1)[1].startswith("[") for line in lines)


@pytest.mark.slow
def test_impossible_resources_and_bad_paths_exit_2_before_running(tmp_path):
    (tmp_path / "gpu.yaml").write_text(
        "name: g\ngrid: {T: [8], m: [8]}\nfixed: {task: and, s: 3, max_epochs: 2}\nresources: {gpus_per_worker: 1}\n"
    )
    proc = _cli("run", "gpu.yaml", "--store", "store", cwd=tmp_path)
    assert proc.returncode == 2 and "resources.gpus_per_worker" in proc.stderr
    (tmp_path / "afile").write_text("x")
    proc = _cli("run", "gpu.yaml", "--store", "store", "--figures", "afile", cwd=tmp_path)
    assert proc.returncode == 2 and "--figures" in proc.stderr
    proc = _cli("run", "gpu.yaml", "--store", "", cwd=tmp_path)
    assert proc.returncode == 2 and "--store" in proc.stderr
    assert not (tmp_path / "store").exists() and not (tmp_path / "runs").exists()
