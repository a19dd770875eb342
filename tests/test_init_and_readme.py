"""``attnsweep init`` and ``report --readme`` against hostile paths, text and disks (issue 48,
item 8): a path holding newlines stays in its comment (before, its lines became the spec's own
keys); a full disk leaves no file and names the one it could not write (before: a short file,
and an error naming none); a form feed or U+2028 beside the README markers loses no byte
outside them (before, ``str.splitlines`` split lines there and the text after one went with
the old section)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnsweep.orchestrator.spec import load_spec
from attnsweep.presentation.readme_sections import END, START

STARTER_KEYS = {"name", "seeds", "grid", "fixed", "analysis"}  # the starter spec's sections (api_specs.STARTER)


def _cli(*args: str, cwd: Path, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        # Under `make coverage` a child process writes its coverage data at exit: past a file size
        # limit that write fails too and adds its own lines, so such a child is not measured.
        env={
            **{k: v for k, v in os.environ.items() if not (preexec_fn and k.startswith("COVERAGE"))},
            "COLUMNS": "200",
        },
        preexec_fn=preexec_fn,
    )


# -- init: a path with newlines -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["x\nexecution: {pack_size: 7}\n#.yaml", "y\rseeds: 9\r#.yaml", "z\x0bw.yaml"])
def test_init_keeps_a_path_with_line_breaks_out_of_the_spec(tmp_path, name):
    done = _cli("init", name, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and "\r" not in done.stdout  # one line on the terminal
    written = tmp_path / name
    assert set(yaml.safe_load(written.read_text())) == STARTER_KEYS
    spec = load_spec(written)
    assert spec.execution.model_fields_set == set() and spec.seeds == [0, 1, 2, 3]
    shown = _cli("validate", "--show", name, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    pack_size = [line for line in shown.stdout.splitlines() if line.strip().startswith("execution.pack_size")]
    assert pack_size and "default" in pack_size[0], pack_size


def test_init_names_a_plain_path_as_a_shell_word(tmp_path):
    done = _cli("init", "my exp.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "`attnsweep validate --show 'my exp.yaml'`" in (tmp_path / "my exp.yaml").read_text()


# -- init: a disk that takes no more ------------------------------------------------------------
def _limit_file_size() -> None:
    # A real write limit, enforced by the kernel: a write past 100 bytes fails with EFBIG
    # (Python ignores SIGXFSZ, so the write returns the error instead of killing the process).
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))


def _refused_and_nothing_left(done: subprocess.CompletedProcess, folder: Path, target: Path, before: list[str]):
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert str(target) in done.stderr and "nothing was written" in done.stderr, done.stderr
    assert not os.path.lexists(target)
    assert sorted(os.listdir(folder)) == before  # no short file, no temporary file


def test_init_past_the_file_size_limit_leaves_no_file_and_names_it(tmp_path):
    target = tmp_path / "sweep.yaml"
    done = _cli("init", str(target), cwd=tmp_path, preexec_fn=_limit_file_size)
    _refused_and_nothing_left(done, tmp_path, target, [])
    assert "File too large" in done.stderr


def test_init_on_a_full_disk_leaves_no_file_and_names_it(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("no right to mount a small file system here (the file size limit test covers the class)")
    try:
        free = os.statvfs(disk)
        (disk / "filler").write_bytes(b"x" * (free.f_bavail * free.f_frsize))  # no page left
        target = disk / "sweep.yaml"
        done = _cli("init", str(target), cwd=tmp_path)
        _refused_and_nothing_left(done, disk, target, ["filler"])
        assert "No space left on device" in done.stderr
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- report --readme: line separators beside the markers ------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from test_guarantees import MINE, make_store

    root = tmp_path_factory.mktemp("readme")
    make_store(root / "store", MINE)
    return root


def _report(root: Path, readme: str, out: str) -> subprocess.CompletedProcess:
    from test_guarantees import MINE

    return _cli("report", MINE, "--store", "store", "--out", out, "--readme", readme, cwd=root)


@pytest.mark.slow
def test_report_keeps_every_byte_outside_the_markers(store):
    before = "# T\nkeep\u2028\x0c\n\u2029intro\x1c\x85\n"
    after = "\x0c\u2028after\nz\u2029y\x0c"
    (store / "AROUND.md").write_text(before + START + "\nold\n" + END + "\n" + after, newline="")
    done = _report(store, "AROUND.md", "out1")
    assert done.returncode == 0, done.stderr[-2000:]
    text = (store / "AROUND.md").read_bytes().decode()
    assert text.startswith(before + START + "\n") and text.endswith(END + "\n" + after), repr(text)
    assert "old" not in text[len(before) :]


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        f"# T\n{START}\u2028hand-written, kept\nold\n{END}\ntail\n",  # text after U+2028 on the start line
        f"# T\n{START}\nold\n{END}\x0cafter, kept\ntail\n",  # a form feed after the end marker
        f"# T\n{START}\nold\nmine\x0c{END}\ntail\n",  # the end marker after a form feed
    ],
)
def test_a_marker_sharing_its_line_is_text_and_the_readme_is_left_as_it_was(store, text):
    readme = store / "SHARED.md"
    readme.write_text(text, newline="")
    done = _report(store, "SHARED.md", "untouched")
    assert done.returncode == 2 and "marker" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert readme.read_bytes() == text.encode() and not (store / "untouched").exists()
