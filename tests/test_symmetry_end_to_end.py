"""A small symmetry sweep through the CLI on an embedded local Ray: store rows, verdicts, figures."""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl

SPEC = (Path(__file__).parent / "specs" / "symtiny.yaml").read_text()


def test_symmetry_sweep_end_to_end(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "attnsweep.cli", "run", "spec.yaml", "--store", "store"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = pl.scan_parquet(tmp_path / "store/trials/**/*.parquet", hive_partitioning=True).collect()
    # 2 teachers x 2 m x 3 students x 2 seeds.
    assert trials.height == trials["trial_id"].n_unique() == 24
    assert set(trials["experiment"]) == {"symmetry"}
    assert trials["T"].null_count() == 24  # sparse-Boolean columns stay empty
    orth = trials.filter(pl.col("equivariance") == "orthogonal")
    assert (orth["status"] == "done").all() and orth["eq_error_max"].max() < 1e-10
    for claim in ("S1:", "S2:", "S3:", "S4:"):
        assert claim in proc.stdout
    assert "S1: the inner-product student is exactly O(d)-equivariant; the generic one is not: supported" in proc.stdout
    assert len(list((tmp_path / "figures").rglob("*.png"))) == 3
