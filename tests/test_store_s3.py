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
    env = dict(AWS_ENDPOINT_URL=server.url, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(nowhere),
               AWS_SHARED_CREDENTIALS_FILE=str(nowhere), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               # botocore's own retries off (s3fs still tries 5 times): a refused connection fails in
               # about 2 s instead of 10, which is all the tests of an absent server wait for.
               AWS_MAX_ATTEMPTS="1")
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

RECORD = {"status": "finished", "started_at": None, "n_trials": 1, "spec_hash": "h", "spec_yaml": "y"}


def test_files_another_process_writes_are_seen_by_the_next_read(bucket):
    """fsspec shares one s3fs client, and its cache of listings, among every store object of
    a process: a read must list again, or another driver's files stay unseen."""
    from results import ResultsStore

    store = ResultsStore(f"s3://{bucket}/store")
    store.write_run("sw", "r1", RECORD)
    store.write_trials("sw", "r1", pa.table({"trial_id": ["a"], "x": [1]}))
    assert store.scan_trials().collect()["trial_id"].to_list() == ["a"]
    # Another process's write (its own client: the server only hears of it).
    _put(bucket, "store/trials/sweep=sw/run_id=r1/part-99999999999999999999-0000beef.parquet",
         _parquet(pa.table({"trial_id": ["b"], "x": [2]})))
    assert sorted(ResultsStore(f"s3://{bucket}/store").scan_trials().collect()["trial_id"]) == ["a", "b"]
    assert sorted(store.scan_trials().collect()["trial_id"]) == ["a", "b"]


def test_a_write_that_fails_midway_leaves_no_object(bucket, monkeypatch):
    """No rename on S3: a file is one PUT of whole bytes. Writing through an fsspec file
    would upload what was written so far when the writer fails, a truncated part file."""
    from results import ResultsStore

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
    from results import ResultsStore
    from results.store import StoreWarning

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
