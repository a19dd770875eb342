"""Reading the extension points' names (tasks/plugins.py installed_names): one scan of the
installed packages serves many spec validations, and a package installed later is seen."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import entry_points

from attnsweep.tasks import registry
from attnsweep.workers import BooleanTrialConfig, SymmetryTrialConfig


def test_validating_many_configs_reads_the_installed_packages_once(monkeypatch):
    calls = []

    def counting(group):
        calls.append(group)
        return entry_points(group=group)

    monkeypatch.setattr(registry, "entry_points", counting)
    for seed in range(200):  # a built-in name needs no scan at all
        BooleanTrialConfig(task="and", T=8, s=2, m=16, seed=seed)
        SymmetryTrialConfig(teacher="equivariant", n=3, k=2, d=4, m=8, seed=seed)
    assert calls == []
    for _ in range(200):
        assert registry.task_names()[:2] == ["and", "parity"]
    assert calls == [registry.ENTRY_POINTS]


def test_a_package_installed_after_the_first_scan_is_seen(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    before = registry.task_names()
    assert "late_task" not in before
    assert registry.task_names() == before  # unchanged path: the same answer
    # What pip leaves: a distribution's metadata folder with its entry points.
    info = site / "late_task_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late-task-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [attnsweep.tasks]
            late_task = late_task_pkg:TASK
            """
        )
    )
    assert registry.task_names() == [*before, "late_task"]
    assert str(site) in sys.path
