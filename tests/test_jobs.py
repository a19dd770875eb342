"""Job submission for real: a head node started with `ray start --head` (job server on a
loopback port), a small sweep submitted through it with `attnsweep submit --wait`, the store
checked, `status`/`logs` read back, then the cluster stopped through the pid that started it.

`status`, `logs` and `cancel` call the job server's REST API without Ray; here they are
compared with what Ray's own `JobSubmissionClient` answers about the same jobs (run in a
subprocess that finds the token as `submit` does).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from progress_lines import parse_progress_line

from attnsweep.orchestrator import jobs
from attnsweep.orchestrator.errors import RunError
from attnsweep.results import ResultsStore

pytestmark = pytest.mark.slow  # the job server and sweeps submitted to it

SPEC = (
    "name: jobsweep\nseeds: 2\ngrid: {T: [8], m: [16, 32]}\n"
    "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 20}\nexecution: {pack_size: 2}\n"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args, cwd, timeout=600):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    gcs, dash = _free_port(), _free_port()
    log = tmp_path_factory.mktemp("head") / "ray-start.log"
    # Every port chosen free, so this head can run beside another Ray on the machine.
    ports = [
        f"--{name}={_free_port()}"
        for name in (
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "metrics-export-port",
            "ray-client-server-port",
            "runtime-env-agent-port",
            "node-manager-port",
            "object-manager-port",
        )
    ]
    proc = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            "--block",
            f"--port={gcs}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            "--num-cpus=2",
            "--disable-usage-stats",
            *ports,
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # The cluster's `python` must be the environment with the project's dependencies,
        # as on a real cluster (cluster.yaml installs them), even when the tests run
        # without the virtual environment activated.
        # As cluster.yaml does: a stopped job's driver gets 30 s, not Ray's default 3 s, between
        # SIGTERM and SIGKILL to record its run as interrupted (3 s is too short on a loaded CI machine).
        env=dict(
            os.environ,
            RAY_USAGE_STATS_ENABLED="0",
            RAY_JOB_STOP_WAIT_TIME_S="30",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ),
    )
    address = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.time() + 180
        while True:
            probe = _cli("status", "no-such-job", "--address", address, cwd=log.parent, timeout=60)
            if "no job" in probe.stderr:  # the job server answers
                break
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"ray start --head did not come up: {log.read_text()[-2000:]}")
            time.sleep(2)
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # --block: the cluster stops with the process that started it
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_submit_wait_then_status_and_logs(head, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    store = tmp_path / "store"
    proc = _cli(
        "submit",
        "spec.yaml",
        "--address",
        head,
        "--store",
        str(store),
        "--wait",
        "--progress-interval",
        "0.5",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    job_id = proc.stdout.strip().splitlines()[0]
    assert "SUCCEEDED" in proc.stderr
    rows = ResultsStore(store).scan_trials().collect()
    assert rows.height == 4 and rows["trial_id"].n_unique() == 4 and set(rows["status"]) == {"done"}
    status = _cli("status", job_id, "--address", head, cwd=tmp_path)
    assert status.returncode == 0 and status.stdout.startswith("SUCCEEDED")
    logs = _cli("logs", job_id, "--address", head, cwd=tmp_path)
    assert logs.returncode == 0 and "run " in logs.stdout and "done 4" in logs.stdout
    # the job's log is not a terminal: plain progress lines, the last one at 4 of 4 trials
    progress = [parse_progress_line(ln) for ln in logs.stdout.splitlines() if ln.startswith("progress: ")]
    assert len(progress) >= 2 and progress[-1]["finished"] == progress[-1]["total"] == 4
    assert "progress: " in proc.stderr  # --wait followed them as they came


def test_bad_spec_is_refused_before_submitting_and_unknown_jobs_exit_2(head, tmp_path):
    (tmp_path / "bad.yaml").write_text(SPEC.replace("m: [16, 32]", "m: [0]"))
    proc = _cli("submit", "bad.yaml", "--address", head, "--store", str(tmp_path / "s"), cwd=tmp_path)
    assert proc.returncode == 2 and "grid.m" in proc.stderr
    (tmp_path / "ok.yaml").write_text(SPEC)
    relative = _cli("submit", "ok.yaml", "--address", head, "--store", "relstore", cwd=tmp_path)
    assert relative.returncode == 2 and "absolute path" in relative.stderr
    assert _cli("cancel", "no-such-job", "--address", head, cwd=tmp_path).returncode == 2
    dead = _cli("status", "x", "--address", f"http://127.0.0.1:{_free_port()}", cwd=tmp_path)
    assert dead.returncode == 2 and "no Ray job server answers" in dead.stderr


def test_cancel_stops_a_running_job_and_its_run_is_resumable(head, tmp_path):
    (tmp_path / "long.yaml").write_text(
        SPEC.replace("seeds: 2", "seeds: 4")
        .replace("m: [16, 32]", "m: [16, 32, 64, 128]")
        .replace("max_epochs: 20", "max_epochs: 3000")
        .replace("s: 1,", "s: 3,")
        .replace("T: [8]", "T: [8, 16, 32, 64]")
        .replace("pack_size: 2", "pack_size: 1, flush_rows: 1, flush_s: 0.2")
    )
    store = tmp_path / "store"
    proc = _cli("submit", "long.yaml", "--address", head, "--store", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job_id = proc.stdout.strip()
    deadline = time.time() + 300
    while not list(store.rglob("part-*.parquet")) and time.time() < deadline:  # some trials are done
        time.sleep(1)
    cancel = _cli("cancel", job_id, "--address", head, cwd=tmp_path)
    if "stopping" not in cancel.stdout:  # say why the job was not running
        state = _cli("status", job_id, "--address", head, cwd=tmp_path).stdout
        log = _cli("logs", job_id, "--address", head, cwd=tmp_path).stdout
        pytest.fail(f"the job was not running when cancelled: {state}\n{log[-3000:]}")
    assert cancel.returncode == 0
    while time.time() < deadline:
        state = _cli("status", job_id, "--address", head, cwd=tmp_path).stdout
        if not state.startswith(("RUNNING", "PENDING")):
            break
        time.sleep(1)
    assert state.startswith("STOPPED")
    results = ResultsStore(store)
    sweep, run_id = results.latest_run()
    deadline = time.time() + 60  # the driver records the interruption as it exits
    while results.read_run(sweep, run_id)["status"] == "running" and time.time() < deadline:
        time.sleep(1)
    assert results.read_run(sweep, run_id)["status"] == "interrupted"
    assert 0 < results.scan_trials().collect().height < 64


# Ray's own client, in a fresh process (Ray reads its token settings once per process): each
# ("submit", entrypoint), ("status" | "logs" | "stop", job id) becomes its answer or {"error": ...}.
_SDK = """
import json, sys
from attnsweep.orchestrator.ray_auth import use_token_if_present as _use_token_if_present
_use_token_if_present()
from ray.job_submission import JobSubmissionClient
client = JobSubmissionClient(sys.argv[1])
def answer(op, arg):
    if op == "submit":
        return client.submit_job(entrypoint=arg)
    if op == "status":
        info = client.get_job_info(arg)
        return [info.status.value, info.message or ""]
    return client.get_job_logs(arg) if op == "logs" else client.stop_job(arg)
out = []
for op, arg in json.loads(sys.argv[2]):
    try:
        out.append(answer(op, arg))
    except Exception as exc:
        out.append({"error": str(exc)})
print(json.dumps(out))
"""


def _sdk(address: str, *calls: tuple[str, str]) -> list:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.run(
        [sys.executable, "-c", _SDK, address, json.dumps(calls)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _wait_for(address: str, job_id: str, states: set[str], timeout_s: float = 180) -> str:
    deadline = time.time() + timeout_s
    while (state := jobs.status(address, job_id)[0]) not in states and time.time() < deadline:
        time.sleep(0.5)
    return state


@pytest.fixture(scope="module")
def echo_job(head):
    """A job submitted with Ray's client that printed a line and succeeded."""
    (job_id,) = _sdk(head, ("submit", "echo attnsweep-rest-check"))
    assert _wait_for(head, job_id, {"SUCCEEDED", "FAILED", "STOPPED"}) == "SUCCEEDED"
    return job_id


def test_status_logs_and_cancel_answer_as_rays_client_does(head, echo_job):
    sleepers = _sdk(head, ("submit", "sleep 600"), ("submit", "sleep 600"))
    try:
        assert all(_wait_for(head, job, {"RUNNING", "FAILED"}) == "RUNNING" for job in sleepers)
        unknown = "raysubmit_noSuchJob0123"
        sdk_status, sdk_logs, sdk_running, *sdk_unknown = _sdk(
            head,
            ("status", echo_job),
            ("logs", echo_job),
            ("status", sleepers[0]),
            ("status", unknown),
            ("logs", unknown),
            ("stop", unknown),
        )
        assert jobs.status(head, echo_job) == tuple(sdk_status) == ("SUCCEEDED", sdk_status[1])
        written: list[str] = []
        jobs.logs(head, echo_job, write=written.append)
        assert written == [sdk_logs] and "attnsweep-rest-check" in sdk_logs
        assert jobs.status(head, sleepers[0]) == tuple(sdk_running) == ("RUNNING", sdk_running[1])
        assert all("404" in said["error"] and "does not exist" in said["error"] for said in sdk_unknown)
        for call in (jobs.status, lambda a, j: jobs.logs(a, j, write=written.append), jobs.cancel):
            with pytest.raises(RunError) as caught:
                call(head, unknown)
            assert str(caught.value) == f"no job {unknown!r} at {head}"

        assert jobs.cancel(head, sleepers[0]) is True  # running: stopped, as Ray's client stops the other
        assert _sdk(head, ("stop", sleepers[1])) == [True]
        assert all(_wait_for(head, job, {"STOPPED", "FAILED", "SUCCEEDED"}) == "STOPPED" for job in sleepers)
        sdk_after = _sdk(
            head,
            ("status", sleepers[0]),
            ("status", sleepers[1]),
            ("stop", sleepers[0]),
            ("stop", echo_job),
        )
        assert [list(jobs.status(head, job)) for job in sleepers] == sdk_after[:2]
        assert [jobs.cancel(head, sleepers[0]), jobs.cancel(head, echo_job)] == sdk_after[2:] == [False, False]
    finally:
        for job in sleepers:
            jobs.cancel(head, job)


_NO_RAY = """
import json, sys
from attnsweep.orchestrator import jobs
address, job_id = sys.argv[1:]
written = []
jobs.logs(address, job_id, write=written.append)
try:
    jobs.status(address, "raysubmit_noSuchJob0123")
except jobs.RunError as exc:
    unknown = str(exc)
print(json.dumps(dict(status=jobs.status(address, job_id), logs=written, stopped=jobs.cancel(address, job_id),
                      unknown=unknown, ray=sorted(m for m in sys.modules if m == "ray" or m.startswith("ray.")))))
"""


def test_status_logs_and_cancel_never_import_ray(head, echo_job):
    proc = subprocess.run(
        [sys.executable, "-c", _NO_RAY, head, echo_job],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    assert said["ray"] == []
    assert said["status"][0] == "SUCCEEDED" and "attnsweep-rest-check" in said["logs"][0] and said["stopped"] is False
    assert said["unknown"] == f"no job 'raysubmit_noSuchJob0123' at {head}"
