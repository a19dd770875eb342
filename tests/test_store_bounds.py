"""The store's bounds against a hostile tester (issue 23, second trial): small files that
would decode to gigabytes, and stores that `store check` called ok while `analyze` called
them broken. Each test builds a real one-run store with the CLI and breaks it as the tester
did; peak memory is measured in a process of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="250", ATTNSWEEP_CACHE_DIR="off")
ENV.pop("ATTNSWEEP_MAX_FILE_MB", None)
SPEC = (
    "name: tiny\nseeds: 2\ngrid: {T: [8, 16], m: [16, 64]}\n"
    "fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 100, lr: 3e-3, max_epochs: 20}\n"
)  # 8 trials, one part file
GIB = 2**30
SMALL_MB = 600
"""Peak memory (MB) a command may reach on the hostile files: a CLI query over the tiny store
peaks at 260-300 MB here (its libraries); each file below takes 1-8 GB if read or decoded whole."""


def _cli(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


# The command runs as the only child of a small Python process, which reports the child's
# peak resident memory: RUSAGE_CHILDREN of that process is the command's alone.
PEAK = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps(dict(rc=proc.returncode, out=proc.stdout, err=proc.stderr,
                      peak_mb=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)))
"""


def _peak(*args, cwd: Path, env: dict | None = None) -> dict:
    """Run the CLI with ``args``; its exit code, output and peak memory in MB (Linux: ru_maxrss in KiB)."""
    proc = subprocess.run(
        [sys.executable, "-c", PEAK, sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A folder with tiny.yaml and the store S of one finished run of it (8 trials, one part file)."""
    root = tmp_path_factory.mktemp("bounds")
    (root / "tiny.yaml").write_text(SPEC)
    done = _cli("run", "tiny.yaml", "--local", "--no-analyze", "--store", "S", cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.fixture()
def work(made, tmp_path) -> Path:
    shutil.copytree(made, tmp_path / "w")
    return tmp_path / "w"


def _run(work: Path) -> tuple[str, Path]:
    """The run id R and its trial folder."""
    folder = next((work / "S" / "trials" / "sweep=tiny").iterdir())
    return folder.name.removeprefix("run_id="), folder


def _part(work: Path) -> Path:
    (part,) = _run(work)[1].glob("*.parquet")
    return part


def _count(work: Path, table: str = "trials", env: dict | None = None) -> tuple[int, str]:
    got = _cli(
        "query",
        f"select count(*) as n from {table}",
        "--format",
        "csv",
        "--store",
        "S",
        cwd=work,
        env=env,
    )
    assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr
    return int(got.stdout.split()[1]), _flat(got.stderr)


def _check(work: Path) -> subprocess.CompletedProcess:
    got = _cli("store", "check", "--store", "S", cwd=work)
    assert "Traceback" not in got.stdout + got.stderr, got.stderr
    return got


def _line(text: str, *words: str) -> str:
    """The one line of ``text`` holding every one of ``words``."""
    lines = [ln for ln in text.splitlines() if all(w in ln for w in words)]
    assert len(lines) == 1, (words, text)
    return lines[0]


# -- a Parquet file written by hand ---------------------------------------------------------
# The tester's 66 KB file (one row, its error 1.5 GB of 'x', zstd) took 14 GB to write with
# pyarrow; written here by hand (Thrift compact protocol, parquet.thrift), with the page
# compressed as a stream, it takes a few MB and a few seconds.


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _zz(n: int) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63))


class _Struct:
    """A Thrift compact struct, field by field in increasing id."""

    def __init__(self):
        self.b, self.last = bytearray(), 0

    def _field(self, fid: int, kind: int) -> _Struct:
        self.b.append((fid - self.last) << 4 | kind)
        self.last = fid
        return self

    def i32(self, fid: int, v: int) -> _Struct:
        self._field(fid, 5).b.extend(_zz(v))
        return self

    def i64(self, fid: int, v: int) -> _Struct:
        self._field(fid, 6).b.extend(_zz(v))
        return self

    def text(self, fid: int, v: str) -> _Struct:
        self._field(fid, 8).b.extend(_uvarint(len(v)) + v.encode())
        return self

    def struct(self, fid: int, inner: bytes) -> _Struct:
        self._field(fid, 12).b.extend(inner)
        return self

    def list(self, fid: int, kind: int, items: list[bytes]) -> _Struct:
        self._field(fid, 9).b.append(len(items) << 4 | kind)  # fewer than 15 items
        for item in items:
            self.b.extend(item)
        return self

    def end(self) -> bytes:
        return bytes(self.b) + b"\x00"


def _string_file(path: Path, columns: dict[str, tuple[int, bytes, int]], claim: dict[str, int] | None = None) -> None:
    """A one-row Parquet file of required UTF-8 columns: ``{name: (codec, page bytes as
    stored, page bytes uncompressed)}`` (a page holds the PLAIN value: 4-byte length, bytes);
    ``claim``: uncompressed page sizes the footer states instead of the real ones."""
    out = bytearray(b"PAR1")
    chunks, total = [], 0
    for name, (codec, stored, plain) in columns.items():
        page = (
            _Struct()
            .i32(1, 0)
            .i32(2, plain)
            .i32(3, len(stored))
            .struct(5, _Struct().i32(1, 1).i32(2, 0).i32(3, 3).i32(4, 3).end())
            .end()
        )
        offset = len(out)
        out += page + stored
        size = len(page) + (claim or {}).get(name, plain)
        total += size
        meta = (
            _Struct()
            .i32(1, 6)
            .list(2, 5, [_zz(0), _zz(3)])
            .list(3, 8, [_uvarint(len(name)) + name.encode()])
            .i32(4, codec)
            .i64(5, 1)
            .i64(6, size)
            .i64(7, len(page) + len(stored))
            .i64(9, offset)
            .end()
        )
        chunks.append(_Struct().i64(2, offset).struct(3, meta).end())
    schema = [_Struct().text(4, "schema").i32(5, len(columns)).end()]
    schema += [_Struct().i32(1, 6).i32(3, 0).text(4, name).i32(6, 0).end() for name in columns]
    group = _Struct().list(1, 12, chunks).i64(2, total).i64(3, 1).end()
    footer = _Struct().i32(1, 1).list(2, 12, schema).i64(3, 1).list(4, 12, [group]).end()
    path.write_bytes(bytes(out + footer + struct.pack("<I", len(footer)) + b"PAR1"))


def _bomb(path: Path, n: int = 1536 * 2**20, claim: int | None = None) -> None:
    """A trial file of one row (trial id ``bomb``) whose error is ``n`` bytes of 'x', zstd."""
    sink = pa.BufferOutputStream()
    z = pa.CompressedOutputStream(sink, "zstd")
    z.write(struct.pack("<I", n))
    chunk = b"x" * 2**24
    for _ in range(n // len(chunk)):
        z.write(chunk)
    z.write(b"x" * (n % len(chunk)))
    z.close()
    tid = b"bomb"
    _string_file(
        path,
        {
            "trial_id": (0, struct.pack("<I", len(tid)) + tid, 4 + len(tid)),
            "error": (6, sink.getvalue().to_pybytes(), 4 + n),
        },
        claim=None if claim is None else {"error": claim},
    )


# -- 1. memory stays small ------------------------------------------------------------------


@pytest.mark.slow
def test_a_sparse_file_with_magic_at_both_ends_is_refused_from_its_footer_alone(work):
    _, folder = _run(work)
    victim = folder / "part-99999999999999999999-sparse00.parquet"
    with victim.open("wb") as f:  # 3 GiB, a few KB on disk: the tester's file
        f.write(b"PAR1")
        f.seek(3 * GIB - 8)
        f.write(struct.pack("<I", 100) + b"PAR1")
    got = _peak("query", "select count(*) as n from trials", "--format", "csv", "--store", "S", cwd=work)
    assert got["rc"] == 0 and got["out"].split() == ["n", "8"], got
    assert got["peak_mb"] < SMALL_MB, got  # it was 3.3 GB: the whole file was read to check it
    assert victim.name in _flat(got["err"]) and "damaged" in got["err"]
    assert not victim.exists() and list((work / "S" / "quarantine").rglob(victim.name))  # damage: quarantined


@pytest.mark.slow
def test_a_small_file_that_decodes_to_gigabytes_is_skipped_before_any_page_is_decoded(work):
    run_id, folder = _run(work)
    victim = folder / "part-99999999999999999999-bomb0000.parquet"
    _bomb(victim)
    assert victim.stat().st_size < 200_000
    got = _peak("query", "select count(*) as n from trials", "--format", "csv", "--store", "S", cwd=work)
    assert got["rc"] == 0 and got["out"].split() == ["n", "8"], got
    assert got["peak_mb"] < SMALL_MB, got  # it was 8 GB: decoded by pyarrow and by polars
    said = _flat(got["err"])
    assert victim.name in said and "too large to read" in said and "ATTNSWEEP_MAX_FILE_MB" in said
    assert victim.exists()  # a size is no damage: skipped where it is, never moved
    check = _check(work)
    assert check.returncode == 1
    assert re.search(r"decodes to about 1,610,6\d\d,\d\d\d bytes", _line(check.stdout, "too large", victim.name))
    analyze = _cli("analyze", "--store", "S", cwd=work)
    assert analyze.returncode == 0 and "incomplete" not in analyze.stderr  # all 8 recorded rows read
    assert victim.name in _flat(analyze.stderr)


@pytest.mark.slow
def test_a_footer_that_understates_its_pages_is_damage_and_nothing_is_decompressed(work):
    _, folder = _run(work)
    victim = folder / "part-99999999999999999999-liar0000.parquet"
    _bomb(victim, claim=1000)  # the footer says the error's page holds 1000 bytes; its header, 1.5 GB
    assert pq.read_metadata(victim).row_group(0).total_byte_size < 2000  # what a footer-only bound sees
    got = _peak("query", "select count(*) as n from trials", "--format", "csv", "--store", "S", cwd=work)
    assert got["rc"] == 0 and got["out"].split() == ["n", "8"], got
    assert got["peak_mb"] < SMALL_MB, got
    said = _flat(got["err"])
    assert "damaged" in said and "decompress to 1,610,612," in said and "its footer says" in said
    assert list((work / "S" / "quarantine").rglob(victim.name))


def test_strings_of_a_dictionary_are_counted_before_any_reader_expands_them(work):
    _, folder = _run(work)
    victim = folder / "part-99999999999999999999-dict0000.parquet"
    one = pa.array(["y" * (16 * 2**20)])  # one 16 MiB string, its dictionary entry; 64 rows point at it: 1 GiB
    error = pa.DictionaryArray.from_arrays(pa.array([0] * 64, pa.int32()), one)
    table = pa.table({"trial_id": [f"d{i}" for i in range(64)], "error": error})
    pq.write_table(
        table,
        victim,
        dictionary_pagesize_limit=64 * 2**20,
        store_schema=False,
        compression="zstd",
        write_page_checksum=True,
    )
    assert victim.stat().st_size < 100_000
    got = _peak("query", "select count(*) as n from trials", "--format", "csv", "--store", "S", cwd=work)
    assert got["rc"] == 0 and got["out"].split() == ["n", "8"], got
    assert got["peak_mb"] < SMALL_MB, got
    said = _flat(got["err"])
    assert victim.name in said and "expands to at least" in said and "too large" in said
    assert victim.exists()


@pytest.mark.slow
def test_prefix_encoded_strings_are_bounded_from_the_footer_and_read_within_it(work):
    # pyarrow keeps no dictionary for DELTA_* encoded strings, so these are bounded before decoding:
    # a prefix-encoded value may repeat its predecessor whole, so 40 values of 1 MiB take 1 MiB of page.
    _, folder = _run(work)
    prefixed = folder / "part-99999999999999999999-delta000.parquet"
    one = "z" * 2**20
    table = pa.table({"trial_id": [f"z{i}" for i in range(40)], "error": [one] * 40})
    pq.write_table(
        table,
        prefixed,
        use_dictionary=False,
        column_encoding={"error": "DELTA_BYTE_ARRAY"},
        compression="zstd",
        write_statistics=False,
    )
    assert pq.read_metadata(prefixed).row_group(0).column(1).total_uncompressed_size < 2 * 2**20
    n, said = _count(work, env=dict(ENV, ATTNSWEEP_MAX_FILE_MB="16"))  # 40 MiB of strings once decoded
    assert n == 8 and prefixed.name in said and "more than the 16 MiB" in said
    assert _count(work) == (48, "")  # within the default limit: read, not taken for damage
    lengths = folder / "part-99999999999999999999-delta001.parquet"
    pq.write_table(
        table.set_column(0, "trial_id", pa.array([f"w{i}" for i in range(40)])),
        lengths,
        use_dictionary=False,
        column_encoding={"error": "DELTA_LENGTH_BYTE_ARRAY"},
        compression="zstd",
    )
    assert _count(work) == (88, "")


def test_the_page_check_takes_files_of_every_writer_and_of_no_rows(work):
    import polars as pl

    part = _part(work)
    real = pq.read_table(part)
    ids = lambda tag: pa.array([f"{tag}{i}" for i in range(8)])  # noqa: E731
    pq.write_table(real.slice(0, 0), part.with_name("part-99999999999999999990-empty000.parquet"))  # a chunk of no rows
    pq.write_table(
        real.set_column(0, "trial_id", ids("v")),
        part.with_name("part-99999999999999999991-v2pages0.parquet"),
        data_page_version="2.0",
        write_page_index=True,
        compression="gzip",
    )
    pl.from_arrow(real.set_column(0, "trial_id", ids("p"))).write_parquet(
        part.with_name("part-99999999999999999992-polars00.parquet"), data_page_size=512
    )
    assert _count(work) == (24, "")


@pytest.mark.slow
def test_the_limit_is_generous_for_real_rows_and_set_by_its_variable(work):
    part = _part(work)
    real = pq.read_table(part)
    # 5,000 trials (the writer's flush_rows), each failed with a 4 KB traceback: a large real part file.
    rows = pa.concat_tables([real] * 625)
    rows = rows.set_column(0, "trial_id", pa.array([f"f{i}" for i in range(rows.num_rows)]))
    rows = rows.set_column(
        rows.schema.get_field_index("error"),
        "error",
        pa.array([f"Traceback {i}\n" + "  File x, line 1\n" * 240 for i in range(rows.num_rows)]),
    )
    big = part.with_name("part-99999999999999999999-real0000.parquet")
    pq.write_table(rows, big, write_page_checksum=True)
    assert _count(work) == (5008, "")  # read, no warning: within the default limit
    n, said = _count(work, env=dict(ENV, ATTNSWEEP_MAX_FILE_MB="16"))
    assert n == 8 and big.name in said and "more than the 16 MiB a store file may hold" in said
    bad = _cli("query", "select 1", "--store", "S", cwd=work, env=dict(ENV, ATTNSWEEP_MAX_FILE_MB="lots"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "ATTNSWEEP_MAX_FILE_MB='lots'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_compact_writes_no_file_its_readers_would_refuse(work, monkeypatch):
    from attnsweep.results import ResultsStore
    from attnsweep.results.file_limits import decoded_estimate
    from attnsweep.results.integrity import compact_store

    part = _part(work)
    real = pq.read_table(part)
    for k in range(12):  # 12 part files of 800 rows each, about 1 MB decoded each
        rows = pa.concat_tables([real] * 100)
        rows = rows.set_column(0, "trial_id", pa.array([f"p{k}-{i}" for i in range(rows.num_rows)]))
        pq.write_table(rows, part.with_name(f"part-{k + 1:020d}-extra000.parquet"), write_page_checksum=True)
    monkeypatch.setenv("ATTNSWEEP_CACHE_DIR", "off")
    monkeypatch.setenv("ATTNSWEEP_MAX_FILE_MB", "24")
    before = ResultsStore(work / "S").scan_trials().collect().sort("trial_id")
    report = compact_store(ResultsStore(work / "S"))
    files = sorted(_run(work)[1].glob("*.parquet"))
    assert report.files_before == 13 and report.files_after == len(files) > 1  # a few files, not one
    store = ResultsStore(work / "S")
    assert all(decoded_estimate(store.metadata(p)) <= 24 * 2**20 // 4 for p in files)
    assert store.scan_trials().collect().sort("trial_id").equals(before) and not store.set_aside


# -- 2. store check says what analyze says ---------------------------------------------------


def test_a_run_missing_rows_fails_store_check(work):
    run_id, _ = _run(work)
    part = _part(work)
    pq.write_table(pq.read_table(part).slice(0, 4), part, write_page_checksum=True)
    check = _check(work)
    assert check.returncode == 1
    line = _line(check.stdout, "missing rows", run_id)
    assert "holds 4 of the 8 trials its record counts" in line


@pytest.mark.slow
def test_extra_rows_and_rows_naming_another_run_fail_store_check(work):
    run_id, folder = _run(work)
    real = pq.read_table(_part(work))
    more = real.set_column(0, "trial_id", pa.array([f"{t}-more" for t in real["trial_id"].to_pylist()]))
    pq.write_table(more, folder / "part-99999999999999999998-more0000.parquet", write_page_checksum=True)
    check = _check(work)
    assert check.returncode == 1
    assert "holds 16 trials, its record counts 8" in _line(check.stdout, "extra rows", run_id)

    (folder / "part-99999999999999999998-more0000.parquet").unlink()
    evil = more.append_column("run_id", pa.array(["OTHER"] * 8)).append_column("sweep", pa.array(["evil"] * 8))
    pq.write_table(evil, folder / "part-99999999999999999999-evil0000.parquet", write_page_checksum=True)
    check = _check(work)
    assert check.returncode == 1
    line = _line(check.stdout, "evil0000.parquet")
    assert run_id in line and "name another run (sweep evil, run_id OTHER)" in line
    n, said = _count(work)
    assert n == 8 and "evil0000.parquet" in said  # every reader sets it aside, as store check says
    analyze = _cli("analyze", "--store", "S", cwd=work)
    assert analyze.returncode == 0 and "more trials than it recorded" not in _flat(analyze.stderr)


def test_a_second_run_record_fails_store_check_and_is_not_read(work):
    run_id, _ = _run(work)
    folder = work / "S" / "runs" / "sweep=tiny" / f"run_id={run_id}"
    shutil.copy(folder / "run.parquet", folder / "second.parquet")
    check = _check(work)
    assert check.returncode == 1
    assert "second.parquet" in _line(check.stdout, "second run record", run_id)
    assert _count(work, "runs")[0] == 1  # one record per run, whatever lies beside it


@pytest.mark.slow
def test_a_part_file_without_trial_ids_is_no_trial_file_for_any_reader(work):
    run_id, folder = _run(work)
    real = pq.read_table(_part(work))
    pq.write_table(
        real.drop_columns(["trial_id"]),
        folder / "part-99999999999999999999-noid0000.parquet",
        write_page_checksum=True,
    )
    check = _check(work)
    assert check.returncode == 1 and "trial None" not in check.stdout
    assert "lacks the column(s) trial_id" in _line(check.stdout, "noid0000.parquet", run_id)
    n, said = _count(work)
    assert n == 8 and "noid0000.parquet" in said
    analyze = _cli("analyze", "--store", "S", cwd=work)
    assert analyze.returncode == 0 and "more trials than it recorded" not in _flat(analyze.stderr)


def test_an_intact_store_still_checks_ok(work):
    check = _check(work)
    assert check.returncode == 0 and check.stdout.strip().endswith("ok"), check.stdout


# -- 3. one odd folder does not stop a compaction ------------------------------------------


def test_compact_skips_a_badly_named_folder_and_compacts_the_rest(work):
    run_id, folder = _run(work)
    part = _part(work)
    real = pq.read_table(part)
    more = real.set_column(0, "trial_id", pa.array([f"{t}-more" for t in real["trial_id"].to_pylist()]))
    pq.write_table(more, folder / "part-99999999999999999998-more0000.parquet", write_page_checksum=True)
    odd = work / "S" / "trials" / "sweep=bad name" / "run_id=x"
    odd.mkdir(parents=True)
    shutil.copy(part, odd / part.name)
    got = _cli("store", "compact", "--store", "S", cwd=work)
    assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr
    assert "compacted 1 run(s): 2 files -> 1, 16 rows unchanged" in got.stdout
    assert "skipped: trials/sweep=bad name/run_id=x" in _flat(got.stderr)
    assert len(list(folder.glob("*.parquet"))) == 1 and (odd / part.name).exists()
