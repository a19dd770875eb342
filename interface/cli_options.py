"""The CLI's shared parts: the consoles, the options several commands take, and the wrapper
that turns the project's errors into one message and exit code 2."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.console_text import visible

WIDE = 100_000
"""Columns of a console that is not a terminal (a log, a pipe, a file): nothing is wrapped
or clipped, tables print at their natural width. ``COLUMNS`` set in the environment wins."""


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    wide = not (getattr(stream, "isatty", lambda: False)() or "COLUMNS" in os.environ)
    return Console(stderr=stderr, width=WIDE if wide else None)


err = _console(stderr=True)
owns_process = False
"""True when the command runs in a process of its own (the console script, ``python -m``;
cli.py ``entry_point``): a command may then bound the process itself (``query``'s memory)."""
out = _console(stderr=False)

# A string, not a Path: Path("") would silently become the current folder.
StoreOpt = Annotated[
    str,
    typer.Option("--store", envvar="ATTNSWEEP_STORE", metavar="DIR", help="results store directory or URI"),
]
SpecArg = Annotated[Path, typer.Argument(metavar="SPEC", help="sweep spec (YAML)")]
MaxTrialsOpt = Annotated[int, typer.Option(min=1, metavar="N", help="refuse grids above this many trials")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="PATH=VALUE",
        help="override a spec field, e.g. --set grid.T=[16,64,256] --set seeds=8 (VALUE read as YAML; "
        "repeatable); the resolved spec is what runs and is recorded",
    ),
]
DEFAULT_PROGRESS_INTERVAL = 10.0  # orchestrator.progress.PROGRESS_INTERVAL_S, without importing it for --help
DEFAULT_STORE = "results-store"


def _error(message: str) -> None:
    # One line however long: a wrapped message breaks grep and the tests that read it.
    err.print(f"error: {visible(message)}", markup=False, highlight=False, style="red", soft_wrap=True)


def user_errors(fn):
    """Turn the project's errors into a message and exit code 2; first refuse an argument that
    is not UTF-8 text (:func:`not_utf8`), before the command reads or writes anything."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from attnsweep.results import StoreError
        from attnsweep.tasks import TaskError

        refusal = not_utf8(kwargs, _argument_names(fn))
        if refusal is not None:
            _error(refusal)
            raise typer.Exit(2)
        try:
            return fn(*args, **kwargs)
        except (AttnsweepError, StoreError, TaskError) as exc:
            _error(str(exc))
            raise typer.Exit(2) from None
        except OSError as exc:  # an output or figure path that cannot be written
            _error(f"{exc.strerror or exc}: {exc.filename or ''}")
            raise typer.Exit(2) from None
        except ImportError as exc:  # e.g. an s3:// store without s3fs
            _error(f"a package this needs is not installed: {exc}")
            raise typer.Exit(2) from None
        except Exception as exc:  # an object store client's own error (botocore's, the server out of reach)
            if type(exc).__module__.partition(".")[0] not in STORE_CLIENTS:
                raise
            _error(f"the store's server could not be reached or refused: {type(exc).__name__}: {exc}")
            raise typer.Exit(2) from None

    return wrapper


def _argument_names(fn) -> dict[str, str]:
    """The command line's name of each parameter of the command ``fn`` (``--store``, ``SPEC``),
    by its Python name, read from its typer annotations."""
    import typing

    from typer.models import ArgumentInfo, OptionInfo

    names = {}
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: the Python names serve
        return {}
    for key, hint in hints.items():
        for info in getattr(hint, "__metadata__", ()):
            if isinstance(info, OptionInfo):
                decls = [d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str)]
                decls = [d for d in decls if d.startswith("-")]
                names[key] = max(decls, key=len) if decls else "--" + key.replace("_", "-")
            elif isinstance(info, ArgumentInfo):
                names[key] = info.metavar or key.upper()
    return names


def _shown(text: str) -> str:
    """``text`` with what is not UTF-8 as the bytes it stands for (``\\xff``)."""
    try:
        raw = os.fsencode(text)  # the bytes the command line gave (surrogateescape)
    except UnicodeEncodeError:  # a lone surrogate no file system byte made
        return visible(text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace"))
    return visible(raw.decode("utf-8", "backslashreplace"))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


OWN_TEXT_CHECK = frozenset({"sql"})
"""Arguments that are text, not paths, which their command reads and checks itself (``query``'s
SQL: its message names the byte that is not UTF-8 and where it is)."""


def not_utf8(kwargs: dict, names: dict[str, str]) -> str | None:
    """Why a command must not run, in one line, where one of its arguments (``kwargs``, as typer
    gives them: strings, paths, lists of them) is not UTF-8 text, or where one is a relative
    path and the current folder's path is not; None when all are. ``names`` gives each
    argument's name on the command line (``--store``) by its Python name.

    The store records paths as UTF-8 (a run's record, the record of checked files, its
    messages): a path whose bytes are not UTF-8 (``os.fsdecode(b"\\xff")`` is ``"\\udcff"``)
    would end the command in a UnicodeEncodeError partway, after a run's record was written.
    It is refused here, before anything is read or written, naming the argument."""
    relative, stores = False, []
    for key, value in kwargs.items():
        if key in OWN_TEXT_CHECK:
            continue
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if not isinstance(item, (str, os.PathLike)):
                continue
            text = os.fspath(item)
            if not isinstance(text, str):
                continue
            name = names.get(key, "--" + key.replace("_", "-"))
            if not _utf8(text):
                return (
                    f"{name}: {_shown(text)} is not UTF-8 text; attnsweep keeps paths and names as UTF-8 (the "
                    "store's records and messages): rename it, or give another; nothing was read or written"
                )
            if key == "store" and text and "://" not in text:
                stores.append((name, text))
            if isinstance(item, Path) or key == "store":
                relative = relative or (bool(text) and not os.path.isabs(text) and "://" not in text)
    if relative:
        try:
            here = os.getcwd()
        except OSError:  # the current folder was removed: the command's own checks say so
            return None
        if not _utf8(here):
            return (
                f"the current folder {_shown(here)} is not UTF-8 text, and a relative path given here would "
                "resolve inside it; cd to a folder whose path is UTF-8, or give absolute paths; nothing was "
                "read or written"
            )
    for name, text in stores:
        # The store is read and recorded through its real path: a link to a folder whose path is
        # not UTF-8 ended a run in a traceback after it had trained and written.
        real = os.path.realpath(text)
        if not _utf8(real):
            return (
                f"{name}: {_shown(text)} resolves to {_shown(real)}, which is not UTF-8 text; attnsweep keeps "
                "paths and names as UTF-8 (the store's records and messages): give a store whose real path "
                "is UTF-8; nothing was read or written"
            )
    return None


STORE_CLIENTS = (
    "botocore",
    "aiobotocore",
    "s3fs",
    "gcsfs",
    "adlfs",
    "azure",
)  # not google: protobuf (Ray) lives there
"""Packages whose errors are an object store's refusal, told in one line (exit 2) as an OSError is."""


AddressOpt = Annotated[
    str | None,
    typer.Option(metavar="ADDRESS", help="Ray cluster: auto or HOST:PORT (default: start a local Ray)"),
]
LocalOpt = Annotated[bool, typer.Option("--local", metavar="", help="run packs in this process, without Ray")]
InFlightOpt = Annotated[int | None, typer.Option(min=1, metavar="N", help="packs submitted at once")]
FiguresOpt = Annotated[Path | None, typer.Option(metavar="DIR", help="figure folder (default: figures/SWEEP/RUN_ID)")]
AnalyzeOpt = Annotated[bool, typer.Option(metavar="", help="print the m* table and fits at the end")]
ProgressOpt = Annotated[
    float,
    typer.Option(
        "--progress-interval",
        min=0.1,
        max=86_400,
        metavar="SECONDS",
        envvar="ATTNSWEEP_PROGRESS_INTERVAL",
        help="seconds between progress lines when stderr is not a terminal (a log, a file)",
    ),
]

JobAddressOpt = Annotated[
    str,
    typer.Option(
        "--address",
        envvar="RAY_API_SERVER_ADDRESS",
        metavar="URL",
        help="job server, e.g. http://127.0.0.1:8265",
    ),
]
DEFAULT_JOB_ADDRESS = "http://127.0.0.1:8265"
JobArg = Annotated[str, typer.Argument(metavar="JOB_ID", help="job id from submit")]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout",
        envvar="ATTNSWEEP_TIMEOUT",
        min=0.1,
        max=86_400,
        metavar="SECONDS",
        help="seconds each call to the job server may take",
    ),
]
DEFAULT_TIMEOUT = 30.0  # orchestrator.deadline.TIMEOUT_S, without importing it for --help


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def quoted(path: str) -> str:
    """``path`` as a shell word (a command to copy and paste)."""
    import shlex

    return shlex.quote(path)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (``timeout``, a scheduler) stops the block as Ctrl-C does, so that what it
    writes is cleaned up the same way (from the main thread only)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    stop.interrupts = True  # type: ignore[attr-defined]  # results/query_interrupt.py: DuckDB is interrupted too
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def notice(message: str) -> None:
    """A sweep's name read as its latest run, said on stderr (the ``notify`` of the API)."""
    err.print(visible(message), markup=False, highlight=False, soft_wrap=True)


def run_or_latest(results, name: str | None) -> str | None:
    """``name`` as a run id; a sweep's name means that sweep's latest run, said on stderr.
    A name that is neither is returned as it is, for the command's own message."""
    from attnsweep.api_runs import resolve_run

    return resolve_run(results, name, notice)
