"""A spec with its own claims, through the CLI (issue 49, item 2): `run --local` prints the claims'
verdicts before the m* table, and `report` shows them first (report.html, verdicts.json,
findings.md); the paper's claims the run does not test get no row, one line says what they need."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # two CLI processes that train (about 20 s)

SPEC = """name: mine
seeds: 3
grid: {T: [4, 8, 16], m: [8, 16, 32, 64], model: [transformer, mlp]}
fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 200, max_epochs: 30}
analysis: {n_boot: 100}
claims:
  - {id: mine-1, kind: growth, axis: T, law: log}
  - {id: mine-2, kind: fewer_samples, axis: model, less: transformer, more: mlp}
  - {id: mine-3, kind: trend, quantity: test_error, along: m, direction: falls}
"""


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=dict(os.environ, COLUMNS="250"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_specs_claims_come_first(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    run = _cli("run", "spec.yaml", "--local", "--store", "s", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert out.index("your claims") < out.index("critical sample size m*")
    for cid in ("mine-1:", "mine-2:", "mine-3:"):
        assert cid in out
    run_id = re.search(r"\d{8}-\d{6}-[0-9a-f]{6}", out).group(0)

    rep = _cli("report", run_id, "--store", "s", "--out", "rep", "--publish", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "verdicts: mine-1 " in rep.stdout  # the summary line starts with the spec's claims
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.index("<h2>Your claims</h2>") < page.index("<td>mine-1:") < page.index("The papers&#39; claims")
    assert page.index("<td>mine-3:") < page.index("<td>L1:")
    # No symmetry run and no second s or norm bound: those claims have no row, one line names them.
    assert "<td>S1" not in page and "<td>L2:" not in page and "<td>R:" not in page
    line = re.search(r"Not tested here: [^<]*", page).group(0)
    assert "L3 (needs transformer cells that differ only in s)" in line and line.endswith("S1-S4 (a symmetry run).")

    record = json.loads((tmp_path / "rep" / "verdicts.json").read_text())
    assert [v["id"] for v in record["verdicts"][:3]] == ["mine-1", "mine-2", "mine-3"]
    assert all(v["origin"] == "spec" for v in record["verdicts"][:3])
    assert {v["id"] for v in record["not_tested"]} == {"L2", "L3", "R", "S1", "S2", "S3", "S4"}
    # mine-2's ratio at T=4 is the MLP's m* over the transformer's, as m_star.csv has them.
    with open(tmp_path / "rep" / "m_star.csv") as f:
        cells = {(r["model"], r["T"]): r for r in csv.DictReader(f)}
    mlp, tr = cells[("mlp", "4")], cells[("transformer", "4")]
    pairs = {tuple(p["cells"].values()): p for p in record["verdicts"][1]["series"][0]["numbers"]["pairs"]}
    assert mlp["bound"] == tr["bound"] == "exact"  # the run is deterministic: both cells have a value
    assert math.isclose(pairs[(4,)]["ratio"]["estimate"], float(mlp["m_star"]) / float(tr["m_star"]))

    findings = (tmp_path / "rep" / "findings.md").read_text()
    assert findings.startswith("## Your claims")
    assert findings.index("| mine-1:") < findings.index("## What attnsweep found")

    # The Python API judges them too, first, with the numbers the report shows.
    from attnsweep.api_store import Store

    api = Store(str(tmp_path / "s")).analyze(run_id)
    assert [v["id"] for v in api.verdicts[:3]] == ["mine-1", "mine-2", "mine-3"]
    assert [v["verdict"] for v in api.verdicts[:3]] == [v["verdict"] for v in record["verdicts"][:3]]
