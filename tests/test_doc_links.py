"""Every relative link in README.md and docs/ resolves to a file or folder of the checkout."""

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
    assert _links("see [a](docs/a.md#x) and ![f](<my dir/f.png>) and [w](https://x.org)") == \
        ["docs/a.md#x", "my dir/f.png", "https://x.org"]
