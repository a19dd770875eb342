"""Publishing a run (`attnsweep report --publish --readme`): the findings folder and the README
section are regenerated from a small store, and every number in them is checked against
verdicts.json and against the store's own rows, read here with polars."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from attnsweep.presentation.readme_sections import END, START, read_section

SPEC = (Path(__file__).parent / "specs" / "rep.yaml").read_text()  # 36 trials, as tests/test_report.py
README = f"""# A project

Text before the section.

{START}
stale text that must go
{END}

Text after the section.
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
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("publish")
    (root / "pub.yaml").write_text(SPEC)
    proc = _cli("run", "pub.yaml", "--store", "store", "--no-analyze", cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{6})", proc.stderr).group(1)
    (root / "README.md").write_text(README)
    proc = _cli(
        "report",
        run_id,
        "--store",
        "store",
        "--out",
        "docs/findings",
        "--readme",
        "README.md",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, run_id


def _rows(section: str) -> dict[str, list[str]]:
    """The verdict table of the section: claim name -> its cells, backslash escapes undone
    (CommonMark: a backslash before punctuation is the punctuation)."""
    out = {}
    for line in section.splitlines():
        if re.match(r"\| (L\d|R):", line):
            cells = [re.sub(r"\\(.)", r"\1", c.strip()) for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            out[cells[0].split(":", 1)[0]] = cells
    return out


@pytest.mark.slow
def test_the_folder_holds_report_verdicts_table_figure_and_every_trial_row(published):
    root, run_id = published
    folder = root / "docs" / "findings"
    for name in (
        "report.html",
        "verdicts.json",
        "m_star.csv",
        "trials.parquet",
        "findings.md",
        "m_star_vs_T.png",
    ):
        assert (folder / name).is_file(), name
    with Image.open(folder / "m_star_vs_T.png") as img:
        assert img.format == "PNG" and img.size[0] > 400
    # trials.parquet holds exactly the store's rows of the run (read here without attnsweep).
    stored = pl.scan_parquet(str(root / "store" / "trials" / "**" / "*.parquet")).collect()
    published_rows = pl.read_parquet(folder / "trials.parquet")
    assert published_rows.height == stored.height == 36
    assert sorted(published_rows["trial_id"]) == sorted(stored["trial_id"])
    assert set(published_rows["run_id"]) == {run_id}


@pytest.mark.slow
def test_the_m_star_table_is_the_one_the_analysis_computes(published):
    from attnsweep.analysis.boolean import analyze_run
    from attnsweep.results import ResultsStore

    root, run_id = published
    table = pl.read_csv(root / "docs" / "findings" / "m_star.csv")
    analysis = analyze_run(ResultsStore(root / "store"), run_id).m_star.sort("model", "T")
    table = table.sort("model", "T")
    assert table["T"].to_list() == analysis["T"].to_list() and table["model"].to_list() == analysis["model"].to_list()
    # Exported, a bound's value is in m_star_bound and m_star is empty (analysis/exports.py, export_m_star).
    assert table["bound"].to_list() == analysis["bound"].to_list()
    for exact, ours, bound, theirs in zip(
        table["bound"] == "exact", table["m_star"], table["m_star_bound"], analysis["m_star"], strict=True
    ):
        value, empty = (ours, bound) if exact else (bound, ours)
        assert empty is None
        assert (value is None and (theirs is None or theirs != theirs)) or value == pytest.approx(theirs, nan_ok=True)


@pytest.mark.slow
def test_the_findings_page_says_exactly_what_verdicts_json_says(published):
    root, _ = published
    verdicts = {
        v["claim"].split(":", 1)[0]: v
        for v in json.loads((root / "docs/findings/verdicts.json").read_text())["verdicts"]
    }
    rows = _rows((root / "docs/findings/findings.md").read_text())
    # rep.yaml has two T, one norm bound and one s: L1, L2 and L3 have no row, and no verdict either
    assert sorted(rows) == sorted(verdicts) == ["L4", "R"]
    assert (
        "Not tested here: L1 (needs transformer cells at 3 or more values of T); L2 (needs transformer cells "
        "that differ only in norm\\_bound, at 2 or more" in (root / "docs/findings/findings.md").read_text()
    )
    for name, cells in rows.items():
        v = verdicts[name]
        assert cells == [v["claim"], v["verdict"], v["statistic"], v["interval"], v["why"]], name


def _table_lines(section: str) -> list[str]:
    return [line for line in section.splitlines() if line.startswith("|")]


@pytest.mark.slow
def test_the_readme_gets_a_short_verdict_table_made_from_verdicts_json(published):
    root, run_id = published
    verdicts = {v["id"]: v for v in json.loads((root / "docs/findings/verdicts.json").read_text())["verdicts"]}
    section = read_section(root / "README.md")
    table = _table_lines(section)
    assert len(table) <= 10 and table[0] == "| claim | verdicts | bottom line |"
    row = next(line for line in table if "Edelman et al." in line)
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    assert len(cells) == 3
    said = re.sub(r"\\(.)", r"\1", cells[1])
    for claim in ("L4", "R"):
        assert f"{claim} {verdicts[claim]['verdict']}" in said.split("; "), (claim, said)
    # Not tested here (two T, one norm bound, one s): not in the row.
    assert "L1" not in verdicts and "L2" not in verdicts and not re.search(r"\bL[123] ", said)
    assert said.startswith(f"L4 {verdicts['L4']['verdict']}"), said
    assert "[Findings](docs/findings/findings.md)" in cells[2]
    assert f"<!-- runs (sparse Boolean): {run_id} -->" in section.splitlines()
    # The text around the section is kept.
    text = (root / "README.md").read_text()
    assert "stale text" not in text and text.startswith("# A project\n\nText before the section.")
    assert text.rstrip().endswith("Text after the section.")


@pytest.mark.slow
def test_regenerating_gives_the_same_section_and_a_lone_marker_is_an_error(published):
    root, run_id = published
    before = (root / "README.md").read_text()
    proc = _cli(
        "report",
        run_id,
        "--store",
        "store",
        "--out",
        "docs/findings",
        "--readme",
        "README.md",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (root / "README.md").read_text() == before
    broken = root / "BROKEN.md"
    broken.write_text(f"# x\n{START}\nno end marker\n")
    proc = _cli("report", run_id, "--store", "store", "--out", "other", "--readme", "BROKEN.md", cwd=root)
    assert proc.returncode == 2 and "marker" in proc.stderr, proc.stderr[-2000:]
    assert broken.read_text() == f"# x\n{START}\nno end marker\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        f"# x\n{END}\nkept\n{START}\n",  # the end before the start
        f"# x\n{START}\na\n{END}\n{START}\nb\n{END}\n",  # two blocks
        f"# x\n{START}\nno end marker\n",  # one marker
    ],
)
def test_a_readme_with_bad_marker_lines_is_refused_before_anything_is_written(published, text):
    root, run_id = published
    (root / "BAD.md").write_text(text)
    proc = _cli("report", run_id, "--store", "store", "--out", "untouched", "--readme", "BAD.md", cwd=root)
    assert proc.returncode == 2 and "marker" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert (root / "BAD.md").read_text() == text and not (root / "untouched").exists()


@pytest.mark.slow
def test_a_readme_that_is_not_utf8_is_refused_and_markers_count_only_as_whole_lines(published):
    root, run_id = published
    (root / "LATIN.md").write_bytes(b"# Caf\xe9\n")
    proc = _cli(
        "report",
        run_id,
        "--store",
        "store",
        "--out",
        "untouched2",
        "--readme",
        "LATIN.md",
        cwd=root,
    )
    assert proc.returncode == 2 and "UTF-8" in proc.stderr and not (root / "untouched2").exists(), proc.stderr[-2000:]
    # Markers quoted inside a sentence are text, not markers: the section is appended after it,
    # and CRLF line endings are kept.
    quoted = f"# y\r\nput `{START}` then `{END}` in your README\r\n"
    (root / "QUOTED.md").write_bytes(quoted.encode())
    proc = _cli(
        "report",
        run_id,
        "--store",
        "store",
        "--out",
        "docs/findings",
        "--readme",
        "QUOTED.md",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (root / "QUOTED.md").read_bytes().decode()
    assert text.startswith(quoted) and "\n" not in text.replace("\r\n", "")
    assert any("Edelman et al." in line for line in _table_lines(read_section(root / "QUOTED.md")))


def test_a_short_series_names_the_bounds_that_end_its_span():
    # Exact m* up to T = 256, then bounds at 512 and 1024: the sentence says the span ends
    # there because m* is only a bound, and which flag made it one; a series whose bounds lie
    # inside its span (or has none) gets no such clause.
    from attnsweep.presentation.findings_boolean import _meaning

    kind = dict(label="fixed positions, norm bound 1, inputs of norm sqrt(d), untuned", theory=True)
    left = [
        dict(T=512, text="≤ 168", flags=["out-of-epochs"]),
        dict(T=1024, text="≤ 340", flags=["budget-limited"]),
    ]
    numbers = dict(best_law="power", decades=1.8, log_margin_aic=-17.2, T=[4, 16, 64, 256], left_out=left)
    text = _meaning(kind, "inconclusive", numbers)
    assert text.startswith("inconclusive for the theorem's class by the rule (T spans 1.8 decades, L1 needs 3)")
    assert (
        "beyond T = 256 m* is a bound, not a value (T=512: ≤ 168, T=1024: ≤ 340; budget-limited, out-of-epochs)" in text
    )
    inside = dict(
        numbers,
        T=[4, 16, 64, 256, 2048],
        left_out=[dict(T=1024, text="≤ 436", flags=["out-of-epochs"])],
    )
    assert "bound, not a value" not in _meaning(kind, "inconclusive", inside)


def test_the_norm_lines_fit_the_least_norm_of_a_success_against_ln_T():
    # Two series: unbounded, the least ||W_Q W_K^T|| of a success is exactly 1 + 0.1 ln T, so
    # the least-squares slope is 0.1 with a zero-width interval; bounded at B = 1.2, the same
    # norms reach the bound from T = 8 on (1 + 0.1 ln 8 = 1.21), so the line says the fit there
    # measures the bound, and the share at the bound runs from 0% (T = 2) to 100%.
    import polars as pl

    from attnsweep.presentation.boolean_notes import norm_use_lines

    Ts = [2, 8, 32, 128]
    rows = [
        dict(
            model="transformer",
            T=T,
            norm_bound=B,
            min_norm_qk=min(1 + 0.1 * math.log(T), B or math.inf),
            at_bound=None if B is None else float(T > 2),
        )
        for B in (None, 1.2)
        for T in Ts
    ]
    union = pl.DataFrame(rows, schema_overrides={"norm_bound": pl.Float64, "at_bound": pl.Float64})
    claims = [
        dict(
            claim="L1: m* grows like log T",
            series=[dict(cells={"norm_bound": B}, numbers=dict(T=Ts)) for B in (None, 1.2)],
        )
    ]
    lines = norm_use_lines(claims, union)
    unbounded, bounded = [line for line in lines if line.startswith("- ")]
    assert "+0.1 per unit of ln T (95% CI 0.1 .. 0.1, 4 T)" in unbounded and "measures the bound" not in unbounded
    assert "at the bound in 0%..100%" in bounded and "T = 2: 0%" in bounded and "measures the bound" in bounded
    assert norm_use_lines(claims, union.drop("min_norm_qk")) == []


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_report_never_writes_over_published_runs_it_does_not_include(tmp_path):
    # The main findings hold four runs. Reporting one of them into that folder (the default
    # --out of --from), or another folder's run over it, would drop the others' rows and
    # re-sign SHA256SUMS; a README section showing other runs would be replaced. Each is
    # refused (exit 2, the runs named), and not one byte of the folders or the README moves.
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(
        root / "docs/findings",
        tmp_path / "main",
        ignore=shutil.ignore_patterns("symmetry", "theory-500", "tuned-interrupted", "theory-4096-margin"),
    )
    shutil.copytree(root / "docs/findings/theory-500", tmp_path / "t500")
    shutil.copy(root / "README.md", tmp_path / "README.md")
    main_runs = json.loads((tmp_path / "main/verdicts.json").read_text())["runs"]
    assert len(main_runs) >= 2
    before = {name: _tree(tmp_path / name) for name in ("main", "t500")}
    readme = (tmp_path / "README.md").read_bytes()

    subset = _cli("report", "--from", "main", main_runs[0], cwd=tmp_path)
    assert subset.returncode == 2 and all(r in subset.stderr for r in main_runs[1:]), subset.stderr
    over = _cli("report", "--from", "t500", "--out", "main", cwd=tmp_path)
    assert over.returncode == 2 and "would drop them" in over.stderr and main_runs[0] in over.stderr, over.stderr
    headline = _cli("report", "--from", "t500", "--out", "elsewhere", "--readme", "README.md", cwd=tmp_path)
    assert headline.returncode == 2 and "--readme" in headline.stderr and main_runs[0] in headline.stderr
    # Without its runs.parquet, or with a link at that name, the folder's trials.parquet still
    # says which runs it holds; and a folder inside a published folder's figures is refused.
    (tmp_path / "main/runs.parquet").rename(tmp_path / "runs.kept")
    for link in (False, True):
        if link:
            (tmp_path / "main/runs.parquet").symlink_to(tmp_path / "runs.kept")
        lost = _cli("report", "--from", "t500", "--out", "main", cwd=tmp_path)
        assert lost.returncode == 2 and main_runs[0] in lost.stderr, lost.stderr
    (tmp_path / "main/runs.parquet").unlink()
    (tmp_path / "runs.kept").rename(tmp_path / "main/runs.parquet")
    figures = _cli("report", "--from", "t500", "--out", "main/figures/x", cwd=tmp_path)
    assert figures.returncode == 2 and "inside the figures" in figures.stderr, figures.stderr
    assert {name: _tree(tmp_path / name) for name in ("main", "t500")} == before
    assert (tmp_path / "README.md").read_bytes() == readme and not (tmp_path / "elsewhere").exists()
    # The same run from a store that holds fewer of its rows than the folder: refused too.
    from attnsweep.presentation.publish import write_sums
    from attnsweep.presentation.published import load
    from attnsweep.results import ResultsStore

    short = tmp_path / "short"
    shutil.copytree(tmp_path / "t500", short)
    rows = pl.read_parquet(short / "trials.parquet")
    rows.filter(pl.col("T") < rows["T"].max()).write_parquet(short / "trials.parquet")
    write_sums(short)
    (run_id,) = load(short, ResultsStore(tmp_path / "s"))
    fewer = _cli("report", run_id, "--store", "s", "--out", "t500", "--publish", cwd=tmp_path)
    assert fewer.returncode == 2 and f"holds {rows.height} rows of run {run_id}" in fewer.stderr, fewer.stderr
    assert _tree(tmp_path / "t500") == before["t500"]
    # The same runs again (republishing) is allowed, and one run to a folder of its own too.
    assert _cli("report", "--from", "main", main_runs[0], "--out", "one", cwd=tmp_path).returncode == 0
    # A sweep's name means its latest run in the folder, as it does in a store.
    by_name = _cli("report", "--from", "t500", "theory", "--out", "two", cwd=tmp_path)
    assert by_name.returncode == 0 and "theory is a sweep: its latest run is" in by_name.stderr, by_name.stderr


def test_the_headline_says_when_the_combined_l1_is_not_the_theorem_class_answer():
    # L1 combined reads "not supported" from the learned, unbounded series alone; the series of
    # the theorem's class (fixed codes, a bound, inputs of norm sqrt(d)) is inconclusive, and
    # the headline says that this, not the combined row, answers the claim as stated.
    from attnsweep.presentation.findings_boolean import _as_stated

    union = pl.DataFrame(
        [
            dict(model="transformer", T=T, positions=p, norm_bound=B, ln_affine=ln)
            for T in (8, 64)
            for p, B, ln in (("learned", None, True), ("fixed", 1.0, False))
        ],
        schema_overrides={"norm_bound": pl.Float64},
    )
    series = [
        dict(cells={"positions": "learned"}, verdict="not supported"),
        dict(cells={"positions": "fixed"}, verdict="inconclusive"),
    ]
    (line, _) = _as_stated(dict(verdict="not supported"), series, union)
    assert 'reads "not supported"' in line and "theorem's class above, L1 is inconclusive" in line
    assert _as_stated(dict(verdict="inconclusive"), series, union) == []
    assert _as_stated(dict(verdict="not supported"), series[:1], union) == []


def test_a_single_group_symmetry_run_shows_its_m_star_per_cell():
    # A rerun of one symmetry cell tests no claim (no pair to compare), but its m* is shown:
    # an exact value with its interval, and a bound written as one.
    from attnsweep.presentation.findings_symmetry import _symmetry_cells

    m_star = pl.DataFrame(
        [
            dict(
                teacher="equivariant",
                student="transformer + rotations",
                d=16,
                n=6,
                k=4,
                m_star=2.7,
                bound="exact",
                ci_lo=2.0,
                ci_hi=3.3,
                n_seeds=5,
                budget="ok",
                flags="few-seeds",
            ),
            dict(
                teacher="equivariant",
                student="transformer",
                d=32,
                n=6,
                k=4,
                m_star=512.0,
                bound="lower",
                ci_lo=512.0,
                ci_hi=math.inf,
                n_seeds=5,
                budget="budget-limited",
                flags=None,
            ),
        ]
    )
    rows = [line for line in _symmetry_cells(m_star) if line.startswith("| equivariant")]
    assert rows[0] == "| equivariant | transformer + rotations | 16 | 6 | 4 | 2.7 | 2.0 .. 3.3 | 5 | ok | few-seeds |"
    # The bound is Markdown-escaped (a bare ">" would open a quote).
    assert "| \\> 512 | 512.0 .. inf |" in rows[1] and rows[1].endswith("| budget-limited | - |")
    assert _symmetry_cells(m_star.clear()) == []
