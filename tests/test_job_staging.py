"""What `submit` uploads: the project's source (modules, report templates, reference data),
never private files, secrets or what a link points at outside the tree."""

from __future__ import annotations

import os
from pathlib import Path

from project_layout import PACKAGES, folder

from attnsweep.orchestrator.job_staging import SOURCE_SUFFIXES, copy_source, stage_sources


def test_only_source_files_are_copied_and_links_out_of_the_tree_are_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.py").write_text("PASSWORD = 'hunter2'\n")
    (outside / "folder").mkdir()
    (outside / "folder" / "x.py").write_text("leak = 1\n")
    tree = tmp_path / "pkg"
    (tree / "sub").mkdir(parents=True)
    (tree / "templates").mkdir()
    (tree / "__init__.py").write_text("")
    (tree / "sub" / "mod.py").write_text("x = 1\n")
    (tree / "templates" / "page.html.j2").write_text("{{ x }}\n")
    (tree / "ref.csv").write_text("a,b\n")
    for name in (
        ".env",
        "server.pem",
        "id_ed25519",
        "notes.txt",
        "store.parquet",
        "secrets.py",
        ".env.local",
    ):
        (tree / name).write_text("API_KEY=abc\n")
    (tree / ".git").mkdir()
    (tree / ".git" / "hook.py").write_text("")
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "mod.cpython-311.py").write_text("")
    (tree / "linked_out.py").symlink_to(outside / "private.py")
    (tree / "linked_dir").symlink_to(outside / "folder", target_is_directory=True)
    (tree / "linked_in.py").symlink_to(tree / "sub" / "mod.py")
    (tree / "dangling.py").symlink_to(tmp_path / "nothing.py")

    warned: list[str] = []
    copied = copy_source(tree, tmp_path / "staged", warned.append)

    expected = {"__init__.py", "sub/mod.py", "templates/page.html.j2", "ref.csv", "linked_in.py"}
    assert {p.as_posix() for p in copied} == expected
    on_disk = {p.relative_to(tmp_path / "staged").as_posix() for p in (tmp_path / "staged").rglob("*") if p.is_file()}
    assert on_disk == expected
    assert not any(p.is_symlink() for p in (tmp_path / "staged").rglob("*"))
    assert (tmp_path / "staged" / "linked_in.py").read_text() == "x = 1\n"
    assert sorted(Path(w.split(": ", 1)[1]).name for w in warned) == sorted(
        [".env", "server.pem", "id_ed25519", "secrets.py", ".env.local"]
    )


def test_a_staged_job_holds_every_module_and_package_data_file_and_nothing_else(tmp_path):
    top = stage_sources(tmp_path, warn=lambda text: None)
    staged = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
    assert all(Path(p).suffix in SOURCE_SUFFIXES for p in staged)
    # independently: every .py, .j2 and .csv git would ship from the package folders
    # the packages as pyproject.toml lists them (the one list the build uses); data-only ones hold no source
    folders = {
        package.removeprefix("attnsweep.") if package != "attnsweep" else "attnsweep": folder(package)
        for package in PACKAGES
    }
    expected = {
        (f"{name}/" if name != "attnsweep" else "") + p.relative_to(folder).as_posix()
        for name, folder in folders.items()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in {".py", ".pyi", ".j2", ".csv"}
    }
    assert {p.split("/")[0] for p in expected if "/" in p} >= {
        "orchestrator",
        "results",
        "workers",
        "tasks",
    }
    assert staged == expected
    assert any(p.startswith("presentation/templates/") and p.endswith(".j2") for p in staged)
    assert any(p.startswith("stats/data/") and p.endswith(".csv") for p in staged)
    assert os.path.exists(top / "cli.py") and os.path.exists(top / "orchestrator" / "jobs.py")
