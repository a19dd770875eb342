"""Publishing a symmetry run over more than one size: the report, verdicts.json, the m* CSV,
every trial row and the run records go into the findings folder, the README gets the
symmetry part between its own markers (leaving the sparse-Boolean part alone), and
`attnsweep report --from FOLDER` makes the same numbers again from the committed rows."""

import json
import os
import re
import subprocess
import sys

import polars as pl
import pytest
from findings_compare import file_differences, json_differences, text_differences

from attnsweep.presentation.markdown import md_text
from attnsweep.presentation.publish import write_sums
from attnsweep.presentation.readme_sections import END, START, read_section
from attnsweep.presentation.verdict_table import BOOLEAN, ROW_START

pytestmark = pytest.mark.slow  # published symmetry findings built and rebuilt through the CLI

# Two sizes (d = 4, 8), every student, both teachers: 2 groups x 7 cells x 2 m x 2 seeds = 56 trials.
SPEC = """
name: sym-pub
experiment: symmetry
seeds: 2
grid:
  - {teacher: [equivariant, control], d: [4, 8], m: [2, 8], equivariance: [orthogonal]}
  - {teacher: [equivariant, control], d: [4, 8], m: [2, 8], model: [transformer, mlp], equivariance: [none]}
  - {teacher: [equivariant], d: [4, 8], m: [2, 8], model: [transformer], equivariance: [augment]}
fixed: {n: 3, k: 2, width: 8, heads: 2, max_epochs: 40, n_test: 64, n_q: 2}
analysis: {target_error: 0.05, n_boot: 100}
"""
BOOLEAN_ROW = ROW_START[BOOLEAN] + " the sparse-Boolean row | which a symmetry report must keep |"
BOOLEAN_RUNS = "<!-- runs (sparse Boolean): 20990101-000000-abcdef -->"
README = f"""# A project

{START}
| claim | verdicts | bottom line |
|---|---|---|
{BOOLEAN_ROW}
| stale symmetry text |

{BOOLEAN_RUNS}
{END}

Text after.
"""


def _cli(*args, cwd):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("sympub")
    (root / "sym.yaml").write_text(SPEC)
    proc = _cli("run", "sym.yaml", "--store", "store", "--no-analyze", cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", proc.stderr).group(1)
    (root / "README.md").write_text(README)
    proc = _cli(
        "report",
        run_id,
        "--store",
        "store",
        "--out",
        "docs/findings/symmetry",
        "--readme",
        "README.md",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, run_id


def test_the_folder_holds_what_the_issue_names(published):
    root, run_id = published
    folder = root / "docs/findings/symmetry"
    for name in (
        "report.html",
        "verdicts.json",
        "m_star_symmetry.csv",
        "trials.parquet",
        "runs.parquet",
        "SHA256SUMS",
        "findings.md",
        f"figures/{run_id}/advantage_vs_size.png",
        f"figures/{run_id}/error_vs_m_by_d.png",
    ):
        assert (folder / name).is_file(), name
    stored = pl.scan_parquet(str(root / "store" / "trials" / "**" / "*.parquet")).collect()
    rows = pl.read_parquet(folder / "trials.parquet")
    assert rows.height == stored.height == 56 and sorted(rows["trial_id"]) == sorted(stored["trial_id"])
    runs = pl.read_parquet(folder / "runs.parquet")
    assert runs["run_id"].to_list() == [run_id] and runs["experiment"].to_list() == ["symmetry"]
    # The m* table: one row per (teacher, student, n, k, d) cell, 14 of them.
    table = pl.read_csv(folder / "m_star_symmetry.csv")
    assert table.height == 14 and set(table["d"]) == {4, 8}


def test_every_claim_is_stated_per_group_and_across_groups(published):
    root, _ = published
    written = json.loads((root / "docs/findings/symmetry/verdicts.json").read_text())
    claims = [v["claim"] for v in written["verdicts"] if v["claim"].startswith("S")]
    assert [c.split(":")[0] for c in claims] == ["S1", "S2", "S3", "S4"]
    assert all(c.endswith("in every (d, n, k) group") for c in claims)
    groups = written["groups"]
    assert sorted((g["d"], g["claim"]) for g in groups) == [(d, f"S{i}") for d in (4, 8) for i in range(1, 5)]
    assert all(g["verdict"] in ("supported", "not supported", "inconclusive") and g["interval"] for g in groups)
    findings = (root / "docs/findings/symmetry/findings.md").read_text()
    for g in groups:  # findings.md states every group's verdict with its statistic and interval
        cells = [md_text(g[c]) for c in ("d", "n", "k", "claim", "verdict", "statistic", "interval")]
        assert "| " + " | ".join(cells) + " |" in findings
    measured = [m["measurement"] for m in written["measurements"]]
    assert any("against d (n=3, k=2)" in m for m in measured)
    assert sum("E of the generic transformer against m" in m for m in measured) == 2
    page = (root / "docs/findings/symmetry/report.html").read_text()
    assert "S1-S4 per (d, n, k) group" in page and "S2&#39;s advantage" in page


def test_the_readme_gets_the_symmetry_row_and_keeps_the_other(published):
    root, run_id = published
    section = read_section(root / "README.md", START, END)
    lines = section.splitlines()
    assert BOOLEAN_ROW in lines and BOOLEAN_RUNS in lines and "stale" not in section
    assert f"<!-- runs (symmetry): {run_id} -->" in lines
    row = next(line for line in lines if "Ma & Ying" in line)
    verdicts = {
        v["id"]: v["verdict"]
        for v in json.loads((root / "docs/findings/symmetry/verdicts.json").read_text())["verdicts"]
    }
    for claim in ("S1", "S2", "S3", "S4"):  # one run: each claim's verdict is that run's
        assert f"{claim} {verdicts[claim]}" in row, (claim, row)
    assert "[Findings](docs/findings/symmetry/findings.md)" in row
    # The per-group rows and the figures are on the findings page the row links.
    page = (root / "docs/findings/symmetry/findings.md").read_text()
    groups = [line for line in page.splitlines() if re.match(r"\| [48] \| 3 \| 2 \|", line)]
    assert {line.split("|")[1].strip() for line in groups} == {"4", "8"}  # both (d, n, k) groups
    for claim in ("S1", "S2", "S3", "S4"):
        assert f"| {claim}: " in page and verdicts[claim] in page
    assert f"figures/{run_id}/advantage_vs_size.png" in page


def test_the_findings_come_back_from_the_committed_rows(published, tmp_path):
    root, _ = published
    folder = root / "docs/findings/symmetry"
    again = tmp_path / "again"
    proc = _cli("report", "--from", str(folder), "--out", str(again), cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Computed numbers within tests/findings_compare.py's tolerances (the folder was made on
    # another processor); the rows are copied, not computed, so they stay byte for byte.
    before, after = (json.loads((f / "verdicts.json").read_text()) for f in (folder, again))
    assert json_differences(before["verdicts"], after["verdicts"], "verdicts") == []
    assert json_differences(before["measurements"], after["measurements"], "measurements") == []
    for name in ("findings.md", "m_star_symmetry.csv"):
        assert file_differences(folder / name, again / name, name) == []
    for name in ("trials.parquet", "runs.parquet"):
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name


def test_from_a_folder_without_the_rows_is_one_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = _cli("report", "--from", "empty", cwd=tmp_path)
    assert proc.returncode == 2
    assert "runs.parquet" in proc.stderr and "trials.parquet" in proc.stderr and "Traceback" not in proc.stderr


def test_one_command_makes_the_committed_findings_and_readme_again(published, tmp_path):
    import shutil

    root, _ = published
    copy = tmp_path / "checkout"
    shutil.copytree(root / "docs", copy / "docs")
    shutil.copy(root / "README.md", copy / "README.md")
    proc = _cli("report", "--from", "docs/findings/symmetry", "--readme", "README.md", cwd=copy)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert text_differences((root / "README.md").read_text(), (copy / "README.md").read_text(), "README") == []
    folder = "docs/findings/symmetry"
    figures = sorted(p.relative_to(root / folder).as_posix() for p in (root / folder / "figures").rglob("*.png"))
    assert len(figures) == 5
    for name in ("findings.md", "m_star_symmetry.csv", "SHA256SUMS", *figures):
        assert file_differences(root / folder / name, copy / folder / name, name) == [], name
    for name in ("trials.parquet", "runs.parquet"):  # copied rows: byte for byte on any processor
        assert (copy / folder / name).read_bytes() == (root / folder / name).read_bytes(), name


def _folder_copy(published, tmp_path, name="bad"):
    import shutil

    root, _ = published
    target = tmp_path / name
    shutil.copytree(root / "docs/findings/symmetry", target)
    return root, target


def _refused(root, folder, *words):
    proc = _cli("report", "--from", str(folder), "--out", str(folder.parent / "out"), cwd=root)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert not (folder.parent / "out").exists()  # nothing written


def test_a_changed_byte_in_a_published_data_page_is_refused(published, tmp_path):
    import pyarrow.parquet as pq

    root, folder = _folder_copy(published, tmp_path)
    path = folder / "trials.parquet"
    meta = pq.ParquetFile(path).metadata
    column = meta.row_group(0).column(meta.schema.names.index("test_error"))
    clean = path.read_bytes()
    before = pq.read_table(path)["test_error"]
    # A byte of the page whose flip still decodes, to other numbers: only the checksum tells.
    for at in range(column.data_page_offset + column.total_compressed_size - 1, column.data_page_offset, -1):
        data = bytearray(clean)
        data[at] ^= 0x01
        path.write_bytes(bytes(data))
        try:
            if not pq.read_table(path)["test_error"].equals(before):
                break
        except Exception:  # noqa: BLE001 - this flip broke the decoding itself; try the next byte
            continue
    else:
        pytest.fail("no byte of the page changes the values silently")
    _refused(root, folder, "trials.parquet", "SHA256SUMS")
    write_sums(folder)  # a folder whose digests were made again over the damage: the page checksum still tells
    _refused(root, folder, "trials.parquet", "cannot be read")


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "empty",
        "swapped",
        "column dropped",
        "foreign run",
        "name not UTF-8",
        "run_id not a string",
    ],
)
def test_a_damaged_or_foreign_published_file_is_one_clear_error(published, tmp_path, damage):
    import pyarrow.parquet as pq

    root, folder = _folder_copy(published, tmp_path)
    trials, runs = folder / "trials.parquet", folder / "runs.parquet"
    if damage == "truncated":
        trials.write_bytes(trials.read_bytes()[: trials.stat().st_size // 2])
    elif damage == "empty":
        runs.write_bytes(b"")
    elif damage == "swapped":
        a, b = trials.read_bytes(), runs.read_bytes()
        trials.write_bytes(b)
        runs.write_bytes(a)
    elif damage == "column dropped":
        pq.write_table(pq.read_table(trials).drop_columns(["test_error"]), trials)
    elif damage == "name not UTF-8":  # one byte of a column name in the footer
        data = bytearray(trials.read_bytes())
        at = data.rindex(b"eq_error_max")
        data[at] = 0x9E
        trials.write_bytes(bytes(data))
    elif damage == "run_id not a string":
        t = pq.read_table(trials)
        i = t.column_names.index("run_id")
        pq.write_table(t.set_column(i, "run_id", t["run_id"].cast("binary")), trials)
    else:
        t = pl.read_parquet(trials)
        pl.concat([t, t.head(3).with_columns(run_id=pl.lit("20990101-000000-abcdef"))]).write_parquet(trials)
    if damage != "name not UTF-8":  # the others as a folder made consistent again: each has its own check
        _refused(root, folder, "does not match its SHA-256")
        write_sums(folder)
    words = {
        "column dropped": ["test_error"],
        "foreign run": ["20990101-000000-abcdef", "does not list"],
        "name not UTF-8": ["trials.parquet", "SHA256SUMS"],
        "run_id not a string": ["run_id", "not string"],
    }
    _refused(root, folder, *words.get(damage, ["parquet"]))


def test_from_with_a_run_the_folder_does_not_hold_names_what_it_holds(published, tmp_path):
    root, run_id = published
    proc = _cli(
        "report",
        "--from",
        "docs/findings/symmetry",
        "nosuchrun",
        "--out",
        str(tmp_path / "o"),
        cwd=root,
    )
    assert proc.returncode == 2 and "holds no run nosuchrun" in proc.stderr and run_id in proc.stderr
    assert "attnsweep-findings-" not in proc.stderr  # not the scratch store's path


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            "d = 0 in a row",
            ["d", "greater than or equal to 2", "not a trial a run could have written"],
        ),
        ("rows of another experiment", ["experiment 'symmetry'", "'sparse_boolean'"]),
        ("an unknown status", ["status 'bogus'", "finished"]),
        ("an unknown experiment", ["experiment 'magic'", "symmetry"]),
    ],
)
def test_an_edited_and_checksummed_again_folder_with_unsound_contents_is_one_clear_error(
    published, tmp_path, edit, words
):
    # Files edited, then SHA256SUMS written again: the digests match, so the contents themselves are checked.
    root, folder = _folder_copy(published, tmp_path)
    trials, runs = folder / "trials.parquet", folder / "runs.parquet"
    if edit == "d = 0 in a row":
        t = pl.read_parquet(trials)
        t.with_columns(d=pl.when(pl.int_range(pl.len()) == 0).then(0).otherwise(pl.col("d"))).write_parquet(trials)
    elif edit == "rows of another experiment":
        pl.read_parquet(trials).with_columns(experiment=pl.lit("sparse_boolean")).write_parquet(trials)
    elif edit == "an unknown status":
        pl.read_parquet(runs).with_columns(status=pl.lit("bogus")).write_parquet(runs)
    else:
        pl.read_parquet(runs).with_columns(experiment=pl.lit("magic")).write_parquet(runs)
    write_sums(folder)
    _refused(root, folder, *words)
