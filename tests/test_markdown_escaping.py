"""Strings that come from data never become Markdown: every writer of findings Markdown
escapes them (presentation/markdown.py, md_text and md_code), checked by rendering with a
CommonMark parser (markdown-it-py) rather than by looking for our own escapes."""

from __future__ import annotations

import datetime as dt
import html
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from attnsweep.presentation.findings_boolean import render
from attnsweep.presentation.markdown import md_code, md_text
from attnsweep.presentation.readme_sections import END, START, update_readme

MD = MarkdownIt("commonmark").enable("table")
PIECES = list("ab <>[]()!`*_~#|&\\:/\"'=\n\t-.") + [
    "javascript:",
    "<img src=x onerror=alert(1)>",
    "](http://evil/x.png)",
    "![x](http://evil)",
    START,
    END,
    "&lt;",
    "<!--",
    "-->",
    "\u2028",
    "\x00",
    "\x1b[31m",
    "```",
    "&#60;",
]
HOSTILE = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


def _flat(text: str) -> str:
    """What a reader should see of ``text``: control characters and line breaks as spaces."""
    return "".join(" " if ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" else c for c in text)


@given(HOSTILE)
@settings(max_examples=300, deadline=None)
def test_md_text_renders_as_the_literal_text(text):
    page = MD.render(f"| a |\n|---|\n| x {md_text(text)} y |\n")
    cell = re.search(r"<td>(.*)</td>", page, re.S).group(1)
    assert "<" not in cell  # no tag of any kind came out of the data
    assert html.unescape(cell).split() == f"x {_flat(text)} y".split()  # the same words, whatever the markup


@given(HOSTILE)
@settings(max_examples=300, deadline=None)
def test_md_code_renders_as_one_code_span_of_the_text(text):
    page = MD.render(f"Run {md_code(text)} here\n")
    spans = re.findall(r"<code>(.*?)</code>", page, re.S)
    assert len(spans) == 1 and "<" not in page.replace("<p>", "").replace("</p>", "").replace("<code>", "").replace(
        "</code>", ""
    )
    assert html.unescape(spans[0]) == (_flat(text) or " ")


@given(HOSTILE, HOSTILE)
@settings(max_examples=60, deadline=None)
def test_a_run_record_with_markup_stays_text_and_cannot_forge_the_markers(tmp_path_factory, code_version, status):
    records = [
        dict(
            run_id="20261202-090000-aaaaaa",
            sweep="s",
            n_trials=1,
            n_done=1,
            status=status,
            code_version=code_version,
            started_at=dt.datetime(2026, 12, 2),
            ended_at=None,
        )
    ]
    claims = [
        dict(
            id="L1",
            claim="L1: x",
            verdict="inconclusive",
            statistic=code_version,
            interval=status,
            why=code_version + status,
            not_judged=[{"T": code_version}],
            series=[],
            flags=[],
        )
    ]
    import polars as pl

    text = render(records, claims, pl.DataFrame(), base="docs/findings", caveats=[code_version])
    page = MD.render(text)
    tags = set(re.findall(r"<(\w+)", page))
    assert tags <= {
        "h2",
        "p",
        "a",
        "img",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "code",
        "strong",
        "em",
    }
    # The only links and images are our own, to the findings folder.
    assert all(h.startswith("docs/findings/") for h in re.findall(r'(?:href|src)="([^"]*)"', page))
    readme = tmp_path_factory.mktemp("readme") / "README.md"
    readme.write_text("# x\n")
    for _ in range(2):  # a second write finds exactly the markers the first wrote
        update_readme(readme, text)
    lines = readme.read_text().splitlines()
    assert lines.count(START) == 1 and lines.count(END) == 1
