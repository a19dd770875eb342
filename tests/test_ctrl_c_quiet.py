"""Ctrl-C in a terminal: the run stops with attnsweep's own line only.

The sweep runs under a real pseudo-terminal (the live bar shows) and gets Ctrl-C as a user
types it (the terminal sends SIGINT to the whole foreground process group: the driver and
the embedded Ray's processes). Packs in flight at that moment used to make Ray print
"Task PackWorker.run failed. There are 3 retries remaining..." for each killed actor.
"""

from __future__ import annotations

import os
import pty
import re
import select
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a sweep interrupted in a terminal: about 20 s

SPEC = (
    "name: ctrlc\nseeds: 8\ngrid: {T: [8, 16, 32, 64], m: {start: 8, stop: 512, num: 8, scale: log}}\n"
    "fixed: {task: and, s: 3, d: 32, heads: 4, lr: 3e-3, max_epochs: 1000, n_test: 500}\n"
    "execution: {pack_size: 8}\n"
)


def test_ctrl_c_prints_only_attnsweeps_line(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    pid, fd = pty.fork()
    if pid == 0:  # the child: attnsweep in the terminal, as a user starts it
        os.chdir(tmp_path)
        os.environ.update(COLUMNS="160", RAY_USAGE_STATS_ENABLED="0")
        os.execv(
            sys.executable,
            [
                sys.executable,
                "-m",
                "attnsweep.cli",
                "run",
                "spec.yaml",
                "--store",
                "store",
                "--no-analyze",
            ],
        )
    output, sent, deadline = b"", None, time.time() + 400
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child ended and closed the terminal
                break
            if not data:
                break
            output += data
        # Ctrl-C once trials are finishing, so that packs are in flight.
        if sent is None and re.search(rb"done [1-9]", output):
            os.write(fd, b"\x03")
            sent = len(output)
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    assert sent is not None, output[-2000:]
    assert os.waitstatus_to_exitcode(status) == 130, output[-3000:]
    after = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output[sent:].decode("utf-8", "replace"))
    lines = [line.strip() for line in after.replace("\r", "\n").split("\n") if line.strip()]
    others = [line for line in lines if not line.startswith(("interrupted:", "^C")) and " ctrlc " not in f" {line}"]
    assert others == [], others
    assert any(line.startswith("interrupted: finished trials are saved") for line in lines), lines
    assert "(raylet)" not in after and "retries remaining" not in after
    assert Path(tmp_path / "store").is_dir()
