"""How the verdict report's tables read: text left and numbers right, run times in UTC to the
minute, and an m* at or beyond the grid's ends written the same way in both experiments (and
in ``attnsweep analyze`` of a symmetry run). Built from m* tables that stats/critical.py
computes on hand-made trials, and the page's own template; no Ray, no store."""

from __future__ import annotations

import datetime as dt
import re
from html.parser import HTMLParser

import polars as pl
from rich.console import Console

from attnsweep.analysis.claims import ReportRun
from attnsweep.analysis.symmetry import SymmetryAnalysis
from attnsweep.presentation.report import _run_view, _table, _template
from attnsweep.presentation.terminal import print_symmetry
from attnsweep.stats import critical_sample_sizes, symmetry
from attnsweep.stats.symmetry import CELL as SYMMETRY_CELL
from attnsweep.stats.symmetry import verdicts

BOOLEAN_CELL = ["T", "model", "s", "norm_bound"]
M_GRID = (8, 64, 1024)


def _boolean_m_star() -> pl.DataFrame:
    """Three transformer cells at T = 8, 16, 32 and 4 seeds on m = 8, 64, 1024: T=8 succeeds
    at every m (m* at or below 8), T=16 from m = 64 on, T=32 never (m* beyond 1024)."""
    first = {8: 8, 16: 64, 32: None}
    rows = [
        dict(
            T=T,
            model="transformer",
            s=3,
            norm_bound=None,
            m=m,
            seed=seed,
            status="done",
            test_acc=1.0 if first[T] is not None and m >= first[T] else 0.5,
        )
        for T in first
        for m in M_GRID
        for seed in range(4)
    ]
    trials = pl.DataFrame(rows, schema_overrides={"norm_bound": pl.Float64})
    table, _ = critical_sample_sizes(trials, BOOLEAN_CELL, n_boot=50)
    return table.sort("T")


def _symmetry_m_star() -> pl.DataFrame:
    """The inner-product student reaches the target at every m (4, 32), the MLP at none."""
    rows = [
        dict(
            teacher="equivariant",
            model=model,
            equivariance=eq,
            n=4,
            k=2,
            d=4,
            m=m,
            seed=seed,
            status="done",
            test_error=0.01 if eq == "orthogonal" else 0.9,
            eq_error_median=1e-3,
            eq_error_max=1e-3,
            perm_error_median=1e-3,
        )
        for model, eq in (("transformer", "orthogonal"), ("mlp", "none"))
        for m in (4, 32)
        for seed in range(3)
    ]
    return symmetry.critical_sample_sizes(pl.DataFrame(rows), target_error=0.05, n_boot=50, ci=0.95)


class _Cells(HTMLParser):
    """Every table row of a page as (tag, class, text) per cell."""

    def __init__(self):
        super().__init__()
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = [tag, dict(attrs).get("class"), ""]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(tuple(self._cell))
            self._cell = None


def _page(boolean: dict | None, symmetry: list[tuple[str, dict]], runs=()) -> str:
    return _template().render(
        caveats=[],
        title="t",
        generated="g",
        source="the results store",
        runs=list(runs),
        own=[],
        verdicts=[],
        untested="",
        r_plot="",
        boolean_table=boolean,
        symmetry_tables=symmetry,
        scale=[],
        reference="ref.csv",
        margin=(0.8, 1.25),
    )


def _m_star_tables(page: str) -> list[dict[str, list[tuple[str, str]]]]:
    """Each m* table of the page as {column: [(class, text) per row]} (tables whose header row
    starts with a cell column and holds an "m*" column)."""
    parser = _Cells()
    parser.feed(page)
    tables, current = [], None
    for row in parser.rows:
        if row and row[0][0] == "th" and any(c[2] == "m*" for c in row):
            current = {c[2]: [] for c in row}
            current["_header_class"] = {c[2]: c[1] for c in row}
            tables.append(current)
        elif current is not None and row and all(c[0] == "td" for c in row) and len(row) == len(current) - 1:
            for name, cell in zip(list(current)[:-1], row, strict=True):
                current[name].append((cell[1], cell[2]))
    return tables


def test_the_m_star_tables_put_text_left_and_numbers_right():
    page = _page(
        _table(_boolean_m_star(), BOOLEAN_CELL),
        [("sym", _table(_symmetry_m_star(), SYMMETRY_CELL))],
    )
    boolean, symmetry = _m_star_tables(page)
    text = {"model", "teacher", "student", "flags"}
    for table in (boolean, symmetry):
        for column, cells in table.items():
            if column == "_header_class":
                continue
            want = "text" if column in text else "num"
            assert {cls for cls, _ in cells} == {want}, column
            assert table["_header_class"][column] == want, column
    assert [t for _, t in boolean["model"]] == ["transformer"] * 3
    assert {t for _, t in symmetry["student"]} == {"inner-product", "mlp"}
    # The page's CSS aligns the two classes as their names say.
    style = page[page.index("<style>") : page.index("</style>")]
    assert re.search(r"td\.num, th\.num \{ text-align: right;", style)
    assert re.search(r"td\.text, th\.text \{ text-align: left; \}", style)


def test_a_bound_reads_the_same_in_both_experiments():
    page = _page(
        _table(_boolean_m_star(), BOOLEAN_CELL),
        [("sym", _table(_symmetry_m_star(), SYMMETRY_CELL))],
    )
    boolean, symmetry = _m_star_tables(page)
    # T=8 succeeds at the smallest m (8), T=32 at no m up to 1024 (_boolean_m_star).
    m_star = dict(zip((t for _, t in boolean["T"]), (t for _, t in boolean["m*"]), strict=True))
    assert m_star["8"] == "≤ 8" and m_star["32"] == "> 1024"
    assert re.fullmatch(r"\d+\.\d", m_star["16"])  # measured: between 8 and 64, one decimal
    assert 8 < float(m_star["16"]) <= 64
    # The inner-product student reaches the target at m = 4, the smallest; the MLP never (<= 32).
    sym = dict(zip((t for _, t in symmetry["student"]), (t for _, t in symmetry["m*"]), strict=True))
    assert sym == {"inner-product": "≤ 4", "mlp": "> 32"}
    assert "8.0≤" not in page and "≤4" not in page and "> max" not in page


def test_tuned_columns_write_a_bound_as_the_m_star_column_does():
    table = _boolean_m_star().with_columns(
        settings=pl.lit("tuned"),
        m_star_default=pl.col("m_star"),
        censored_default=pl.col("censored"),
        bound_default=pl.col("bound"),
        m_star_tuned=pl.col("m_star"),
        censored_tuned=pl.col("censored"),
        bound_tuned=pl.col("bound"),
        tuning=pl.lit("tuned"),
    )
    (shown,) = _m_star_tables(_page(_table(table, BOOLEAN_CELL), []))
    assert [t for _, t in shown["m* tuned"]][0] == "≤ 8"  # T=8: at the smallest m, 8
    assert [t for _, t in shown["m* spec settings"]][0] == "≤ 8"
    assert [t for _, t in shown["m* tuned"]][2] == "> 1024"  # a bound's value travels with it
    assert {c for c, _ in shown["tuning"]} == {"text"} and {c for c, _ in shown["m* tuned"]} == {"num"}


def test_print_symmetry_writes_bounds_as_the_page_does():
    m_star = _symmetry_m_star()
    result = SymmetryAnalysis(
        "sym",
        "run",
        m_star,
        pl.DataFrame(
            schema=dict(
                teacher=pl.String,
                student=pl.String,
                m=pl.Int64,
                test_error=pl.Float64,
                eq_error_median=pl.Float64,
                perm_error_median=pl.Float64,
            )
        ),
        verdicts=[],
    )
    console = Console(record=True, width=200)
    print_symmetry(result, console, 0.05)
    lines = console.export_text().splitlines()
    row = {name: next(line for line in lines if name in line) for name in ("inner-product", "mlp")}
    assert "≤ 4" in row["inner-product"] and "> 32" in row["mlp"]
    assert "> max" not in row["mlp"]


def test_s2_writes_a_bound_as_the_page_does():
    m_star = _symmetry_m_star()
    trials = pl.DataFrame(
        schema=dict(
            teacher=pl.String,
            model=pl.String,
            equivariance=pl.String,
            status=pl.String,
            m=pl.Int64,
            seed=pl.Int64,
            test_error=pl.Float64,
            eq_error_median=pl.Float64,
            eq_error_max=pl.Float64,
            perm_error_median=pl.Float64,
        )
    )
    s2 = verdicts(trials, m_star, n_boot=0)[1]
    assert "inner-product ≤ 4 vs mlp > 32" in s2["statistic"]


def test_run_times_show_utc_to_the_minute():
    start = dt.datetime(2026, 12, 1, 9, 46, 53, 123456, tzinfo=dt.UTC)
    end = dt.datetime(2026, 12, 1, 11, 5, 2, 999, tzinfo=dt.timezone(dt.timedelta(hours=1)))  # 10:05 UTC
    view = _run_view(
        ReportRun("r1", "quick", dict(started_at=start, ended_at=end, status="finished"), "sparse_boolean")
    )
    assert (view["started"], view["ended"]) == ("2026-12-01 09:46 UTC", "2026-12-01 10:05 UTC")
    running = _run_view(
        ReportRun("r2", "quick", dict(started_at=start.replace(tzinfo=None), ended_at=None), "symmetry")
    )
    assert (running["started"], running["ended"]) == ("2026-12-01 09:46 UTC", "-")
    page = _page(None, [], runs=[view])
    assert "2026-12-01 09:46 UTC / 2026-12-01 10:05 UTC" in page
    assert "+00:00" not in page and "53.123456" not in page


def test_print_analysis_writes_bounds_as_the_page_does():
    from attnsweep.analysis.boolean import Analysis
    from attnsweep.presentation.terminal import print_analysis

    m_star = _boolean_m_star()
    console = Console(record=True, width=200)
    print_analysis(
        Analysis("sw", "run", m_star.with_columns(series=pl.lit("transformer")), varying=["T"]),
        console,
    )
    lines = console.export_text().splitlines()
    row = {T: next(ln for ln in lines if re.match(rf"│\s+{T} │", ln)) for T in (8, 16, 32)}
    assert "≤ 8" in row[8] and "> 1024" in row[32] and "8.0≤" not in row[8] and "> max" not in row[32]


def test_one_formatter_writes_every_bound():
    from attnsweep.stats.critical import format_m_star

    assert format_m_star(8.0, "upper") == "≤ 8"
    assert format_m_star(1024.0, "lower") == "> 1024"
    assert format_m_star(45.25, "upper") == "≤ 45.2"  # a budget-limited estimate: a bound, 3 digits
    assert format_m_star(float("nan"), "none") == "unknown"
    assert format_m_star(37.26, "exact") == "37.3" and format_m_star(37.26, "exact", digits=0) == "37"
    assert format_m_star(float("nan"), "exact") == "-" and format_m_star(None, None) == "-"


def test_no_paper_claim_tested_draws_no_empty_verdict_table():
    own = [
        dict(
            claim="mine-1: m* grows like log T",
            verdict="inconclusive",
            statistic="-",
            interval="-",
            why="w",
            not_judged_text="",
        )
    ]
    page = _template().render(
        caveats=[],
        title="t",
        generated="g",
        source="the results store",
        runs=[],
        own=own,
        verdicts=[],
        untested="Not tested here: L1 (needs T).",
        r_plot="",
        boolean_table=None,
        symmetry_tables=[],
        scale=[],
        reference="ref.csv",
        margin=(0.8, 1.25),
    )
    assert page.count('<table class="verdicts') == 1 and "mine-1:" in page
    assert "Not tested here: L1 (needs T)." in page
