"""The rows the driver writes for a pack whose worker raised."""

from __future__ import annotations

from attnsweep.orchestrator.driver import _rows
from attnsweep.orchestrator.packing import Pack
from attnsweep.workers import BooleanTrialConfig


def test_a_failed_packs_error_is_stored_without_terminal_colour_codes():
    configs = tuple(BooleanTrialConfig(task="and", T=8, s=2, m=16, seed=i) for i in range(2))
    # What Ray puts in a remote task's exception text for a terminal (its colour prefix).
    exc = RuntimeError("\x1b[36mray::run_pack()\x1b[39m (pid=4242, ip=10.0.0.1)\n  File x.py\x1b[0m\nValueError: bad")
    rows = _rows(Pack(("a", "b"), configs, "sparse_boolean"), exc)
    assert [r["error"] for r in rows] == ["ray::run_pack() (pid=4242, ip=10.0.0.1)\n  File x.py\nValueError: bad"] * 2
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert rows[0]["error_type"] == "RuntimeError"
