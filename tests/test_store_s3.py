"""The store on a real S3 server: moto's server mode on a loopback port, spoken to over HTTP
by s3fs, as a store at ``s3://bucket/store`` is in use (no rename, listings, PUTs that fail).

The server runs in this process (a thread), on a free port of 127.0.0.1; every client finds
it through ``AWS_ENDPOINT_URL``, which botocore reads itself, and uses the fixed test
credentials (no file, no instance metadata: nothing but loopback is reached). Each test has a
bucket of its own. The end-to-end tests run ``attnsweep`` as a user does: a run on the
embedded local Ray killed with SIGKILL and resumed, then ``store check``, ``store compact``,
``query``, ``analyze`` and ``report`` against the bucket, each compared with the same run in a
local store; and a server that goes away mid-run, which must lose no finished row.
"""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow  # sweeps against a moto S3 server

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's S3 server on a loopback port; ``stop`` and ``start`` keep its buckets (moto keeps
    them in this process), so a test can take the server away mid-run and bring it back."""

    def __init__(self, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._server = None

    def start(self) -> None:
        self._server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"moto's server did not listen on port {self.port}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The server, and this process's environment pointed at it (the same for subprocesses)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = S3Server(_free_port())
    nowhere = tmp_path_factory.mktemp("aws") / "none"  # no user's AWS config or credentials file is read
    env = dict(
        AWS_ENDPOINT_URL=server.url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(nowhere),
        AWS_SHARED_CREDENTIALS_FILE=str(nowhere),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        # botocore's own retries off (s3fs still tries 5 times): a refused connection fails in
        # about 2 s instead of 10, which is all the tests of an absent server wait for.
        AWS_MAX_ATTEMPTS="1",
    )
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(key, raising=False)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()  # a client made before this module would not know the endpoint
        server.start()
        try:
            yield server
        finally:
            server.stop()
            s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def bucket(s3):
    """A new bucket; its name."""
    import boto3

    name = f"attnsweep-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def _keys(bucket: str, prefix: str = "") -> list[str]:
    import boto3

    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def _put(bucket: str, key: str, data: bytes) -> None:
    import boto3

    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data)


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, write_page_checksum=True)
    return sink.getvalue()


# -- the store's own reads and writes on S3 ---------------------------------------------

RECORD = {
    "status": "finished",
    "started_at": None,
    "n_trials": 1,
    "spec_hash": "h",
    "spec_yaml": "y",
}


def test_files_another_process_writes_are_seen_by_the_next_read(bucket):
    """fsspec shares one s3fs client, and its cache of listings, among every store object of
    a process: a read must list again, or another driver's files stay unseen."""
    from attnsweep.results import ResultsStore

    store = ResultsStore(f"s3://{bucket}/store")
    store.write_run("sw", "r1", RECORD)
    store.write_trials("sw", "r1", pa.table({"trial_id": ["a"], "x": [1]}))
    assert store.scan_trials().collect()["trial_id"].to_list() == ["a"]
    # Another process's write (its own client: the server only hears of it).
    _put(
        bucket,
        "store/trials/sweep=sw/run_id=r1/part-99999999999999999999-0000beef.parquet",
        _parquet(pa.table({"trial_id": ["b"], "x": [2]})),
    )
    assert sorted(ResultsStore(f"s3://{bucket}/store").scan_trials().collect()["trial_id"]) == [
        "a",
        "b",
    ]
    assert sorted(store.scan_trials().collect()["trial_id"]) == ["a", "b"]


def test_a_write_that_fails_midway_leaves_no_object(bucket, monkeypatch):
    """No rename on S3: a file is one PUT of whole bytes. Writing through an fsspec file
    would upload what was written so far when the writer fails, a truncated part file."""
    from attnsweep.results import ResultsStore

    store = ResultsStore(f"s3://{bucket}/store")
    real = pq.write_table

    def dies_midway(table, where, **kw):
        real(table.slice(0, 1), where, **kw)  # some bytes out, then the writer fails
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        store.write_trials("sw", "r1", pa.table({"trial_id": ["a", "b"], "x": [1, 2]}))
    assert _keys(bucket) == []


def test_an_unreachable_server_is_an_os_error_and_no_reason_to_quarantine(s3, bucket):
    """Out of reach, botocore raises its own errors: a write raises OSError (what the run's
    rescue of refused rows catches), and a read skips the file where it is, never moving a
    sound file to quarantine/; it reads again once the server is back."""
    from attnsweep.results import ResultsStore
    from attnsweep.results.defensive_reads import StoreWarning

    store = ResultsStore(f"s3://{bucket}/store")
    store.write_run("sw", "r1", RECORD)
    part = store.write_trials("sw", "r1", pa.table({"trial_id": ["a"], "x": [1]}))
    fresh = ResultsStore(f"s3://{bucket}/store")
    s3.stop()
    try:
        with pytest.raises(OSError, match="EndpointConnectionError"):
            store.write_trials("sw", "r1", pa.table({"trial_id": ["b"], "x": [2]}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert fresh.metadata(part) is None
        why = fresh.set_aside[part]
        assert why.unreadable and not why.damaged and "Could not connect to the endpoint" in why.reason
        assert any(issubclass(w.category, StoreWarning) for w in caught)
    finally:
        s3.start()
    assert not fresh.quarantined
    assert _keys(bucket, "store/trials/") == [part.path.split("/", 1)[1]]
    assert ResultsStore(f"s3://{bucket}/store").scan_trials().collect()["trial_id"].to_list() == ["a"]


# -- attnsweep against s3:// end to end ---------------------------------------------------

SWEEP = (
    "name: kills\nseeds: 4\ngrid: {T: [8, 16], m: [32, 64, 128]}\n"
    "fixed: {task: and, s: 2, d: 8, heads: 2, n_test: 100, lr: 3e-3, max_epochs: 300}\n"
    "execution: {pack_size: 2, flush_rows: 2, flush_s: 0.1}\n"
)
"""test_faults.py's sweep (24 trials; a run killed after 2 part files is mid-sweep)."""
SAME = ["trial_id", "status", "epochs", "support", "T", "m", "seed"]
"""Columns an interrupted and resumed run has exactly as an uninterrupted one."""


def _env(home) -> dict:
    """A subprocess's environment: this one's (the endpoint, the test credentials) with its own
    home, where a run on an object store keeps its lock (results/locks.py)."""
    return dict(os.environ, HOME=str(home), RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")


def _cli(*args, cwd, env, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _wait_for_parts(bucket: str, n: int, proc, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if sum(k.endswith(".parquet") for k in _keys(bucket, "store/trials/")) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {n} part files in time (the run exited with {proc.poll()})")


@pytest.fixture(scope="module")
def resumed(s3, tmp_path_factory):
    """The sweep on the embedded local Ray into s3://BUCKET/store, its driver (and the Ray it
    started) killed with SIGKILL after two part files, ``store check`` then, and ``attnsweep
    resume``; beside it the same sweep uninterrupted in a local store."""
    import boto3

    from attnsweep.results import ResultsStore

    work = tmp_path_factory.mktemp("s3-e2e")
    (work / "spec.yaml").write_text(SWEEP)
    env = _env(work / "home")
    bucket = f"attnsweep-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/store"
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnsweep.cli", "run", "spec.yaml", "--store", uri, "--no-analyze"],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_parts(bucket, 2, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started, mid-sweep
        proc.wait()
    partial = ResultsStore(uri).scan_trials().collect()
    (run_id,) = partial["run_id"].unique().to_list()
    died = _cli("store", "check", "--store", uri, cwd=work, env=env)
    resumed = _cli("resume", run_id, "--store", uri, "--local", "--no-analyze", cwd=work, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = _cli("run", "spec.yaml", "--store", "whole", "--local", "--no-analyze", cwd=work, env=env)
    assert whole.returncode == 0, whole.stderr[-3000:]
    return dict(
        work=work,
        env=env,
        bucket=bucket,
        uri=uri,
        run_id=run_id,
        partial=partial,
        died=died,
        local=ResultsStore(work / "whole"),
    )


def test_a_run_killed_with_sigkill_and_resumed_on_s3_holds_each_trial_once(resumed):
    from attnsweep.results import ResultsStore

    partial, run_id = resumed["partial"], resumed["run_id"]
    assert 0 < partial.height < 24, "the kill should land mid-sweep"
    # The killed run is named by store check on the machine whose lock it held.
    died = resumed["died"]
    assert died.returncode == 1 and f"died run: run {run_id} of sweep kills" in died.stdout, died.stdout
    store = ResultsStore(resumed["uri"])
    cut, ref = store.scan_trials().collect(), resumed["local"].scan_trials().collect()
    assert cut.height == 24 and cut["trial_id"].n_unique() == 24  # exactly one row per trial
    assert cut.select(SAME).sort("trial_id").equals(ref.select(SAME).sort("trial_id"))
    both = cut.join(ref, on="trial_id", suffix="_ref")
    assert (both["test_acc"] - both["test_acc_ref"]).abs().max() < 1e-6
    assert (both["train_loss"] - both["train_loss_ref"]).abs().max() < 1e-5
    record = store.read_run("kills", run_id)
    assert record["status"] == "finished" and record["n_done"] == 24
    assert [a["attempt"] for a in record["attempts"]] == [1, 2]
    assert record["attempts"][1]["n_skipped"] == partial.height
    assert record["attempts"][0]["status"] == "died" and record["attempts"][0]["n_run"] == partial.height
    # Nothing but part files and the record: an object store has no temporary names.
    keys = _keys(resumed["bucket"])
    assert all(
        re.fullmatch(rf"store/trials/sweep=kills/run_id={run_id}/part-\d{{20}}-[0-9a-f]{{8}}\.parquet", k)
        for k in keys
        if k.startswith("store/trials/")
    ), keys
    assert [k for k in keys if not k.startswith("store/trials/")] == [
        f"store/runs/sweep=kills/run_id={run_id}/run.parquet"
    ]


def _local_id(resumed) -> str:
    return resumed["local"].latest_run()[1]


def test_query_analyze_and_report_on_s3_match_the_local_store(resumed):
    work, env, uri, run_id = resumed["work"], resumed["env"], resumed["uri"], resumed["run_id"]
    local_id = _local_id(resumed)
    sql = "SELECT trial_id, status, T, m, seed, epochs FROM trials ORDER BY trial_id"
    q_s3 = _cli("query", sql, "--format", "csv", "--store", uri, cwd=work, env=env)
    q_local = _cli("query", sql, "--format", "csv", "--store", "whole", cwd=work, env=env)
    assert q_s3.returncode == 0, q_s3.stderr
    assert q_s3.stdout == q_local.stdout and q_s3.stdout.count("\n") == 25
    a_s3 = _cli("analyze", run_id, "--store", uri, "--figures", "fig-s3", cwd=work, env=env)
    a_local = _cli("analyze", local_id, "--store", "whole", "--figures", "fig-local", cwd=work, env=env)
    assert a_s3.returncode == 0, a_s3.stderr[-3000:]
    assert a_s3.stdout.replace(run_id, "RUN").replace("fig-s3", "FIG") == a_local.stdout.replace(
        local_id, "RUN"
    ).replace("fig-local", "FIG")
    assert sorted(p.name for p in (work / "fig-s3").iterdir()) == sorted(p.name for p in (work / "fig-local").iterdir())
    r_s3 = _cli("report", run_id, "--store", uri, "--publish", "--out", "pub-s3", cwd=work, env=env)
    assert r_s3.returncode == 0, r_s3.stderr[-3000:]
    verdicts = r_s3.stdout.splitlines()[-1]
    assert verdicts.startswith("verdicts:")
    # The published folder of the s3 run makes the same report again from its own rows, which
    # are the local run's.
    again = _cli("report", "--from", "pub-s3", cwd=work, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.splitlines()[-1] == verdicts
    published = pl.read_parquet(work / "pub-s3" / "trials.parquet")
    assert (
        published.select(SAME)
        .sort("trial_id")
        .equals(resumed["local"].scan_trials().collect().select(SAME).sort("trial_id"))
    )


def test_store_check_and_compact_on_s3(resumed):
    """Runs last of the module's tests: it changes the store."""
    from attnsweep.results import ResultsStore

    work, env, uri, bucket, run_id = (resumed[k] for k in ("work", "env", "uri", "bucket", "run_id"))
    check = _cli("store", "check", "--store", uri, cwd=work, env=env)
    assert check.returncode == 0 and check.stdout.splitlines()[-1] == "ok", check.stdout
    before = ResultsStore(uri).scan_trials().collect().sort("trial_id")
    n_parts = len(_keys(bucket, "store/trials/"))
    compact = _cli("store", "compact", "--store", uri, cwd=work, env=env)
    assert compact.returncode == 0 and f"{n_parts} files -> 1" in compact.stdout, (
        compact.stdout,
        compact.stderr,
    )
    (part,) = _keys(bucket, "store/trials/")
    after = ResultsStore(uri).scan_trials().collect().sort("trial_id")
    assert after.equals(before)  # every row and value, exactly
    check = _cli("store", "check", "--store", uri, cwd=work, env=env)
    assert check.returncode == 0 and "24 rows" in check.stdout and check.stdout.splitlines()[-1] == "ok", check.stdout
    # A truncated copy of the part file and a stray object: named, the copy quarantined, rows intact.
    import boto3

    data = boto3.client("s3").get_object(Bucket=bucket, Key=part)["Body"].read()
    folder = part.rsplit("/", 1)[0]
    _put(bucket, f"{folder}/part-99999999999999999999-0badf00d.parquet", data[: len(data) // 2])
    _put(bucket, "store/trials/stray.parquet", data)
    check = _cli("store", "check", "--store", uri, cwd=work, env=env)
    assert check.returncode == 1, check.stdout
    assert (
        f"damaged: quarantine/trials/sweep=kills/run_id={run_id}/part-99999999999999999999-0badf00d.parquet"
        in check.stdout
    ), check.stdout
    assert "stray file: trials/stray.parquet" in check.stdout, check.stdout
    assert f"store/quarantine/trials/sweep=kills/run_id={run_id}/part-99999999999999999999-0badf00d.parquet" in _keys(
        bucket
    )
    assert ResultsStore(uri).scan_trials().collect().sort("trial_id").equals(before)


OUTAGE = SWEEP.replace("seeds: 4", "seeds: 8").replace(
    "pack_size: 2, flush_rows: 2, flush_s: 0.1", "pack_size: 1, flush_rows: 1"
)
"""48 trials, each row written as it finishes (one PUT per trial)."""


def test_a_server_gone_mid_run_loses_no_finished_row_and_resume_completes_it(s3, bucket, tmp_path):
    """The S3 server stops answering mid-run (every PUT refused): the run stops with exit 2,
    each trial that finished is in the bucket or in the rescue file the message names (none
    in both), and once the server is back ``attnsweep resume`` completes the run, each trial
    once, the rescued rows' results among them."""
    from attnsweep.results import ResultsStore

    (tmp_path / "spec.yaml").write_text(OUTAGE)
    env, uri = _env(tmp_path / "home"), f"s3://{bucket}/store"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnsweep.cli",
            "run",
            "spec.yaml",
            "--store",
            uri,
            "--local",
            "--no-analyze",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for_parts(bucket, 3, proc)
        s3.stop()
        try:
            _, stderr = proc.communicate(timeout=300)
        finally:
            s3.start()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 2, stderr[-3000:]
    stderr = " ".join(stderr.split())  # the terminal wraps long lines
    m = re.search(
        r"its (\d+) unwritten finished rows are saved in (\S+) \(the (\d+) rows before them are in the store\)",
        stderr,
    )
    assert m, stderr[-3000:]
    n_rescued, rescue, n_stored = int(m[1]), m[2], int(m[3])
    stored = ResultsStore(uri).scan_trials().collect()
    rescued = pl.read_parquet(rescue)
    assert stored.height == n_stored >= 3 and rescued.height == n_rescued >= 1
    assert stored["trial_id"].n_unique() == n_stored and rescued["trial_id"].n_unique() == n_rescued
    assert not set(stored["trial_id"]) & set(rescued["trial_id"])
    (run_id,) = stored["run_id"].unique().to_list()

    done = _cli("resume", run_id, "--store", uri, "--local", "--no-analyze", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    store = ResultsStore(uri)
    rows = store.scan_trials().collect()
    assert rows.height == 48 and rows["trial_id"].n_unique() == 48
    assert store.read_run("kills", run_id)["status"] == "finished"
    again = rows.join(rescued.select(SAME + ["test_acc"]), on="trial_id", suffix="_rescued")
    assert again.height == n_rescued
    for col in SAME[1:]:
        assert again[col].equals(again[f"{col}_rescued"], check_names=False), col
    assert (again["test_acc"] - again["test_acc_rescued"]).abs().max() < 1e-6
    check = _cli("store", "check", "--store", uri, cwd=tmp_path, env=env)
    assert check.returncode == 0, check.stdout
    os.unlink(rescue)


@pytest.mark.parametrize("command", [["run", "spec.yaml", "--local", "--no-analyze"], ["store", "check"]])
def test_a_server_out_of_reach_is_one_line_and_exit_2(s3, command, tmp_path):
    (tmp_path / "spec.yaml").write_text(OUTAGE)
    env = dict(_env(tmp_path / "home"), AWS_ENDPOINT_URL=f"http://127.0.0.1:{_free_port()}")  # nobody listens there
    proc = _cli(*command, "--store", "s3://bucket/store", cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.startswith("error: the store's server could not be reached or refused: EndpointConnectionError")
    assert proc.stderr.count("\n") == 1, proc.stderr
