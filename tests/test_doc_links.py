"""Every relative link in README.md and docs/ resolves to a file or folder of the checkout (and
to a heading, where it names one), and the README stays short enough to read in minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(\s*(?:<([^<>]+)>|([^)\s]+))(?:\s+\"[^\"]*\")?\s*\)")
"""Markdown inline links and images: ``[text](target)``, ``![alt](<target>)``."""


def _targets(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code blocks hold examples
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in _links(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def _links(text: str) -> list[str]:
    return [bracketed or bare for bracketed, bare in LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = [t for t in _targets(page) if not (page.parent / t.split("#")[0]).exists()]
    assert broken == [], f"{page.relative_to(ROOT)} links to what does not exist: {broken}"


def test_the_link_pattern_reads_both_link_forms():
    assert _links("see [a](docs/a.md#x) and ![f](<my dir/f.png>) and [w](https://x.org)") == [
        "docs/a.md#x",
        "my dir/f.png",
        "https://x.org",
    ]


README_LINES = 250
"""The README's most lines: a newcomer reads it top to bottom; the rest lives in docs/."""
TABLE_LINES = 10
"""The generated verdict table's most lines (presentation/verdict_table.py)."""


def _slugs(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them: lower case, punctuation but
    ``-`` and ``_`` dropped, spaces as ``-``."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_to_a_heading_finds_it(page):
    missing = []
    for target in _targets(page):
        path, _, anchor = target.partition("#")
        file = page.parent / path if path else page
        if anchor and file.suffix == ".md" and file.is_file() and anchor not in _slugs(file):
            missing.append(target)
    assert missing == [], f"{page.relative_to(ROOT)} links to headings that do not exist: {missing}"


def test_the_readme_is_short_and_its_verdict_table_shorter():
    from attnsweep.presentation.readme_sections import read_section

    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    table = [line for line in read_section(ROOT / "README.md").splitlines() if line.startswith("|")]
    assert 3 <= len(table) <= TABLE_LINES, table
