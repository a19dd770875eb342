"""Learning curves through the CLI on an embedded local Ray: one sweep run with curves off and
again with them on, and a symmetry run with them on; then the store, a query joining curves to
trials, and the report's figure."""

import os
import subprocess
import sys

import polars as pl
import pytest

pytestmark = pytest.mark.slow  # every test reads a sweep run for the module through the CLI: about two minutes

BOOLEAN = """
name: {name}
seeds: 2
grid:
  T: [8, 16]
  m: [16, 64]
  model: [transformer, mlp]
fixed:
  task: and
  s: 1
  d: 16
  heads: 2
  lr: 3e-3
  max_epochs: 30
  n_test: 200
execution:
  pack_size: 4
{curves}
analysis:
  n_boot: 50
"""

SYMMETRY = """
name: sym
experiment: symmetry
seeds: 2
grid:
  m: [4, 16]
  model: [transformer, mlp]
fixed:
  teacher: equivariant
  n: 4
  k: 2
  d: 4
  width: 8
  heads: 2
  mlp_width: 16
  max_epochs: 20
  n_test: 32
  n_q: 2
execution:
  curves: {every: 3}
analysis:
  n_boot: 50
"""

CURVES = "  curves: {every: 4, max_points: 6}"
STRIDE = 6
"""max(every, ceil((max_epochs - 1) / (max_points - 1))) = max(4, ceil(29 / 5)): workers/curves.py."""
PACK = ["wall_s", "finished_at", "worker_host", "sweep", "run_id"]
"""Columns that describe when and where a trial ran, not what it computed."""


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
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("curves")
    ids = {}
    for name, text in (
        ("off", BOOLEAN.format(name="off", curves="")),
        ("on", BOOLEAN.format(name="on", curves=CURVES)),
        ("sym", SYMMETRY),
    ):
        (root / f"{name}.yaml").write_text(text)
        proc = _cli("run", f"{name}.yaml", "--store", "store", cwd=root)
        assert proc.returncode == 0, proc.stderr[-3000:]
        ids[name] = (root / "store" / "trials" / f"sweep={name}").iterdir().__next__().name.removeprefix("run_id=")
    return root, ids


def _trials(root, sweep):
    return pl.read_parquet(root / f"store/trials/sweep={sweep}/**/*.parquet").sort("trial_id")


def _curves(root, sweep):
    return pl.read_parquet(root / f"store/curves/sweep={sweep}/**/*.parquet").sort("trial_id", "epoch")


def test_curves_change_no_trial_id_and_no_row(runs):
    root, _ = runs
    off, on = _trials(root, "off"), _trials(root, "on")
    assert off.height == on.height == 16
    assert off.columns == on.columns and "curve" not in on.columns
    assert off.drop(PACK, strict=False).equals(on.drop(PACK, strict=False))
    assert not (root / "store" / "curves" / "sweep=off").exists()


def test_each_trial_keeps_every_kth_epoch_and_its_last_and_ends_at_its_rows_score(runs):
    root, _ = runs
    trials, curves = _trials(root, "on"), _curves(root, "on")
    assert set(curves["trial_id"]) == set(trials["trial_id"])
    by_trial = {t: g for (t,), g in curves.group_by("trial_id")}
    fitted = 0
    for row in trials.iter_rows(named=True):
        points = by_trial[row["trial_id"]].sort("epoch")
        # measured before each epoch's step: 0 .. epochs when it fit (or diverged), else 0 .. epochs - 1
        measured = row["epochs"] + 1 if row["converged"] or row["status"] == "diverged" else row["epochs"]
        expected = sorted({e for e in range(measured) if e % STRIDE == 0} | {measured - 1})
        assert points["epoch"].to_list() == expected and points.height <= 6
        assert points["train_error"].null_count() == points.height
        if row["converged"]:  # the last point is of the weights the row scores
            fitted += 1
            assert points["epoch"][-1] == row["epochs"]
            assert points["train_acc"][-1] == row["train_acc"] == 1.0
            assert points["train_loss"][-1] == pytest.approx(row["train_loss"], rel=1e-5)
    assert fitted > 0


def test_symmetry_curves_hold_the_relative_training_error(runs):
    root, _ = runs
    trials, curves = _trials(root, "sym"), _curves(root, "sym")
    assert set(curves["trial_id"]) == set(trials["trial_id"])
    assert curves["train_acc"].null_count() == curves.height
    assert curves["train_error"].null_count() == 0 and (curves["epoch"] % 3 == 0).sum() >= trials.height


def test_query_joins_curves_to_trials(runs):
    root, ids = runs
    sql = (
        "SELECT t.model, count(DISTINCT c.trial_id) AS trials, min(c.epoch) AS first "
        "FROM curves c JOIN trials t USING (run_id, trial_id) GROUP BY t.model ORDER BY t.model"
    )
    proc = _cli("query", sql, "--store", "store", "--format", "csv", cwd=root)
    assert proc.returncode == 0, proc.stderr
    # the symmetry run's MLP and transformer students too: 8 boolean + 4 symmetry trials per model
    assert proc.stdout.strip().splitlines() == ["model,trials,first", "mlp,12,0", "transformer,12,0"]
    schema = _cli("query", "--schema", "--store", "store", cwd=root)
    assert schema.returncode == 0 and "curves (" in schema.stdout and "train_acc: double" in schema.stdout


def test_the_report_draws_the_curves_of_a_run_that_kept_them_and_none_otherwise(runs):
    root, ids = runs
    for name in ("on", "sym", "off"):
        proc = _cli("report", ids[name], "--store", "store", "--out", f"rep-{name}", cwd=root)
        assert proc.returncode == 0, proc.stderr[-3000:]
        figure = root / f"rep-{name}" / "figures" / ids[name] / "learning_curves.png"
        page = (root / f"rep-{name}" / "report.html").read_text()
        assert figure.exists() == (name != "off") == ("Learning curves (the run kept them" in page), name
