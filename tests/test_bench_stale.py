"""bench/stale.py: a BENCHMARKS.md section whose measured code changed after its commit is stale."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_stale", ROOT / "bench" / "stale.py")
stale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stale)


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_a_section_is_current_until_its_code_changes_and_then_stale(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "step.py").write_text("import os, sys\nx = 1\n")
    (repo / "other.py").write_text("y = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "code")
    measured = _git(repo, "rev-parse", "--short=10", "HEAD")
    bench = repo / "BENCHMARKS.md"
    bench.write_text(f"# B\n\n## Step\n<!-- measured: commit={measured} date=2026-12-03 files=step.py -->\n| a |\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "numbers")
    assert stale.problems(bench) == []
    (repo / "other.py").write_text("y = 2\n")  # code the section does not measure
    _git(repo, "commit", "-qam", "other")
    assert stale.problems(bench) == []
    (repo / "step.py").write_text('"""The step."""\n\nimport sys\nimport os\n\n# why x is one\nx = (\n    1\n)\n')
    _git(repo, "commit", "-qam", "a docstring, a comment, another layout")
    assert stale.problems(bench) == []  # the same code: its numbers still hold
    _git(repo, "mv", "step.py", "moved_step.py")  # a move, the marker naming the new path
    bench.write_text(bench.read_text().replace("files=step.py", "files=moved_step.py"))
    _git(repo, "commit", "-qam", "the step moves")
    assert stale.problems(bench) == []
    (repo / "moved_step.py").write_text("import os, sys\nx = 2\n")
    _git(repo, "commit", "-qam", "faster step")
    found = stale.problems(bench)
    assert len(found) == 1 and "'Step'" in found[0] and "faster step" in found[0]


def test_a_section_without_its_marker_or_with_an_unknown_commit_or_file_is_reported(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "c")
    head = _git(repo, "rev-parse", "HEAD")
    bench = repo / "BENCHMARKS.md"
    bench.write_text(
        "## None\ntext\n"
        "## Unknown\n<!-- measured: commit=0123456789 date=2026-12-03 files=a.py -->\n"
        f"## Missing\n<!-- measured: commit={head} date=2026-12-03 files=gone.py -->\n"
    )
    found = stale.problems(bench)
    assert [f.split(":")[0] for f in found] == ["'None'", "'Unknown'", "'Missing'"]


def test_the_committed_benchmarks_name_a_marker_in_every_section():
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert all(len(stale.MARKER.findall(body)) == 1 for _, body in stale.sections(text))


def test_a_gpu_section_not_re_measured_is_carried_visibly_and_only_over_the_change_it_names(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "step.py").write_text("x = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "code")
    measured = _git(repo, "rev-parse", "--short=10", "HEAD")
    (repo / "step.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "a change no GPU measured")
    changed = _git(repo, "rev-parse", "--short=10", "HEAD")
    head = f"# B\n\n## GPU\n<!-- measured: commit={measured} date=2026-12-03 files=step.py -->\n"
    bench = repo / "BENCHMARKS.md"
    bench.write_text(head + "| a |\n")
    assert len(stale.problems(bench)) == 1  # stale without the marker
    bench.write_text(head + f"<!-- not re-measured: commit={changed} device=gpu -->\n| a |\n")
    assert "Not re-measured" in stale.problems(bench)[0]  # the text must say so
    bench.write_text(head + f"<!-- not re-measured: commit={changed} device=cpu -->\nNot re-measured.\n")
    assert "device=gpu" in stale.problems(bench)[0]  # a CPU section can always be re-measured
    bench.write_text(head + f"<!-- not re-measured: commit={changed} device=gpu -->\nNot re-measured since.\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "numbers carried")
    assert stale.problems(bench) == []
    assert stale.carried(bench) == [f"'GPU': not re-measured on a gpu since {changed}"]
    (repo / "step.py").write_text("x = 3\n")
    _git(repo, "commit", "-qam", "another change")
    assert len(stale.problems(bench)) == 1  # a further change makes it stale again
