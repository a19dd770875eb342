"""Files the reports and figures write: whole files put in place in one step.

A report's folder is the user's: it may hold a link where the report writes one of its own
file names (``report.html -> /etc/passwd``, ``trials.parquet -> a store part file``). Writing
through that link would change a file nobody asked the report to touch, so each output is
written to a temporary name beside it and renamed over the name: a link there is replaced by
the new file, its target left alone, and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on a clean exit it is renamed over
    ``path`` (a link at ``path`` is replaced, not followed), on an error it is removed.

    The temporary name keeps ``path``'s suffix, so writers that choose a format by suffix
    (matplotlib's ``savefig``) write the same format.

    Raises:
        OSError: the folder cannot be written, or ``path`` is a folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.stem}.writing-{os.getpid()}{path.suffix}")
    try:
        yield temp
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def write_text(path: Path | str, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` as :func:`replacing` does; returns ``path``."""
    with replacing(path) as temp:
        temp.write_text(text, encoding=encoding)
    return Path(path)


def linked_folders(root: Path | str, folders: list[Path]) -> list[Path]:
    """The folders among ``folders`` (paths under ``root``) that are links or lie, once
    resolved, outside ``root``: a report refuses to write through them, since its files
    would land wherever the link points."""
    base = Path(root).resolve()
    out = []
    for folder in folders:
        if folder.is_symlink() or (folder.exists() and base not in (folder.resolve(), *folder.resolve().parents)):
            out.append(folder)
    return out
