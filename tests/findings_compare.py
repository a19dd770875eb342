"""What "unchanged" means for published findings made on two processors: the test oracle of
tests/test_published_findings.py and tests/test_findings_symmetry.py.

A findings folder (presentation/publish.py) made again from its own rows on another CPU holds
the same trial rows bit for bit (they are copied, not recomputed), but the numbers computed
from them may differ in their last bits: BLAS kernels and the curve fits' iterations differ
between processors (an AMD EPYC and an Intel Xeon gave power-law exponents 1e-9 apart). So two
folders are the same findings when:

* every number in JSON, CSV and Parquet is equal within a relative tolerance
  (:data:`RTOL`, 1e-6) or an absolute one near zero (:data:`ATOL`, 1e-12); counts, flags and
  strings in them are equal exactly, strings compared as text below;
* text (Markdown, HTML, a README section) is equal once its numbers are read as numbers: each
  printed number may differ from the other by :data:`RTOL` relative or by one unit of its last
  printed digit, since a value 1e-9 away can round the other way (0.125 printed with two
  decimals); every other character is equal;
* figures are equal by what they draw: the same size, and pixels whose root-mean-square
  difference is at most :data:`FIGURE_RMS` grey levels (matplotlib's own image comparison);
  figures embedded in HTML as ``data:`` URIs are compared the same way;
* ``SHA256SUMS`` names the same files, and each folder's sums hold for its own files;
* the report's "generated" time is ignored.

A moved m* or a changed verdict still differs: m*, its interval and every fitted number are
stored in m_star.csv and verdicts.json at full precision, far above the tolerance, and a
verdict is a word.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
from pathlib import Path

import polars as pl

RTOL = 1e-6
"""Relative tolerance for computed numbers across processors (last-bit differences are ~1e-15;
iterative fits differ by ~1e-9)."""
ATOL = 1e-12
"""Absolute tolerance for numbers near zero (a fitted intercept of 1e-17 against 0.0)."""
FIGURE_RMS = 0.3
"""Largest root-mean-square pixel difference (0-255 grey levels) between two drawings of the same
figure: anti-aliasing of lines moved by 1e-9 of their span gave 0.00-0.09 between an AMD EPYC and
an Intel Xeon (2026-12-03); a marker moved by a few pixels gives about 1-2."""

GENERATED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,3})?(?!\w)")
_DATA_URI = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")


def numbers_close(a: float, b: float, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Whether two computed numbers are the same within the tolerances (NaN equals NaN; an
    infinity equals only itself)."""
    if isinstance(a, bool) or isinstance(b, bool) or (isinstance(a, int) and isinstance(b, int)):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(atol, rtol * max(abs(a), abs(b)))


def _last_digit(token: str) -> float:
    """One unit of a printed number's last digit: 0.01 for "0.32", 1 for "132", 1e-8 for "3e-8"."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** max(-300, min(300, int(exponent or 0) - decimals))


def text_differences(old: str, new: str, where: str, rtol: float = RTOL) -> list[str]:
    """Where two texts differ other than in the last printed digit of a number.

    Returns:
        One line per difference (at most 5), naming ``where``; empty when the texts agree.
    """
    old, new = GENERATED.sub("<generated>", old), GENERATED.sub("<generated>", new)
    old_parts, new_parts = _NUMBER.split(old), _NUMBER.split(new)
    old_nums, new_nums = _NUMBER.findall(old), _NUMBER.findall(new)
    if old_parts != new_parts or len(old_nums) != len(new_nums):
        return [f"{where}: the text differs {_first_change(old, new)}"]
    out = []
    for a, b in zip(old_nums, new_nums, strict=True):
        x, y = float(a), float(b)
        slack = max(_last_digit(a), _last_digit(b))
        if not (abs(x - y) <= slack * (1 + 1e-9) or numbers_close(x, y, rtol)):
            out.append(f"{where}: the number {a} became {b}")
    return out[:5]


def _first_change(old: str, new: str) -> str:
    # Not strict: the texts may differ in length; past the shorter one's end is a change too.
    i = next((k for k, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    return f"at character {i}: {old[max(0, i - 40) : i + 40]!r} became {new[max(0, i - 40) : i + 40]!r}"


def json_differences(old, new, where: str, rtol: float = RTOL) -> list[str]:
    """Where two JSON values differ beyond the tolerances (numbers) or as text (strings)."""
    if isinstance(old, dict) and isinstance(new, dict):
        if old.keys() != new.keys():
            return [f"{where}: keys {sorted(old.keys() ^ new.keys())} are in one only"]
        return [d for k in old for d in json_differences(old[k], new[k], f"{where}.{k}", rtol)]
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items became {len(new)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for d in json_differences(a, b, f"{where}[{i}]", rtol)
        ]
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return [] if numbers_close(old, new, rtol) else [f"{where}: {old!r} became {new!r}"]
    if isinstance(old, str) and isinstance(new, str):
        return text_differences(old, new, where, rtol)
    return [] if old == new else [f"{where}: {old!r} became {new!r}"]


def frame_differences(old: pl.DataFrame, new: pl.DataFrame, where: str, rtol: float = RTOL) -> list[str]:
    """Where two tables differ: columns, types and row count exactly; float columns within the
    tolerances; every other column exactly (strings as text)."""
    if old.columns != new.columns or old.dtypes != new.dtypes or old.height != new.height:
        return [f"{where}: the table's columns, types or rows differ ({old.shape} became {new.shape})"]
    out = []
    for name in old.columns:
        a, b = old[name], new[name]
        if a.equals(b, check_names=True):
            continue
        if a.dtype.is_float():
            pairs = zip(a.to_list(), b.to_list(), strict=True)
            bad = [
                i
                for i, (x, y) in enumerate(pairs)
                if (x is None) != (y is None) or (x is not None and not numbers_close(x, y, rtol))
            ]
        elif a.dtype == pl.String:
            bad = [
                i
                for i, (x, y) in enumerate(zip(a.to_list(), b.to_list(), strict=True))
                if (x is None) != (y is None) or (x is not None and text_differences(x, y, "", rtol))
            ]
        else:
            bad = [i for i, (x, y) in enumerate(zip(a.to_list(), b.to_list(), strict=True)) if x != y]
        if bad:
            i = bad[0]
            out.append(f"{where}: column {name!r} differs in {len(bad)} rows (row {i}: {a[i]!r} became {b[i]!r})")
    return out


def figure_differences(old: bytes, new: bytes, where: str, rms: float = FIGURE_RMS) -> list[str]:
    """Whether two PNG drawings differ by more than ``rms`` grey levels (root mean square over
    pixels and channels, 0-255), or in size."""
    if old == new:
        return []
    import numpy as np
    from matplotlib import image as mpimg
    from matplotlib.testing.compare import calculate_rms

    a, b = (np.asarray(mpimg.imread(io.BytesIO(data), format="png")) for data in (old, new))
    if a.shape != b.shape:
        return [f"{where}: the figure's size {a.shape} became {b.shape}"]
    a, b = ((x * 255).round().astype(np.int16) if x.dtype.kind == "f" else x.astype(np.int16) for x in (a, b))
    value = calculate_rms(a, b)
    return [] if value <= rms else [f"{where}: the figure's pixels differ by {value:.2f} RMS grey levels (> {rms})"]


def html_differences(old: str, new: str, where: str, rtol: float = RTOL) -> list[str]:
    """:func:`text_differences` on a page whose embedded PNG figures are compared as figures."""
    old_figs, new_figs = _DATA_URI.findall(old), _DATA_URI.findall(new)
    if len(old_figs) != len(new_figs):
        return [f"{where}: {len(old_figs)} embedded figures became {len(new_figs)}"]
    out = [
        d
        for i, (a, b) in enumerate(zip(old_figs, new_figs, strict=True))
        for d in figure_differences(base64.b64decode(a), base64.b64decode(b), f"{where} figure {i + 1}")
    ]
    blank = "data:image/png;base64,<figure>"
    return out + text_differences(_DATA_URI.sub(blank, old), _DATA_URI.sub(blank, new), where, rtol)


def _sums_hold(folder: Path) -> bool:
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        path = folder / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return False
    return True


def file_differences(old: Path, new: Path, where: str, rtol: float = RTOL) -> list[str]:
    """Where one published file differs from another by the rules of this module, chosen by
    its suffix (``.json``, ``.csv``, ``.parquet``, ``.md``, ``.html``, ``.png``; ``SHA256SUMS``;
    any other file byte for byte)."""
    suffix = old.suffix
    if old.name == "SHA256SUMS":
        names = [sorted(line.partition("  ")[2] for line in p.read_text().splitlines()) for p in (old, new)]
        if names[0] != names[1]:
            return [f"{where}: the files it names changed ({names[0]} became {names[1]})"]
        return [] if _sums_hold(new.parent) else [f"{where}: the new folder's checksums do not hold"]
    if suffix == ".json":
        return json_differences(json.loads(old.read_text()), json.loads(new.read_text()), where, rtol)
    if suffix == ".csv":
        return frame_differences(
            pl.read_csv(old, infer_schema_length=None),
            pl.read_csv(new, infer_schema_length=None),
            where,
            rtol,
        )
    if suffix == ".parquet":
        return frame_differences(pl.read_parquet(old, glob=False), pl.read_parquet(new, glob=False), where, rtol)
    if suffix == ".png":
        return figure_differences(old.read_bytes(), new.read_bytes(), where)
    if suffix == ".html":
        return html_differences(old.read_text(), new.read_text(), where, rtol)
    if suffix in (".md", ".txt"):
        return text_differences(old.read_text(), new.read_text(), where, rtol)
    return [] if old.read_bytes() == new.read_bytes() else [f"{where}: the bytes differ"]


def folder_differences(old: Path, new: Path, skip: tuple[str, ...] = (), rtol: float = RTOL) -> list[str]:
    """Where two findings folders differ as findings (the module's rules, file by file).

    Args:
        old, new: the folders.
        skip: names of top-level entries of ``old`` not compared (folders published inside it).

    Returns:
        One line per difference; empty when the folders hold the same findings.
    """

    def files(root: Path) -> list[Path]:
        return sorted(
            p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0] not in skip
        )

    old_files, new_files = files(old), files(new)
    if old_files != new_files:
        return [
            f"the files differ: only in {old}: {sorted(set(old_files) - set(new_files))}; "
            f"only in {new}: {sorted(set(new_files) - set(old_files))}"
        ]
    return [d for name in old_files for d in file_differences(old / name, new / name, str(name), rtol)]
