"""The CLI's ``query`` command: one read-only SQL query over the store, streamed to stdout or a
file in the format asked for (presentation/query_output.py writes the formats)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from glob import escape as glob_escape
from pathlib import Path
from typing import Annotated, BinaryIO, Literal, cast

import typer

from attnsweep import cli_options
from attnsweep.cli_options import (
    DEFAULT_STORE,
    StoreOpt,
    err,
    out,
    sigterm_as_interrupt,
    user_errors,
)
from attnsweep.orchestrator.errors import AttnsweepError
from attnsweep.presentation.console_text import is_terminal, visible


def _query_output(output: str):
    """``query --output`` as presentation.query_output.resolve_output decides it, and first a
    path that names a folder by its form refused: one ending in '/' (or '/.'), which a Path
    would read as the file without it, where that is not a folder (a folder is refused there)."""
    from attnsweep.presentation.query_output import resolve_output

    if not output:
        raise AttnsweepError("--output: an empty path; give a file")
    path = Path(output)
    tail = "/" if output.endswith("/") else "/." if os.path.basename(output.rstrip("/")) == "." else None
    if tail is not None and not path.is_dir():
        raise AttnsweepError(
            f"--output: {output} names a folder (it ends in '{tail}'), and {path} is not one; give "
            f"the path of a file, without the '{tail}'; nothing was written"
        )
    return resolve_output(path)


@user_errors
def query(
    sql: Annotated[
        str | None,
        typer.Argument(
            metavar="SQL",
            help="one SELECT over the tables 'trials', 'runs' and 'curves' (DuckDB SQL); '-' reads it from stdin",
        ),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", metavar="FILE", help="read the SQL from this file"),
    ] = None,
    schema: Annotated[
        bool,
        typer.Option("--schema", metavar="", help="list the tables and their columns, then exit"),
    ] = False,
    format: Annotated[
        Literal["table", "csv", "json", "parquet"],
        typer.Option("--format", metavar="table|csv|json|parquet", help="output format"),
    ] = "table",
    output: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help=(  # a string: Path would drop a trailing '/'
                "write to this file instead of stdout (a file is replaced whole when the query succeeds; a "
                "device or FIFO is written through; a folder, block device or socket, a path ending in '/' and "
                "a path inside the store are refused)"
            ),
        ),
    ] = None,
    memory_limit: Annotated[
        str,
        typer.Option(
            "--memory-limit",
            envvar="ATTNSWEEP_QUERY_MEMORY",
            metavar="SIZE",
            help="DuckDB's memory for the query, e.g. 2GB, 512MiB or 25% (of this machine's); beyond it, it spills "
            "to a temporary folder; the result's batches count too",
        ),
    ] = "25%",
    spill_limit: Annotated[
        str | None,
        typer.Option(
            "--spill-limit",
            envvar="ATTNSWEEP_QUERY_SPILL",
            metavar="SIZE",
            help="the most the query may spill to its temporary folder (under TMPDIR), e.g. 20GB or 50% (of the space "
            "free there); default half the space free there. The folder is removed however the query ends",
        ),
    ] = None,
) -> None:
    """Run a read-only SQL query over the store (DuckDB SQL; the engine has no file access).

    The table format shows at most 200 rows; csv, json and parquet stream every row. The SQL
    is at most 1,000,000 bytes.
    """
    if (
        cli_options.owns_process
        and os.environ.get(CHILD_ENV) is None
        and not schema
        and hasattr(signal, "sigtimedwait")
    ):
        # The query runs in a child whose address space is capped: a value DuckDB or a writer
        # makes past the cap fails there, or ends that process, never this one. (Without
        # sigtimedwait, macOS, it runs here, capped where /proc tells what it maps.)
        raise typer.Exit(_run_in_child(memory_limit, output))
    from attnsweep.api_runs import check_paths, existing_store
    from attnsweep.presentation.query_output import read_sql, read_sql_file
    from attnsweep.results.query_limits import check_memory_limit, check_spill_limit
    from attnsweep.results.query_tables import table_schemas

    limit = check_memory_limit(memory_limit)  # every argument is checked before the store is read
    spill_bytes = check_spill_limit(spill_limit)
    target = _query_output(output) if output is not None and not schema else None
    check_paths(store, None)
    results = existing_store(store)
    if target is not None and results.holds(target.path):
        raise AttnsweepError(
            f"--output: {output} is inside the results store at {store}; a file written there would "
            "be read back as part of the store or replace a run's files. Give a path outside it; "
            "nothing was written"
        )
    if sys.stdout is None and (target is None or schema):
        raise AttnsweepError(
            "query: stdout is closed; give --output FILE" if not schema else "query --schema: stdout is closed"
        )
    if format == "parquet" and target is None and not schema and is_terminal(sys.stdout):
        # Binary: a value's bytes would reach the terminal as they are (escape sequences too).
        raise AttnsweepError(
            "query --format parquet: stdout is a terminal; give --output FILE or redirect stdout to a file"
        )
    if schema:
        tables = table_schemas(results)
        if not tables:
            raise AttnsweepError(f"the store at {store} is empty: run a sweep first")
        for name, columns in tables.items():
            out.print(f"{name} ({len(columns)} columns)", markup=False, highlight=False)
            for f in columns:
                out.print(visible(f"  {f.name}: {f.type}"), markup=False, highlight=False)
        return
    given = [x for x in (sql, file) if x is not None]
    if len(given) != 1:
        raise AttnsweepError("query: give the SQL as an argument, '-' for stdin, or --file FILE (one of them)")
    if file is not None:
        sql = read_sql_file(file)
    elif sql == "-":
        if sys.stdin is None:
            raise AttnsweepError("query -: stdin is closed; give the SQL as an argument or with --file FILE")
        sql = read_sql(sys.stdin.buffer, "stdin")
    if cli_options.owns_process:  # the whole process, not only DuckDB, stays within the limit
        _bound_this_process(limit, spill_bytes, format)
    try:
        with sigterm_as_interrupt():  # SIGTERM (timeout, cron, systemd) cleans up as Ctrl-C does
            _query_to(results, sql, limit, spill_bytes, format, target, output)
    except MemoryError:  # a value or a batch larger than the process may hold (pyarrow's too)
        raise AttnsweepError(
            f"query ran out of memory under --memory-limit {memory_limit} (ATTNSWEEP_QUERY_MEMORY): a value or a "
            "row it made does not fit; give it more memory or select less (a part of a long value, fewer columns)"
            + (f"; {output} is as it was" if target is not None and not target.through else "")
        ) from None
    except KeyboardInterrupt:
        err.print(
            "interrupted" + (f": {output} is as it was" if target is not None and not target.through else ""),
            style="yellow",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(130) from None
    except BrokenPipeError:  # stdout's reader stopped reading (| head): end quietly, as a pipe's writer does
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        raise typer.Exit(141) from None


CHILD_ENV = "ATTNSWEEP_QUERY_CHILD"
"""Set in the environment of the process :func:`_run_in_child` starts: that one runs the query."""

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_SI_KERNEL = 0x80  # siginfo's si_code of a signal the kernel sent (a terminal's Ctrl-C); a kill() has <= 0


def _run_in_child(memory_limit: str, output: str | None) -> int:
    """Run this same command line in a child process (:data:`CHILD_ENV` set) and return the
    status to end with: the child's own, 130 where Ctrl-C or SIGTERM ended it before Python
    could, and 2 (one line on stderr) where anything else killed it, such as an allocation past
    its address-space cap that a native library answers by aborting, or the kernel's OOM killer.

    The child shares stdin, stdout, stderr and every descriptor the caller passed (``--output
    /dev/fd/3``), and this process's group, so a terminal's Ctrl-C reaches it directly; a
    SIGINT, SIGTERM or SIGHUP sent to this process alone (``kill``, ``timeout``) is passed on.
    If this process is killed (SIGKILL), the kernel sends the child SIGTERM: it stops and
    cleans up as on Ctrl-C.
    """
    import subprocess

    from attnsweep.results.query_limits import remove_stale_spill

    waited = {*_FORWARDED, signal.SIGCHLD}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)  # taken by sigtimedwait below, with who sent them
    env = {**os.environ, CHILD_ENV: "1"}
    # The cap counts mapped address space: allocators that map a reserve up front hide what they
    # later fill in it (mimalloc, Arrow's default pool: 1 GiB at once; glibc: 64 MiB an arena, 8
    # arenas a core). Arrow gets the system allocator and glibc 2 arenas (query_limits.py).
    env["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    env.setdefault("MALLOC_ARENA_MAX", "2")

    def in_child() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    partials = _partials(output)
    try:
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "attnsweep.cli", *sys.argv[1:]],
                env=env,
                close_fds=False,  # only the descriptors the caller passed are inheritable
                preexec_fn=in_child,  # noqa: PLW1509 - this process runs no other thread here
            )
        except OSError as exc:
            raise AttnsweepError(f"query: cannot start its process ({sys.executable}): {exc.strerror or exc}") from None
        while child.poll() is None:
            info = signal.sigtimedwait(waited, 1.0)
            if info is not None and info.si_signo != signal.SIGCHLD and info.si_code != _SI_KERNEL:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(info.si_signo)
        while signal.sigtimedwait(waited, 0) is not None:  # nothing left to act once unblocked
            pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    code = child.returncode
    if code >= 0:
        return code
    # Killed before it could clean up: its spill folder (its pid is gone now) and partial output go.
    remove_stale_spill()
    for path in _partials(output) - partials:
        with contextlib.suppress(OSError):
            path.unlink()
    if -code in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        err.print("interrupted", style="yellow", markup=False, highlight=False)
        return 130
    if -code == signal.SIGPIPE:
        return 141
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = (
        # A SIGKILL comes from outside the process (a kill -9, the kernel's OOM killer): the cap
        # makes an allocation fail, which a native library answers by aborting.
        "from outside (a kill -9, or the kernel's OOM killer when the machine ran out of memory); run it again"
        if -code == signal.SIGKILL
        else f"most likely a value or row it made does not fit --memory-limit {memory_limit} "
        "(ATTNSWEEP_QUERY_MEMORY) and the memory cap of its process; give it more memory or select less "
        "(a part of a long value, fewer columns)"
    )
    err.print(
        f"error: query's process was killed by {name}: {why}"
        + (f"; {output} is as it was" if output is not None else ""),
        style="red",
        markup=False,
        highlight=False,
    )
    return 2


def _partials(output: str | None) -> set[Path]:
    """The temporary files a query writing ``output`` would leave beside it (presentation/
    query_output.py ``_aside``: ``.NAME.XXXXXXXX.partial``)."""
    if output is None:
        return set()
    target = Path(output)
    with contextlib.suppress(OSError):
        return set(target.parent.glob(f".{glob_escape(target.name[:200])}.*.partial"))
    return set()


def _bound_this_process(limit: str, spill_bytes: int, format: str) -> None:
    """Load and warm up what the query uses (DuckDB, Arrow, polars and the format's writer, on
    a one-row statement), then cap this process's address space at what it maps now plus the
    limit and a headroom (results/query_limits.py :func:`bound_address_space`)."""
    import io

    from attnsweep.presentation.query_output import converter, table_text, write_batches
    from attnsweep.results.query import warm_up
    from attnsweep.results.query_columns import hugeint_as_text
    from attnsweep.results.query_limits import bound_address_space, memory_bytes

    table = warm_up(limit, hugeint_as_text(converter(format)), spill_bytes)
    if format == "table":
        table_text(table.schema, iter(table.to_batches()), terminal=False)
    else:
        write_batches(table.schema, iter(table.to_batches()), format, io.BytesIO())
    del table
    bound_address_space(memory_bytes(limit))


def _query_to(results, sql: str, limit: str, spill_bytes: int, format: str, target, output: str | None) -> None:
    from contextlib import nullcontext

    from attnsweep.presentation.query_output import (
        EscapedStream,
        converter,
        open_output,
        table_text,
        write_batches,
    )
    from attnsweep.results import stream_query
    from attnsweep.results.query_columns import hugeint_as_text

    schema_, batches = stream_query(
        results,
        sql,
        memory_limit=limit,
        convert=hugeint_as_text(converter(format)),
        spill_bytes=spill_bytes,
    )
    with batches:  # the connection and its spill folder go whatever happens below
        sink = open_output(target) if target is not None else nullcontext(sys.stdout.buffer)
        if format == "table":
            # On a terminal polars fits the table to it; a file or a pipe gets every column, every character.
            terminal = output is None and sys.stdout.isatty()
            text = table_text(schema_, batches, terminal=terminal)
            with sink as fh:
                fh.write((text + "\n").encode())
        else:
            with sink as fh:
                # Data for scripts, written whole to a file or a pipe; a person reads a terminal,
                # where a value's escape sequence would act: there it is written out (one rule).
                escaped = target is None and is_terminal(sys.stdout)
                write_batches(schema_, batches, format, cast(BinaryIO, EscapedStream(fh)) if escaped else fh)
        if target is None:
            sys.stdout.buffer.flush()
