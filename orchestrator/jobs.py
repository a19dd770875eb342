"""Sweeps as Ray jobs: submit a spec to a cluster's job server, follow it, cancel it.

The job's working directory holds only the spec and this project's source, and its command
runs the spec there (:mod:`orchestrator.job_staging`): the cluster runs the submitter's code
and never sees private files, virtual environments or local stores.

Every call to the job server has a deadline (``timeout_s``, default :data:`TIMEOUT_S`; the
CLI's ``--timeout`` or ``ATTNSWEEP_TIMEOUT``): a server that accepts the connection and
never answers ends the command with a :class:`RunError` naming the address, instead of a
hang (:mod:`orchestrator.deadline`). Following a log (``logs --follow``) has the deadline for reaching
the server and finding the job; the stream itself then lasts as long as the job.

The job server of ``ray start --head`` uses token authentication; the client finds the
token as Ray does (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``),
and the token never appears in commands, specs, logs or error messages.

``status``, ``cancel`` and ``logs`` (without ``--follow``) call the job server's REST API
(https://docs.ray.io/en/latest/cluster/running-applications/job-submission/rest.html)
with the standard library (:mod:`orchestrator.job_answers` reads the answers), so that these
commands answer without importing Ray (about 1.5 s of start-up). ``submit`` and ``logs --follow`` use Ray's ``JobSubmissionClient``
(the package upload and the log stream are Ray's own protocols), imported only there.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

from attnsweep.orchestrator.deadline import TIMEOUT_S, within
from attnsweep.orchestrator.errors import RunError
from attnsweep.orchestrator.job_answers import (
    START_HINT,
    base_url,
    http_answer,
    json_object,
    last_line,
    printable,
    printable_log,
    quote_answer,
    read_capped,
    said,
    shown,
)
from attnsweep.orchestrator.job_staging import entrypoint, stage_sources
from attnsweep.orchestrator.ray_auth import auth_headers, token_advice, use_token_if_present


def client(address: str, timeout_s: float = TIMEOUT_S, limit_s: float | None = None):
    """A ``JobSubmissionClient`` for the job server at ``address`` (``http://host:8265``)
    whose every answer is read with a cap (:data:`orchestrator.job_answers.ANSWER_BYTES`) and every socket read
    with ``timeout_s`` (``limit_s``: the whole command's limit, for the message).

    Raises:
        RunError: nothing answers there within ``timeout_s`` seconds, or it refuses the client.
    """
    base_url(address)  # a malformed address is one clear error before Ray sees it
    use_token_if_present()
    capped = _capped_client_class()
    try:
        return within(
            timeout_s,
            f"the job server at {shown(address)}",
            lambda: capped(address, timeout_s),
            limit_s,
        )
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
        raise RunError(
            f"no Ray job server answers at {shown(address)}: {said(exc)}; start one with `ray start --head` "
            "or forward it with `ray dashboard cluster.yaml`"
        ) from exc


def _capped_client_class():
    """Ray's ``JobSubmissionClient`` with its HTTP answers read through :func:`read_capped`.

    Ray's client reads whole answers with ``requests`` and sets no socket timeout; a server
    that sends an endless body would grow this process without bound. Every request it
    makes goes through ``_do_request``: there the answer is streamed and the body read by a
    response hook, which runs before Ray (or ``requests``) touches the content.
    """
    from ray.job_submission import JobSubmissionClient

    class CappedJobSubmissionClient(JobSubmissionClient):
        def __init__(self, address: str, timeout_s: float):
            self._attnsweep_timeout_s = timeout_s
            self._attnsweep_address = address
            super().__init__(address)

        def _do_request(self, method, endpoint, **kwargs):  # noqa: D102 - Ray's, with a cap and a timeout
            def cap(response, *args, **hook_kwargs):
                response._content = read_capped(
                    response.headers.get("content-length"),
                    lambda n: next(response.iter_content(n), b""),
                    self._attnsweep_address,
                )
                return response

            kwargs.update(stream=True, hooks={"response": [cap]})
            kwargs.setdefault("timeout", self._attnsweep_timeout_s)
            return super()._do_request(method, endpoint, **kwargs)

    return CappedJobSubmissionClient


def submit(
    spec_path: Path,
    address: str,
    store: str | None = None,
    submission_id: str | None = None,
    timeout_s: float = TIMEOUT_S,
    progress_interval_s: float | None = None,
    overrides: Sequence[str] = (),
) -> str:
    """Validate ``spec_path`` here, then submit it as a Ray job; returns the job id.

    Args:
        spec_path: the sweep spec.
        address: the job server, ``http://host:port``.
        store: the results store as the cluster sees it (shared path or URI); None: the
            cluster's ``ATTNSWEEP_STORE``.
        submission_id: a job id of your own (default: Ray's).
        timeout_s: the deadline of each call to the job server, in seconds (the upload of
            the working directory included).
        progress_interval_s: seconds between the progress lines in the job's log (None:
            the driver's default, 10 s).
        overrides: ``PATH=VALUE`` texts (``--set``) put into the spec; the job runs the
            resolved spec.

    Raises:
        SpecError: the spec or an override is invalid (nothing is submitted).
        RunError: the job server cannot be reached, does not answer in time, or refuses the job.
    """
    from attnsweep.orchestrator.spec import (
        load_spec,  # pydantic, numpy: only the command that reads a spec pays for them
    )

    started = time.monotonic()
    spec = load_spec(spec_path, overrides=overrides)
    if store is not None and "://" not in store and not store.startswith("/"):
        raise RunError(
            f"--store {store!r}: give an absolute path or a URI as the cluster sees it; a relative path "
            "would land in the job's temporary working directory and be lost"
        )

    def left() -> float:
        return timeout_s - (time.monotonic() - started)

    jobs = client(address, max(left(), 0.1), timeout_s)
    staging = Path(tempfile.mkdtemp(prefix="attnsweep-job-"))
    try:
        stage_sources(staging)
        (staging / "spec.yaml").write_text(spec.source_yaml)
        command = entrypoint(store, progress_interval_s)
        # A head that has just started answers before its job agent is ready ("try again later"):
        # retried, within the one deadline of the whole command.
        agentless = False
        for wait_s in (1, 2, 4, 8, 16, 32, None):
            try:
                return within(
                    max(left(), 0.1),
                    f"the job server at {shown(address)}",
                    lambda: jobs.submit_job(
                        entrypoint=command,
                        submission_id=submission_id,
                        runtime_env={"working_dir": str(staging)},
                        metadata={"sweep": spec.name, "spec_hash": spec.spec_hash()},
                    ),
                    timeout_s,
                )
            except RunError as exc:
                if agentless and str(exc).startswith(
                    "no answer"
                ):  # the deadline passed while the server still had no agent
                    raise RunError(_no_agent(address, timeout_s)) from None
                raise
            except RecursionError:
                raise RunError(
                    f"the job server at {shown(address)} answered with JSON nested too deeply to be a job "
                    "server's answer"
                ) from None
            except Exception as exc:  # noqa: BLE001
                agentless = _is_agentless(str(exc))
                if wait_s is None or not agentless and "try again later" not in str(exc):
                    if agentless:
                        raise RunError(_no_agent(address, timeout_s)) from None
                    raise RunError(f"the job server at {shown(address)} refused the job: {said(exc)}") from exc
                if left() <= wait_s:
                    if agentless:
                        raise RunError(_no_agent(address, timeout_s)) from None
                    raise RunError(
                        f"the job server at {shown(address)} did not take the job within {timeout_s:g} s: {said(exc)}"
                    ) from exc
                time.sleep(wait_s)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _is_agentless(text: str) -> bool:
    """Whether a job server's answer says it has no dashboard agent to hand the job to (Ray's
    job head answers so to a submit, and with a TimeoutError traceback to a stop)."""
    return "No available agent" in text or "Failed to get head node agent" in text


def _no_agent(address: str, timeout_s: float) -> str:
    """The message for a job server whose head has no dashboard agent: the cause and what to check."""
    return (
        f'the job server at {shown(address)} has no dashboard agent to run jobs (Ray: "No available agent"; '
        f"none came within --timeout {timeout_s:g} s): the head's dashboard agent is not running, most often because its "
        "port is taken by another process. Check `ray status` and the head's "
        "logs/dashboard_agent.log (in /tmp/ray/session_latest, or under RAY_TMPDIR), then restart the head with "
        "free ports (`attnsweep head start` picks one for every port; or ray start --head "
        "--dashboard-agent-listen-port=PORT --dashboard-agent-grpc-port=PORT)"
    )


def status(address: str, job_id: str, timeout_s: float = TIMEOUT_S) -> tuple[str, str]:
    """``(status, message)`` of a job: PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED.

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    info = _job_call(address, job_id, "GET", "", "read the status of", timeout_s)
    if not isinstance(info.get("status"), str):
        raise RunError(f"the job server at {shown(address)} gave no status for job {job_id!r}: {quote_answer(info)}")
    message = info.get("message") or ""
    # A failed job's message holds its last log lines: kept as lines, as a log is.
    return printable(info["status"]), printable_log(message if isinstance(message, str) else repr(message))


def logs(
    address: str,
    job_id: str,
    follow: bool = False,
    write: Callable[[str], None] = print,
    timeout_s: float = TIMEOUT_S,
) -> None:
    """Write a job's log (``follow``: stream it until the job ends).

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    if not follow:
        answer = _job_call(address, job_id, "GET", "/logs", "read the log of", timeout_s)
        if not isinstance(answer.get("logs"), str):
            raise RunError(f"the job server at {shown(address)} gave no log for job {job_id!r}: {quote_answer(answer)}")
        write(printable_log(answer["logs"]))
        return
    import asyncio

    started = time.monotonic()
    jobs = client(address, timeout_s)
    try:
        # One deadline for reaching the server and finding the job; the stream then lasts as long as the job.
        within(
            max(timeout_s - (time.monotonic() - started), 0.1),
            f"the job server at {shown(address)}",
            lambda: jobs.get_job_info(job_id),
            timeout_s,
        )

        async def tail() -> None:
            async for chunk in jobs.tail_job_logs(job_id):
                write(printable_log(chunk))

        asyncio.run(tail())
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"cannot read the log of job {job_id!r} at {shown(address)}: {said(exc)}") from exc


def cancel(address: str, job_id: str, timeout_s: float = TIMEOUT_S) -> bool:
    """Stop a job; False if it had already ended.

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    answer = _job_call(address, job_id, "POST", "/stop", "stop", timeout_s)
    if not isinstance(answer.get("stopped"), bool):
        raise RunError(
            f"the job server at {shown(address)} did not say whether it stopped job {job_id!r}: {quote_answer(answer)}"
        )
    return answer["stopped"]


def _job_call(address: str, job_id: str, method: str, tail: str, doing: str, timeout_s: float) -> dict:
    """The JSON object the job server answers to ``method /api/jobs/{job_id}{tail}``.

    As Ray's ``JobSubmissionClient`` does (``dashboard_sdk.py``): ``host:port`` means
    ``http://host:port``, trailing slashes are dropped, the token goes in the
    ``authorization: Bearer`` header. Unlike it, the job id is percent-escaped (an id with
    ``/`` or ``?`` names no other endpoint) and redirects are not followed (the token goes
    to ``address`` and nowhere else). The whole exchange, a confirming ``/api/version``
    after a 404 included, has one deadline of ``timeout_s`` seconds; each socket read has it
    too, so the abandoned thread of a server that never answers ends as well.

    Args:
        doing: what the call does, for messages: ``"stop"`` gives "cannot stop job 'X' at ...".

    Raises:
        RunError: no such job (404 from a server that is a Ray job server), nothing or no Ray
            job server at ``address``, no answer in time, a token refused, or another error
            answer (its last line quoted).
    """
    base = base_url(address)
    if job_id in (
        "",
        ".",
        "..",
    ):  # no job the API can name: the server resolves "." and ".." away, %2E too
        raise RunError(f"no job {job_id!r} at {shown(address)}: give the job id that `attnsweep submit` printed")
    job_id_path = urllib.parse.quote(job_id, safe="")
    headers, token_source = auth_headers()

    def exchange() -> dict:
        code, body = http_answer(method, f"{base}/api/jobs/{job_id_path}{tail}", headers, address, timeout_s)
        if code == 200:
            return json_object(body, address)
        if code == 404:
            version_code, version_body = http_answer("GET", f"{base}/api/version", headers, address, timeout_s)
            if version_code == 200 and "ray_version" in json_object(version_body, address, strict=False):
                raise RunError(f"no job {job_id!r} at {shown(address)}")
            raise RunError(
                f"no Ray job server answers at {shown(address)}: it answers HTTP 404 to /api/jobs and "
                f"{version_code} to /api/version; {START_HINT}"
            )
        if code == 401:
            raise RunError(f"the job server at {shown(address)} wants a token (HTTP 401): {token_advice()}")
        if code == 403:
            raise RunError(
                f"the job server at {shown(address)} refused the token from {token_source} (HTTP 403); "
                "give the token of this cluster"
            )
        if _is_agentless(body[-4096:].decode("utf-8", "replace")):
            raise RunError(_no_agent(address, timeout_s))
        raise RunError(f"cannot {doing} job {job_id!r} at {shown(address)}: HTTP {code}: {printable(last_line(body))}")

    return within(timeout_s, f"the job server at {shown(address)}", exchange)
