"""The committed findings are what today's code makes of their committed rows.

`attnsweep report --from FOLDER --readme README.md` rebuilds a scratch store from a published
folder's runs.parquet and trials.parquet and writes the folder and the README section again.
Here that runs on each folder under docs/findings into a scratch checkout, and every file it
writes must equal the committed one, but for the report's "generated" time: a change to the
analysis that moves a published number fails here until the findings are published again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnsweep.presentation.findings import END, START, SYMMETRY_END, SYMMETRY_START, read_section

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"docs/findings": (START, END), "docs/findings/symmetry": (SYMMETRY_START, SYMMETRY_END),
           "docs/findings/theory-500": (None, None), "docs/findings/tuned-interrupted": (None, None)}
"""Each published folder and its README section (None: a folder the README does not show)."""
INNER = ("symmetry", "theory-500", "tuned-interrupted")
"""Folders published inside docs/findings, each checked on its own."""
GENERATED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def _without_time(text: str) -> str:
    return GENERATED.sub("<generated>", text)


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_the_committed_folder_and_readme_section_come_back_unchanged(folder, tmp_path):
    committed = ROOT / folder
    assert (committed / "runs.parquet").is_file() and (committed / "SHA256SUMS").is_file(), \
        f"{folder} must carry its run records and checksums so that it can be rebuilt"
    copy = tmp_path / "checkout"
    shutil.copytree(committed, copy / folder, ignore=shutil.ignore_patterns(*INNER) if folder == "docs/findings"
                    else None)
    shutil.copy(ROOT / "README.md", copy / "README.md")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    start, end = FOLDERS[folder]
    readme = ["--readme", "README.md"] if start else []
    proc = subprocess.run([sys.executable, "-m", "attnsweep.cli", "report", "--from", folder, *readme],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if start:
        assert read_section(copy / "README.md", start, end) == read_section(ROOT / "README.md", start, end)
    # The page says where its rows came from: the folder, not a store.
    assert f"from the published rows in {folder};" in (copy / folder / "report.html").read_text()
    made = sorted(p.relative_to(copy / folder) for p in (copy / folder).rglob("*") if p.is_file())
    kept = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file()
                  and not (folder == "docs/findings" and p.relative_to(committed).parts[0] in INNER))
    assert made == kept
    for name in made:
        old, new = (committed / name).read_bytes(), (copy / folder / name).read_bytes()
        if name.suffix in (".html", ".json", ".md"):
            old, new = _without_time(old.decode()), _without_time(new.decode())
        assert old == new, f"{folder}/{name} changed: publish the findings again (attnsweep report --from)"
    verdicts = json.loads((committed / "verdicts.json").read_text())
    assert all(v["verdict"] in ("supported", "not supported", "inconclusive", "not tested") for v in verdicts["verdicts"])
