"""Progress where it is read: with stderr a file, a sweep writes plain progress lines (no
control characters, never wrapped), its result tables print at full width, and the
embedded Ray keeps its token notice to itself."""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from progress_lines import parse_progress_line

from attnsweep.cli_options import DEFAULT_PROGRESS_INTERVAL
from attnsweep.orchestrator.progress import PROGRESS_INTERVAL_S, progress_line

ROOT = Path(__file__).resolve().parents[1]
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # every control character but the newline


def test_a_line_reads_back_with_its_rate_and_eta():
    line = progress_line(
        "quickstart 20261201-120000-abcdef",
        300,
        1200,
        Counter(done=280, failed=15, diverged=4, lost=1),
        60.0,
    )
    fields = parse_progress_line(line)
    assert fields == dict(
        label="quickstart 20261201-120000-abcdef",
        finished=300,
        total=1200,
        done=280,
        failed=15,
        diverged=4,
        lost=1,
        rate=5.0,
        elapsed="0:01:00",
        eta="0:03:00",
    )  # 900 left at 5/s
    assert "(25.0%)" in line and not CONTROL.search(line)


def test_without_a_total_or_a_finished_trial_there_is_no_eta():
    fields = parse_progress_line(progress_line("s r: adaptive search", 0, None, Counter(), 12.0))
    assert (fields["finished"], fields["total"], fields["rate"], fields["eta"]) == (
        0,
        None,
        0.0,
        "-",
    )
    with pytest.raises(ValueError, match="not a progress line"):
        parse_progress_line("run 20261201 of sweep x: done 3")


def test_the_cli_default_is_the_progress_default():
    assert DEFAULT_PROGRESS_INTERVAL == PROGRESS_INTERVAL_S


@pytest.mark.slow
def test_a_sweep_logged_to_files_shows_progress_lines_then_full_tables(tmp_path):
    err, out = tmp_path / "err.log", tmp_path / "out.log"
    with err.open("w") as e, out.open("w") as o:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "attnsweep.cli",
                "run",
                str(ROOT / "tests/specs/symtiny.yaml"),
                "--store",
                str(tmp_path / "store"),
                "--figures",
                str(tmp_path / "figures"),
                "--progress-interval",
                "1",
            ],
            stdout=o,
            stderr=e,
            cwd=tmp_path,
            timeout=900,
            env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
        )
    log = err.read_text()
    assert proc.returncode == 0, log[-3000:]
    assert not CONTROL.search(log) and not CONTROL.search(out.read_text())
    lines = log.splitlines()
    summary = next(i for i, ln in enumerate(lines) if re.match(r"run \S+ of sweep symtiny: ", ln))
    progress = [parse_progress_line(ln) for ln in lines[:summary] if ln.startswith("progress: ")]
    assert len(progress) >= 2
    last = progress[-1]
    assert last["finished"] == last["total"] == 24  # the spec's 2 teachers x 2 m x 3 students x 2 seeds
    assert last["done"] + last["failed"] + last["diverged"] + last["lost"] == 24
    assert [p["finished"] for p in progress] == sorted(p["finished"] for p in progress)
    assert "workers idle" in lines[summary]  # the summary is one line, not wrapped at 80 columns
    assert "Token authentication" not in log
    tables = out.read_text()
    verdict_lines = [ln for ln in tables.splitlines() if ln[:3] in ("S1:", "S2:", "S3:", "S4:")]
    assert len(verdict_lines) == 4 and min(map(len, verdict_lines)) > 80  # each one line, not wrapped at 80
    assert any(ln.startswith("┃") for ln in tables.splitlines()) and "…" not in tables  # tables, none clipped


def test_a_file_or_jupyter_without_ipywidgets_gets_plain_lines(tmp_path, monkeypatch):
    import importlib.util
    import io
    import time

    from rich.console import Console

    from attnsweep.orchestrator.progress import SweepProgress

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ipywidgets" else real(name, *a),
    )
    for console in (Console(file=io.StringIO()), Console(file=io.StringIO(), force_jupyter=True)):
        printed = []  # in Jupyter rich displays its output instead of writing the file
        monkeypatch.setattr(console, "print", lambda text, *, into=printed, **kw: into.append(text))
        with SweepProgress(console, 4, "sw run", interval_s=0.05) as progress:
            progress.advance(3, Counter(done=2, failed=1))
            time.sleep(0.3)
        lines = [parse_progress_line(text) for text in printed]
        assert len(lines) >= 2 and (
            lines[-1]["finished"],
            lines[-1]["done"],
            lines[-1]["failed"],
        ) == (3, 2, 1)


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--progress-interval", "0"], {}),
        (["--progress-interval", "soon"], {}),
        ([], {"ATTNSWEEP_PROGRESS_INTERVAL": "-3"}),
    ],
)
def test_a_progress_interval_that_is_not_a_sane_number_is_one_error(tmp_path, args, env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "run",
            str(ROOT / "tests/specs/symtiny.yaml"),
            "--store",
            str(tmp_path / "store"),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, **env},
    )
    assert proc.returncode == 2 and "progress-interval" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "store").exists()  # refused before anything started


@pytest.mark.slow
def test_the_live_bar_shows_the_rate_and_eta_the_summary_uses():
    import io
    import time

    from rich.console import Console

    from attnsweep.orchestrator.progress import SweepProgress, _EtaColumn, _RateColumn

    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with SweepProgress(console, 100, "live", interval_s=60) as bar:
        bar.advance(5, Counter(done=5))
        time.sleep(0.5)
        bar.advance(5, Counter(done=5))
        time.sleep(1.5)
        task = bar._progress.tasks[0]
        shown = _RateColumn().render(task).plain
        eta = _EtaColumn().render(task).plain
        line = parse_progress_line(bar.line())
    # finished / elapsed, as the plain line and the summary: about 10 / 2 s, not rich's windowed 5 / 0.5 s
    assert shown == f"{line['rate']:.1f} trials/s" and 4.0 <= line["rate"] <= 5.1, (shown, line)
    assert task.speed is not None and abs(task.speed - line["rate"]) > 2  # the window would have disagreed
    h, m, s = map(int, eta.split(":"))
    assert abs(h * 3600 + m * 60 + s - 90 / line["rate"]) <= 2
