"""How much a query may take: its memory limit (checked as a user gives it), DuckDB's share of
it, its threads, the bytes of each result batch, and the space DuckDB may spill to disk.

A query connection gets a memory limit of ours (:data:`DEFAULT_MEMORY_LIMIT`, not DuckDB's
80% of the machine) and a spill folder of its own, made for the query under the system's
temporary folder and removed with the connection (never DuckDB's default ``.tmp`` in the
current folder); :func:`remove_stale_spill` removes those of killed queries.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from fractions import Fraction

from attnsweep.results.errors import QueryError

DEFAULT_SPILL_SHARE = 0.5
"""Unless a spill limit is given, DuckDB may spill at most this share of the space free in the
temporary folder when the query starts (DuckDB's own default is 90%: a query could fill it)."""

SPILL_PREFIX = "attnsweep-query-"

DEFAULT_MEMORY_LIMIT = "25%"
"""DuckDB's memory limit for a query unless one is given: a quarter of this machine's memory
as DuckDB reads it (DuckDB's own default is 80%). Beyond it DuckDB spills to its spill folder."""

_MEMORY_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(%|B|[KMGT]i?B)\s*", re.IGNORECASE | re.ASCII)
MEMORY_HELP = (
    "a number with a unit (B, KB, MB, GB, TB for powers of 1000; KiB, MiB, GiB, TiB for powers "
    "of 1024) or a percentage of this machine's memory, e.g. 2GB, 512MiB, 25%"
)
MAX_MEMORY_BYTES = 10**18
"""The largest memory limit a query takes: 1,000,000 TB (DuckDB refuses sizes from 2^64 bytes,
about 18,447,000 TB, with a parser error, and reads 2^64 - 1 as no limit at all)."""
_UNIT_BYTES = {
    "b": 1,
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
    **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgt")},
}


def check_memory_limit(text: str) -> str:
    """``text`` checked as a DuckDB memory limit (see :data:`MEMORY_HELP`).

    Returns:
        The limit as DuckDB reads it (spaces removed).

    Raises:
        QueryError: not a size with a unit or a percentage (ASCII digits), zero, a percentage
            over 100, or a size over :data:`MAX_MEMORY_BYTES`.
    """
    match = _MEMORY_RE.fullmatch(str(text))
    number = Fraction(match[1]) if match else None  # exact: no float rounds 1000000.0000001TB down to the bound
    if match is None or number is None or number <= 0 or (match[2] == "%" and number > 100):
        raise QueryError(
            f"--memory-limit (ATTNSWEEP_QUERY_MEMORY) {text!r} is not a memory limit: give {MEMORY_HELP}; "
            "a percentage is above 0 and at most 100"
        )
    if match[2] != "%" and number * _UNIT_BYTES[match[2].lower()] > MAX_MEMORY_BYTES:
        raise QueryError(
            f"--memory-limit (ATTNSWEEP_QUERY_MEMORY) {text!r} is out of range: at most "
            f"{MAX_MEMORY_BYTES // 10**12:,}TB (10^18 bytes); give {MEMORY_HELP}"
        )
    return match[1] + match[2]


def memory_bytes(limit: str) -> int:
    """A limit as :func:`check_memory_limit` returns it, in bytes (a percentage of this
    machine's physical memory)."""
    match = _MEMORY_RE.fullmatch(limit)
    if match is None:
        raise ValueError(f"{limit!r} is not a limit check_memory_limit returns")
    number = Fraction(match[1])
    if match[2] == "%":
        return int(number * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 100)
    return int(number * _UNIT_BYTES[match[2].lower()])


def batch_budget(limit_bytes: int) -> int:
    """The most bytes one batch of a result may hold under a memory limit of ``limit_bytes``:
    a sixteenth of it, between 1 MiB and 64 MiB. The query's process holds at most about four
    (DuckDB's hand-over, the batch being made, the batch given out and the output's text of
    it), so DuckDB's own limit is the memory limit less four budgets (:func:`engine_limit`)."""
    return max(2**20, min(64 * 2**20, limit_bytes // 16))


ENGINE_SHARE = 0.75
"""The share of a query's memory limit (less the batches') that DuckDB's own limit is set to:
DuckDB counts the blocks of its buffer manager, not the chunks of 2,048 rows that its threads
hold in flight nor the vectors it converts to Arrow, which measured up to a third of a query's
limit and more (wide strings, lists turned into JSON text: see tests/test_guarantees.py)."""


MIN_MEMORY_BYTES = 32 * 2**20
"""The least memory limit a query starts under."""


def engine_limit(limit_bytes: int) -> int:
    """DuckDB's memory limit, in bytes, for a query under ``limit_bytes`` in all (at least 8 MiB)."""
    return max(8 * 2**20, int((limit_bytes - 4 * batch_budget(limit_bytes)) * ENGINE_SHARE))


THREAD_BYTES = 256 * 2**20
"""Memory a DuckDB thread is given under a query's limit: each holds chunks of 2,048 rows in
flight whose values DuckDB's own limit does not count (2,048 rows of 90 kB strings are 184 MB),
so a small limit gets few threads."""


def engine_threads(limit_bytes: int) -> int:
    """DuckDB's threads for a query under a memory limit of ``limit_bytes``: one per
    :data:`THREAD_BYTES`, at least one, at most this machine's processors."""
    return max(1, min(os.cpu_count() or 1, limit_bytes // THREAD_BYTES))


def check_spill_limit(text: str | None, folder: str | None = None) -> int:
    """``text`` (a size, as :data:`MEMORY_HELP`; a percentage is of the space free in the
    temporary folder) as the most bytes a query may spill; None: :data:`DEFAULT_SPILL_SHARE`
    of the space free now.

    Raises:
        QueryError: not a size or percentage, or zero.
    """
    free = shutil.disk_usage(folder or tempfile.gettempdir()).free
    if text is None:
        return max(2**20, int(free * DEFAULT_SPILL_SHARE))
    match = _MEMORY_RE.fullmatch(str(text))
    number = Fraction(match[1]) if match else None
    if match is None or number is None or number <= 0 or (match[2] == "%" and number > 100):
        raise QueryError(
            f"--spill-limit (ATTNSWEEP_QUERY_SPILL) {text!r} is not a size: give {MEMORY_HELP} (a "
            "percentage is of the space free in the temporary folder); above 0"
        )
    if match[2] == "%":
        return max(2**20, int(number * free / 100))
    return min(int(number * _UNIT_BYTES[match[2].lower()]), MAX_MEMORY_BYTES)


def remove_stale_spill(folder: str | None = None) -> list[str]:
    """Remove the spill folders of queries whose process is gone (killed: SIGKILL, a power cut),
    named :data:`SPILL_PREFIX` with the process id; returns them."""
    base = folder or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        m = re.fullmatch(re.escape(SPILL_PREFIX) + r"(\d+)-[A-Za-z0-9_]+", name)
        if m is None or int(m[1]) == os.getpid():
            continue
        try:
            os.kill(int(m[1]), 0)
            continue  # alive (or another user's: EPERM below)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        removed.append(os.path.join(base, name))
    return removed


ADDRESS_HEADROOM = 512 * 2**20
"""Address space a query's process may map beyond what it held after its warm-up, its
``--memory-limit`` and :data:`ADDRESS_SHARE` of it (bytes): what the store's datasets, the
query's connection and the output's writer map on top of the warm-up's. Measured on 2026-12-05
(2 cores, DuckDB 2.0.1, pyarrow 26.0.1, polars 2.1.0, Arrow's pool the system allocator,
``MALLOC_ARENA_MAX=2``): after the warm-up the process maps 640-690 MiB (VmSize); the most a
query then mapped beyond its limit was 333 MiB (70,000 rows of 16 kB: CSV under 400MB, JSON
under 1GB), 230 MiB for a 3-million-row sort that spills, 130-200 MiB for any query over a
small store's tables. Under 100MB the cap allows 632 MiB beyond the limit: a value of 1 GB is
refused. With Arrow's default pool (mimalloc) the warm-up alone mapped 1.7 GiB, 1 GiB of it one
reserved arena that later allocations fill without mapping more: the cap would not see them."""
ADDRESS_SHARE = 0.5
"""The share of ``--memory-limit`` added to the cap beside it (bytes the limit does not count
grow with it: DuckDB's chunks in flight and text conversions measured up to 1.2 times the
limit resident, :data:`ENGINE_SHARE`)."""
THREAD_ARENA = 72 * 2**20
"""Per DuckDB thread: its stack (8 MiB) and the allocator arena a thread may reserve (64 MiB)."""


def address_space() -> int | None:
    """This process's mapped address space now (``VmSize``), bytes; None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            found = re.search(r"^VmSize:\s+(\d+) kB", fh.read(), re.M)
    except OSError:
        return None
    return None if found is None else int(found[1]) * 1024


def bound_address_space(limit_bytes: int) -> int | None:
    """Cap this process's address space (``RLIMIT_AS``) at what it maps now plus
    ``limit_bytes``, :data:`ADDRESS_SHARE` of it, :data:`ADDRESS_HEADROOM` and
    :data:`THREAD_ARENA` per DuckDB thread (under 100MB: 1 thread, the cap is what it maps
    plus 727 MiB), so
    that no value DuckDB or the output makes can grow it past the limit by more than that: an
    allocation beyond the cap fails (DuckDB's and Python's as an out-of-memory error, a native
    library's perhaps by aborting the process). Call it in a process that runs one query and
    ends (the CLI's query child), after its libraries are loaded and warmed up: the cap stays.

    Returns:
        The cap in bytes, or None where the platform has no such limit.
    """
    held = address_space()
    try:
        import resource
    except ImportError:
        return None
    if held is None:
        return None
    threads = engine_threads(limit_bytes) * THREAD_ARENA
    cap = held + limit_bytes + int(limit_bytes * ADDRESS_SHARE) + ADDRESS_HEADROOM + threads
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return cap
