"""Render an HTML report in headless Chromium and save a PNG screenshot.

    python scripts/screenshot_report.py reports/RUN_ID/report.html report.png [--width 1280] [--height 8000]

Used by tests/test_report.py to check that report.html renders on its own (no network,
no files beside it). Needs ``chromium`` (Debian: ``apt-get install -y chromium``) or
``chromium-browser`` / ``google-chrome`` on the PATH.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The path of the first Chromium-like browser on the PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 8000, timeout_s: float = 120) -> Path:
    """Open ``html`` (a local file) in headless Chromium and write a ``width`` x ``height``
    pixel screenshot to ``png``.

    Raises:
        FileNotFoundError: no Chromium on the PATH, or ``html`` does not exist.
        RuntimeError: Chromium failed or wrote no image (its stderr's end in the message).
    """
    html, png = Path(html).resolve(), Path(png).resolve()
    if not html.is_file():
        raise FileNotFoundError(f"no such report: {html}")
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError(f"none of {', '.join(BROWSERS)} is on the PATH (Debian: apt-get install -y chromium)")
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no state from other runs
        proc = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--screenshot={png}",
                f"--window-size={width},{height}",
                html.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    if proc.returncode != 0 or not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"{browser} exited {proc.returncode} without a screenshot: {proc.stderr[-2000:]}")
    return png


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=8000, help="pixels; raise it if the page is cut off")
    args = parser.parse_args()
    try:
        print(screenshot(args.html, args.png, args.width, args.height))
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
