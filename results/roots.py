"""Where a store can live and how its folders are listed: a local folder, or any URI fsspec
understands through ``universal_pathlib``, listed one level at a time under a literal root.

The root is a local folder or any URI fsspec understands (``s3://bucket/store``,
``gs://...``, ``file:///abs/path``, ``memory://`` in tests). Local roots (``file://``
included) are read by polars directly; remote ones through a pyarrow dataset over the fsspec
filesystem. On object stores a file is written in one PUT, which readers also see whole or
not at all; credentials come from the environment or the machine's role as fsspec and pyarrow
find them, never from the store URI in specs or logs.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
from pathlib import Path

from attnsweep.results.errors import StoreError

STORE_SCHEMES = (
    "file",
    "memory",
    "s3",
    "s3a",
    "gs",
    "gcs",
    "az",
    "abfs",
    "abfss",
    "adl",
    "hdfs",
    "webhdfs",
    "sftp",
    "ssh",
    "ftp",
    "smb",
    "oci",
    "oss",
)
"""URI schemes a store can have: fsspec's file systems and object stores, which list folders
(each needs its fsspec package, e.g. s3fs for ``s3://``). Others that fsspec knows cannot hold
a store: ``data://`` (one value in the URI), ``http(s)://`` (no listing), archives, caches."""


def store_root(root: str | os.PathLike) -> tuple[Path, bool]:
    """``(path, local)``: a local ``Path`` for folders and ``file://`` URIs, a ``UPath``
    (fsspec) for other URIs.

    Raises:
        StoreError: a URI whose scheme cannot hold a store (not in :data:`STORE_SCHEMES`),
            naming the schemes a store can have; no fsspec backend for the URI's scheme (e.g.
            s3fs not installed).
    """
    text = os.fspath(root)
    if "://" not in text:
        return Path(text), True
    scheme = text.split("://", 1)[0]
    if scheme.lower() not in STORE_SCHEMES:
        import fsspec

        known = any(part in fsspec.available_protocols() for part in re.split("::|:", scheme.lower()))
        unknown = "" if known else " (no filesystem for this URI)"  # a typo, or a backend's name it lacks
        raise StoreError(
            f"--store {text!r}: a store cannot live at a {scheme}:// URI{unknown}; give a folder or a "
            f"URI of a file system or object store: {', '.join(f'{s}://' for s in STORE_SCHEMES)}"
        )
    from upath import UPath

    try:
        path = UPath(text)
    except (ValueError, ImportError) as exc:
        raise StoreError(
            f"store {text!r}: no filesystem for this URI ({exc}); install its fsspec backend (s3fs, gcsfs, adlfs...)"
        ) from exc
    if path.protocol in ("file", "local"):
        return Path(path.path), True
    return path, False


_IGNORED = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP, errno.EACCES, errno.EPERM)
_IGNORED_TYPES = (FileNotFoundError, NotADirectoryError, PermissionError)  # fsspec's carry no errno


def listing(base: Path, pattern: str) -> list[Path]:
    """The paths under ``base`` whose names match ``pattern`` (``/``-separated parts, each an
    ``fnmatch`` pattern matched against one level's names), with ``base`` itself taken
    literally: a store at ``results [v2]`` or ``st*`` lists its own files, never those of a
    folder its name matches as a pattern (fsspec's glob, which a remote ``Path.glob`` calls,
    would expand the whole path). Folders that vanish or cannot be searched are skipped, as
    ``Path.glob`` skips them; an object store client's own errors propagate."""
    level = [base]
    for part in pattern.split("/"):
        found = []
        for folder in level:
            try:
                entries = list(folder.iterdir())
            except OSError as exc:
                if isinstance(exc, _IGNORED_TYPES) or exc.errno in _IGNORED:
                    continue
                raise
            found += [p for p in entries if fnmatch.fnmatchcase(p.name, part)]
        level = found
    return level


def listing_tree(base: Path) -> list[Path]:
    """Every path below ``base`` (``base`` taken literally, as in :func:`listing`), without
    entering linked folders."""
    out, folders = [], [base]
    while folders:
        folder = folders.pop()
        try:
            entries = list(folder.iterdir())
        except OSError as exc:
            if isinstance(exc, _IGNORED_TYPES) or exc.errno in _IGNORED:
                continue
            raise
        out += entries
        folders += [p for p in entries if not p.is_symlink() and p.is_dir()]
    return out


def client_error(exc: Exception) -> OSError:
    """An object store client's own error as the ``OSError`` a local file system raises (botocore
    raises ``EndpointConnectionError``, no ``OSError``, when the server is out of reach), so that
    what copes with a refused write or listing of a local store copes with it too."""
    return OSError(f"{type(exc).__name__}: {exc}")
