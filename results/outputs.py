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
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

MAX_TEXT_BYTES = 64 * 2**20
"""The largest text file a command reads whole (a README to update, a spec): 64 MiB."""


@contextlib.contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on a clean exit it is synced to disk and
    renamed over ``path`` (a link at ``path`` is replaced, not followed), on an error it is
    removed. Whatever stops the writer (an error, a full disk, a kill), ``path`` is the old file
    or the new one, never part of either. The new file keeps the permission bits of the file it
    replaces.

    This is the one writer of every file a command writes into a folder it was given (reports,
    published findings, README sections, replication reports, figures).

    The temporary name keeps ``path``'s suffix, so writers that choose a format by suffix
    (matplotlib's ``savefig``) write the same format.

    Raises:
        OSError: the folder cannot be written, or ``path`` is a folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.stem[:100]}.writing-{os.getpid()}-{uuid.uuid4().hex[:8]}{path.suffix[:20]}")
    try:
        yield temp
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(temp, stat.S_IMODE(mode))
        except FileNotFoundError:
            pass
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the data on disk before the name points at it: a crash leaves old or new
        finally:
            os.close(fd)
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def write_text(path: Path | str, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` as :func:`replacing` does; returns ``path``."""
    with replacing(path) as temp:
        # a byte of a file name that is not UTF-8 (a surrogate) is written out as \xNN, not refused
        temp.write_text(text, encoding=encoding, errors="backslashreplace")
    return Path(path)


def read_text_capped(
    path: Path | str,
    what: str,
    limit: int = MAX_TEXT_BYTES,
    encoding: str = "utf-8",
    newline: str | None = None,
) -> str:
    """The text of ``path``, refusing before reading a file larger than ``limit`` bytes (a
    sparse file of 20 GB takes no memory until it is read) or one that is not a regular file.

    Raises:
        ValueError: too large, or not a regular file (the message names ``what`` and why).
        OSError: it cannot be read.
        UnicodeDecodeError: not text in ``encoding``.
    """
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{what}: {path} is not a regular file")
        if st.st_size > limit:
            raise ValueError(
                f"{what}: {path} holds {st.st_size:,} bytes, more than the {limit:,} a command reads whole"
            )
        data = fh.read(limit + 1)
    if len(data) > limit:  # grew while it was read
        raise ValueError(f"{what}: {path} holds more than the {limit:,} bytes a command reads whole")
    text = data.decode(encoding)
    return text if newline == "" else text.replace("\r\n", "\n").replace("\r", "\n")


def check_output_folder(root: Path | str, folders: list[Path | str], option: str) -> None:
    """Refuse, before anything is written, an output folder whose subfolders (``folders``,
    under ``root``) are links or lead out of ``root``: every command that writes files into a
    folder it was given calls this first, and writes each file through :func:`replacing`, so it
    writes only inside that folder (a link at a file's name is replaced, never followed).

    Raises:
        ValueError: naming the option, the link and where it points.
    """
    linked = linked_folders(root, [Path(f) for f in folders])
    if linked:
        raise ValueError(
            f"{option}: {linked[0]} is a link to {linked[0].resolve()}; files are written only inside "
            f"{root}, never through links out of it. Remove the link or give another folder"
        )


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


# --- a folder replaced whole ------------------------------------------------------------------

_BUILDING, _READY, _OLD = ".building-", ".ready-", ".old-"
_RENAME_EXCHANGE = 2


def _aside_name(folder: Path, kind: str) -> Path:
    return folder.with_name(f".{folder.name[:150]}{kind}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _asides(folder: Path, kind: str) -> list[Path]:
    prefix = f".{folder.name[:150]}{kind}"
    try:
        return sorted(p for p in folder.parent.iterdir() if p.name.startswith(prefix))
    except FileNotFoundError:
        return []


def _writer_alive(path: Path, kind: str) -> bool:
    """Whether the process named in an aside folder's name still runs on this machine."""
    try:
        pid = int(path.name.rsplit(kind, 1)[1].split("-", 1)[0])
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (ValueError, IndexError):
        return False
    except OSError:  # EPERM: it exists, another user's
        return True
    return pid != os.getpid()


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def recover_folder(folder: Path | str) -> None:
    """Finish or undo a swap of ``folder`` (:func:`building`) that a kill interrupted, so that
    ``folder`` is the old one or the new one: a new folder that was complete (``.NAME.ready-*``)
    is put in place where the old one had already been moved aside; otherwise the old one
    stays (or is moved back); unfinished new folders of writers that are gone are removed.
    Folders of a writer that still runs are left alone."""
    folder = Path(folder)
    for ready in _asides(folder, _READY):
        if _writer_alive(ready, _READY):
            continue
        if not os.path.lexists(folder):
            os.rename(ready, folder)  # the old one was moved aside: the new one is complete
        else:
            _remove_tree(ready)  # the old one never left: it stays
    for old in _asides(folder, _OLD):
        if _writer_alive(old, _OLD):
            continue
        if not os.path.lexists(folder):
            os.rename(old, folder)
        else:
            _remove_tree(old)
    for stage in _asides(folder, _BUILDING):
        if not _writer_alive(stage, _BUILDING):
            _remove_tree(stage)


def _link_or_copy(src: str, dst: str) -> None:
    import shutil

    try:
        os.link(src, dst)  # every writer replaces files by rename, so the old folder's copy never changes
    except OSError:
        shutil.copy2(src, dst)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where this system or file system cannot."""
    import ctypes
    import errno

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


@contextlib.contextmanager
def building(folder: Path | str) -> Iterator[Path]:
    """A new version of ``folder``, built aside and put in place whole: yields a staging
    folder beside it holding ``folder``'s files (hard links: writers replace files by rename,
    so the old folder is never changed through them); on a clean exit the staging folder
    takes ``folder``'s place in one exchange (``renameat2``; elsewhere through a
    ``.NAME.ready-*`` folder and :func:`recover_folder`) and the old version is removed. On an
    error, Ctrl-C or SIGTERM (as :class:`KeyboardInterrupt`) the staging folder is removed;
    after a SIGKILL the next :func:`recover_folder` of ``folder`` removes it. Readers never see
    a mix of old and new files.

    Raises:
        OSError: the folder's parent cannot be written, or a file cannot be copied.
    """
    import shutil

    folder = Path(folder)
    recover_folder(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage = _aside_name(folder, _BUILDING)
    try:
        if folder.is_dir():
            shutil.copytree(folder, stage, symlinks=True, copy_function=_link_or_copy)
        else:
            stage.mkdir()
        yield stage
        if folder.exists() and _exchange(stage, folder):
            _remove_tree(stage)  # it holds the old version now
            return
        ready = _aside_name(folder, _READY)
        os.rename(stage, ready)
        if folder.exists():
            old = _aside_name(folder, _OLD)
            os.rename(folder, old)
            os.rename(ready, folder)
            _remove_tree(old)
        else:
            os.rename(ready, folder)
    finally:
        if stage.exists():
            _remove_tree(stage)
