"""Sweeps as Ray jobs: submit a spec to a cluster's job server, follow it, cancel it.

The job's working directory (Ray's runtime-environment ``working_dir``) holds only the
spec and this project's four source packages, copied from the submitting checkout: the
cluster runs the submitter's code (its git commit is recorded in the run as usual) and
never sees private files, virtual environments or local stores. Third-party packages
(torch, ray, polars...) come from the cluster's own environment (cluster.yaml installs
them).

Every call to the job server has a deadline (``timeout_s``, default :data:`TIMEOUT_S`; the
CLI's ``--timeout`` or ``ATTNSWEEP_TIMEOUT``): a server that accepts the connection and
never answers ends the command with a :class:`RunError` naming the address, instead of a
hang (:mod:`orchestrator.deadline`). Following a log (``logs --follow``) has the deadline for reaching
the server and finding the job; the stream itself then lasts as long as the job.

The job server of ``ray start --head`` uses token authentication; the client finds the
token as Ray does (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``),
and the token never appears in commands, specs or logs.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.deadline import TIMEOUT_S, within
from orchestrator.errors import RunError
from orchestrator.spec import load_spec

PACKAGES = ("orchestrator", "workers", "results", "tasks")
ROOT = Path(__file__).resolve().parent.parent
# What the job's command falls back to when no --store is given: the store the cluster
# itself names (cluster.yaml exports ATTNSWEEP_STORE on every node).
CLUSTER_STORE = '"${ATTNSWEEP_STORE:?set ATTNSWEEP_STORE on the cluster or give --store}"'
def client(address: str, timeout_s: float = TIMEOUT_S):
    """A ``JobSubmissionClient`` for the job server at ``address`` (``http://host:8265``).

    Raises:
        RunError: nothing answers there within ``timeout_s`` seconds, or it refuses the client.
    """
    _use_token_if_present()
    from ray.job_submission import JobSubmissionClient

    try:
        return within(timeout_s, f"the job server at {address}", lambda: JobSubmissionClient(address))
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
        raise RunError(f"no Ray job server answers at {address}: {exc}; start one with `ray start --head` "
                       "or forward it with `ray dashboard cluster.yaml`") from exc


def submit(spec_path: Path, address: str, store: str | None = None, submission_id: str | None = None,
           timeout_s: float = TIMEOUT_S) -> str:
    """Validate ``spec_path`` here, then submit it as a Ray job; returns the job id.

    Args:
        spec_path: the sweep spec.
        address: the job server, ``http://host:port``.
        store: the results store as the cluster sees it (shared path or URI); None: the
            cluster's ``ATTNSWEEP_STORE``.
        submission_id: a job id of your own (default: Ray's).
        timeout_s: the deadline of each call to the job server, in seconds (the upload of
            the working directory included).

    Raises:
        SpecError: the spec is invalid (nothing is submitted).
        RunError: the job server cannot be reached, does not answer in time, or refuses the job.
    """
    spec = load_spec(spec_path)
    if store is not None and "://" not in store and not store.startswith("/"):
        raise RunError(f"--store {store!r}: give an absolute path or a URI as the cluster sees it; a relative path "
                       "would land in the job's temporary working directory and be lost")
    jobs = client(address, timeout_s)
    staging = Path(tempfile.mkdtemp(prefix="attnsweep-job-"))
    try:
        for package in PACKAGES:
            shutil.copytree(ROOT / package, staging / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (staging / "spec.yaml").write_text(spec.source_yaml)
        target = shlex.quote(store) if store else CLUSTER_STORE
        # No figures on the cluster (they would land in the job's temporary directory):
        # analyze the run from any machine that reaches the store.
        entrypoint = f"python -m orchestrator.cli run spec.yaml --address auto --store {target} --no-analyze"
        # A head that has just started answers before its job agent is ready ("try again later").
        for wait_s in (1, 2, 4, 8, 16, 32, None):
            try:
                return within(timeout_s, f"the job server at {address}", lambda: jobs.submit_job(
                    entrypoint=entrypoint, submission_id=submission_id,
                    runtime_env={"working_dir": str(staging)},
                    metadata={"sweep": spec.name, "spec_hash": spec.spec_hash()},
                ))
            except RunError:
                raise
            except Exception as exc:  # noqa: BLE001
                if wait_s is None or "try again later" not in str(exc):
                    raise RunError(f"the job server at {address} refused the job: {exc}") from exc
                time.sleep(wait_s)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def status(address: str, job_id: str, timeout_s: float = TIMEOUT_S) -> tuple[str, str]:
    """``(status, message)`` of a job: PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED.

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    jobs = client(address, timeout_s)
    try:
        info = within(timeout_s, f"the job server at {address}", lambda: jobs.get_job_info(job_id))
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"no job {job_id!r} at {address}: {exc}") from exc
    return str(info.status.value if hasattr(info.status, "value") else info.status), info.message or ""


def logs(address: str, job_id: str, follow: bool = False, write: Callable[[str], None] = print,
         timeout_s: float = TIMEOUT_S) -> None:
    """Write a job's log (``follow``: stream it until the job ends).

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    jobs = client(address, timeout_s)
    try:
        if not follow:
            write(within(timeout_s, f"the job server at {address}", lambda: jobs.get_job_logs(job_id)))
            return
        within(timeout_s, f"the job server at {address}", lambda: jobs.get_job_info(job_id))  # the job exists: then stream

        async def tail() -> None:
            async for chunk in jobs.tail_job_logs(job_id):
                write(chunk)

        asyncio.run(tail())
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"cannot read the log of job {job_id!r} at {address}: {exc}") from exc


def cancel(address: str, job_id: str, timeout_s: float = TIMEOUT_S) -> bool:
    """Stop a job; False if it had already ended.

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    jobs = client(address, timeout_s)
    try:
        return bool(within(timeout_s, f"the job server at {address}", lambda: jobs.stop_job(job_id)))
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"cannot stop job {job_id!r} at {address}: {exc}") from exc


def _use_token_if_present() -> None:
    """Turn on Ray's token authentication in this client when a token is there to use."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"
