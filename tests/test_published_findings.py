"""The committed findings are what today's code makes of their committed rows.

`attnsweep report --from FOLDER --readme README.md` rebuilds a scratch store from a published
folder's runs.parquet and trials.parquet and writes the folder and the README section again.
Here that runs on each folder under docs/findings into a scratch checkout, and every file it
writes must hold the same findings as the committed one by the rules of
tests/findings_compare.py: numbers within a relative 1e-6, printed numbers within their last
digit, figures by their pixels, since the folders were made on another processor than the one
this may run on. A change to the analysis that moves a published number fails here until the
findings are published again; so does a changed trial row (the last test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from findings_compare import folder_differences, text_differences

from attnsweep.presentation.publish import write_sums
from attnsweep.presentation.readme_sections import END, START, read_section

pytestmark = pytest.mark.slow  # the published findings rebuilt from their rows

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "docs/findings": (START, END),
    "docs/findings/symmetry": (START, END),
    "docs/findings/theory-500": (None, None),
    "docs/findings/tuned-interrupted": (None, None),
    "docs/findings/theory-4096-margin": (None, None),
}
"""Each published folder and its README section (None: a folder the README does not show)."""
INNER = ("symmetry", "theory-500", "tuned-interrupted", "theory-4096-margin")
"""Folders published inside docs/findings, each checked on its own."""


def _rebuild(folder: str, copy: Path, readme: bool) -> subprocess.CompletedProcess:
    """``attnsweep report --from FOLDER [--readme README.md]`` in the scratch checkout ``copy``."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "report",
            "--from",
            folder,
            *(["--readme", "README.md"] if readme else []),
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def _checkout(folder: str, tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    shutil.copytree(
        ROOT / folder,
        copy / folder,
        ignore=shutil.ignore_patterns(*INNER) if folder == "docs/findings" else None,
    )
    shutil.copy(ROOT / "README.md", copy / "README.md")
    return copy


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_the_committed_folder_and_readme_section_come_back_unchanged(folder, tmp_path):
    committed = ROOT / folder
    assert (committed / "runs.parquet").is_file() and (committed / "SHA256SUMS").is_file(), (
        f"{folder} must carry its run records and checksums so that it can be rebuilt"
    )
    copy = _checkout(folder, tmp_path)
    start, end = FOLDERS[folder]
    proc = _rebuild(folder, copy, readme=start is not None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if start:
        assert (
            text_differences(
                read_section(ROOT / "README.md", start, end),
                read_section(copy / "README.md", start, end),
                "README section",
            )
            == []
        )
    # The page says where its rows came from: the folder, not a store.
    assert f"from the published rows in {folder};" in (copy / folder / "report.html").read_text()
    skip = INNER if folder == "docs/findings" else ()
    changed = folder_differences(committed, copy / folder, skip=skip)
    assert changed == [], f"{folder} changed (publish the findings again: attnsweep report --from):\n" + "\n".join(
        changed[:20]
    )
    verdicts = json.loads((committed / "verdicts.json").read_text())
    assert all(
        v["verdict"] in ("supported", "not supported", "inconclusive", "not tested") for v in verdicts["verdicts"]
    )


def test_a_changed_trial_row_moves_the_findings_and_fails_the_check(tmp_path):
    # The check compares within tolerances, so it must still see a real change: one trial of
    # the theory-500 run (T = 4, the smallest m at which any seed succeeded) is made to fail
    # its test. That cell's m* moves far beyond the tolerance, and the check says so.
    folder = "docs/findings/theory-500"
    copy = _checkout(folder, tmp_path)
    trials = pl.read_parquet(copy / folder / "trials.parquet")
    cell = trials.filter((pl.col("T") == pl.col("T").min()) & (pl.col("status") == "done"))
    winners = cell.filter(pl.col("test_acc") >= 0.95)
    first = winners.filter(pl.col("m") == winners["m"].min()).sort("trial_id")["trial_id"][0]
    table = pq.read_table(copy / folder / "trials.parquet")
    acc = [
        0.5 if t == first else a
        for t, a in zip(table["trial_id"].to_pylist(), table["test_acc"].to_pylist(), strict=True)
    ]
    column = table.schema.get_field_index("test_acc")
    table = table.set_column(column, table.schema.field(column), pa.array(acc, table.schema.field(column).type))
    pq.write_table(table, copy / folder / "trials.parquet")
    write_sums(copy / folder)  # re-signed, as a publisher would: the change is in the rows, not the sums
    proc = _rebuild(folder, copy, readme=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    differences = folder_differences(ROOT / folder, copy / folder)
    assert any(d.startswith("m_star.csv: column 'm_star'") for d in differences), differences
    assert any(d.startswith("trials.parquet: column 'test_acc' differs in 1 rows") for d in differences), differences
