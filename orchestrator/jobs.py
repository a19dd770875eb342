"""Sweeps as Ray jobs: submit a spec to a cluster's job server, follow it, cancel it.

The job's working directory (Ray's runtime-environment ``working_dir``) holds only the
spec and this project's source, copied from the submitting checkout (or installation) in
the installed layout, ``attnsweep/`` with its packages inside (:func:`stage_sources`): the
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
and the token never appears in commands, specs, logs or error messages.

``status``, ``cancel`` and ``logs`` (without ``--follow``) call the job server's REST API
(https://docs.ray.io/en/latest/cluster/running-applications/job-submission/rest.html)
with the standard library, so that these commands answer without importing Ray (about
1.5 s of start-up). ``submit`` and ``logs --follow`` use Ray's ``JobSubmissionClient``
(the package upload and the log stream are Ray's own protocols), imported only there.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import shlex
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from attnsweep.orchestrator.deadline import TIMEOUT_S, within
from attnsweep.orchestrator.errors import RunError

PACKAGES = ("presentation", "orchestrator", "stats", "results", "workers", "tasks")
"""The packages inside the ``attnsweep`` namespace (folders at the top of the repository)."""
# What the job's command falls back to when no --store is given: the store the cluster
# itself names (cluster.yaml exports ATTNSWEEP_STORE on every node).
CLUSTER_STORE = '"${ATTNSWEEP_STORE:?set ATTNSWEEP_STORE on the cluster or give --store}"'
ANSWER_CHARS = 300
"""Characters of a job server's error answer that a message quotes at most (its last line)."""


def client(address: str, timeout_s: float = TIMEOUT_S):
    """A ``JobSubmissionClient`` for the job server at ``address`` (``http://host:8265``).

    Raises:
        RunError: nothing answers there within ``timeout_s`` seconds, or it refuses the client.
    """
    _base_url(address)  # a malformed address is one clear error before Ray sees it
    _use_token_if_present()
    from ray.job_submission import JobSubmissionClient

    try:
        return within(timeout_s, f"the job server at {shown(address)}", lambda: JobSubmissionClient(address))
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
        raise RunError(f"no Ray job server answers at {shown(address)}: {shown(exc)}; start one with `ray start --head` "
                       "or forward it with `ray dashboard cluster.yaml`") from exc


def submit(spec_path: Path, address: str, store: str | None = None, submission_id: str | None = None,
           timeout_s: float = TIMEOUT_S, progress_interval_s: float | None = None) -> str:
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

    Raises:
        SpecError: the spec is invalid (nothing is submitted).
        RunError: the job server cannot be reached, does not answer in time, or refuses the job.
    """
    from attnsweep.orchestrator.spec import load_spec  # pydantic, numpy: only the command that reads a spec pays for them

    spec = load_spec(spec_path)
    if store is not None and "://" not in store and not store.startswith("/"):
        raise RunError(f"--store {store!r}: give an absolute path or a URI as the cluster sees it; a relative path "
                       "would land in the job's temporary working directory and be lost")
    jobs = client(address, timeout_s)
    staging = Path(tempfile.mkdtemp(prefix="attnsweep-job-"))
    try:
        stage_sources(staging)
        (staging / "spec.yaml").write_text(spec.source_yaml)
        target = shlex.quote(store) if store else CLUSTER_STORE
        # No figures on the cluster (they would land in the job's temporary directory):
        # analyze the run from any machine that reaches the store.
        entrypoint = f"python -m attnsweep.cli run spec.yaml --address auto --store {target} --no-analyze"
        if progress_interval_s is not None:
            entrypoint += f" --progress-interval {float(progress_interval_s):g}"
        # A head that has just started answers before its job agent is ready ("try again later").
        for wait_s in (1, 2, 4, 8, 16, 32, None):
            try:
                return within(timeout_s, f"the job server at {shown(address)}", lambda: jobs.submit_job(
                    entrypoint=entrypoint, submission_id=submission_id,
                    runtime_env={"working_dir": str(staging)},
                    metadata={"sweep": spec.name, "spec_hash": spec.spec_hash()},
                ))
            except RunError:
                raise
            except Exception as exc:  # noqa: BLE001
                if wait_s is None or "try again later" not in str(exc):
                    raise RunError(f"the job server at {shown(address)} refused the job: {shown(exc)}") from exc
                time.sleep(wait_s)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def stage_sources(staging: Path) -> Path:
    """Copy the source into ``staging`` as it installs: ``attnsweep/`` (its own modules) with
    ``attnsweep/orchestrator``, ``attnsweep/results``... inside, wherever each folder lives
    here (at the top of a checkout, or inside ``attnsweep/`` when installed from a wheel).
    ``python -m attnsweep.cli`` then runs in ``staging``; returns ``staging / "attnsweep"``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    top = staging / "attnsweep"
    # Found, not imported: the face (attnsweep/__init__.py) sits above this package.
    shutil.copytree(Path(importlib.util.find_spec("attnsweep").origin).parent, top, ignore=ignore,
                    dirs_exist_ok=True)
    for package in PACKAGES:
        source = Path(importlib.util.find_spec(f"attnsweep.{package}").origin).parent
        if not (top / package).exists():  # a wheel's attnsweep/ already holds them
            shutil.copytree(source, top / package, ignore=ignore)
    return top


def status(address: str, job_id: str, timeout_s: float = TIMEOUT_S) -> tuple[str, str]:
    """``(status, message)`` of a job: PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED.

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    info = _job_call(address, job_id, "GET", "", "read the status of", timeout_s)
    if not isinstance(info.get("status"), str):
        raise RunError(f"the job server at {shown(address)} gave no status for job {job_id!r}: {_quote_answer(info)}")
    message = info.get("message") or ""
    return printable(info["status"]), printable(message if isinstance(message, str) else repr(message))


def printable(text: str) -> str:
    """``text`` from a server as one line a terminal shows as it is: control and format
    characters (escape sequences, carriage returns, line breaks, bidi overrides) written as
    escapes (``\\x1b``), so an answer cannot move the cursor, recolour or rewrite the screen."""
    import unicodedata

    return "".join(ch if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp") else ch.encode("unicode_escape")
                   .decode("ascii") for ch in text)


def logs(address: str, job_id: str, follow: bool = False, write: Callable[[str], None] = print,
         timeout_s: float = TIMEOUT_S) -> None:
    """Write a job's log (``follow``: stream it until the job ends).

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    if not follow:
        answer = _job_call(address, job_id, "GET", "/logs", "read the log of", timeout_s)
        if not isinstance(answer.get("logs"), str):
            raise RunError(f"the job server at {shown(address)} gave no log for job {job_id!r}: {_quote_answer(answer)}")
        write(answer["logs"])
        return
    import asyncio

    jobs = client(address, timeout_s)
    try:
        within(timeout_s, f"the job server at {shown(address)}", lambda: jobs.get_job_info(job_id))  # the job exists: then stream

        async def tail() -> None:
            async for chunk in jobs.tail_job_logs(job_id):
                write(chunk)

        asyncio.run(tail())
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"cannot read the log of job {job_id!r} at {shown(address)}: {shown(exc)}") from exc


def cancel(address: str, job_id: str, timeout_s: float = TIMEOUT_S) -> bool:
    """Stop a job; False if it had already ended.

    Raises:
        RunError: no such job, or no job server (none answering within ``timeout_s`` seconds).
    """
    answer = _job_call(address, job_id, "POST", "/stop", "stop", timeout_s)
    if not isinstance(answer.get("stopped"), bool):
        raise RunError(f"the job server at {shown(address)} did not say whether it stopped job {job_id!r}: "
                       f"{_quote_answer(answer)}")
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
    base = _base_url(address)
    if job_id in ("", ".", ".."):  # no job the API can name: the server resolves "." and ".." away, %2E too
        raise RunError(f"no job {job_id!r} at {shown(address)}: give the job id that `attnsweep submit` printed")
    job_id_path = urllib.parse.quote(job_id, safe="")
    headers, token_source = _auth_headers()

    def exchange() -> dict:
        code, body = _http(method, f"{base}/api/jobs/{job_id_path}{tail}", headers, address, timeout_s)
        if code == 200:
            return _json_object(body, address)
        if code == 404:
            version_code, version_body = _http("GET", f"{base}/api/version", headers, address, timeout_s)
            if version_code == 200 and "ray_version" in _json_object(version_body, address, strict=False):
                raise RunError(f"no job {job_id!r} at {shown(address)}")
            raise RunError(f"no Ray job server answers at {shown(address)}: it answers HTTP 404 to /api/jobs and "
                           f"{version_code} to /api/version; {_START_HINT}")
        if code == 401:
            raise RunError(f"the job server at {shown(address)} wants a token (HTTP 401): {_token_advice()}")
        if code == 403:
            raise RunError(f"the job server at {shown(address)} refused the token from {token_source} (HTTP 403); "
                           "give the token of this cluster")
        raise RunError(f"cannot {doing} job {job_id!r} at {shown(address)}: HTTP {code}: {_last_line(body)}")

    return within(timeout_s, f"the job server at {shown(address)}", exchange)


_START_HINT = "start one with `ray start --head` or forward it with `ray dashboard cluster.yaml`"


def _base_url(address: str) -> str:
    """``address`` as the URL that the API paths are appended to (``http://`` when no scheme)."""
    url = address.strip()
    if "://" not in url:
        url = f"http://{url}"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what finds "host:notaport"
    except ValueError as exc:
        raise RunError(f"--address {shown(address)!r}: not a URL ({shown(exc)}); give the job server as http://host:port "
                       "(or https://)") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RunError(f"--address {shown(address)!r}: give the job server as http://host:port (or https://)")
    return url.rstrip("/")


def shown(address: str) -> str:
    """``address`` as messages print it: a password in it (``http://user:secret@host``)
    replaced by ``***``, so an error in a shared log does not give it away."""
    return re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", str(address))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are answers, not followed: a job server does not redirect, and urllib would
    send the ``authorization`` header on to wherever a redirect points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


def _http(method: str, url: str, headers: dict[str, str], address: str, timeout_s: float) -> tuple[int, bytes]:
    """``(status code, body)`` of one request; error statuses are answers too.

    Raises:
        RunError: nothing (or nothing that speaks HTTP) answers at ``address``, or a socket
            read waited ``timeout_s`` seconds.
    """
    request = urllib.request.Request(url, method=method, headers={"accept": "application/json", **headers},
                                     data=b"" if method == "POST" else None)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        try:
            with opener.open(request, timeout=timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as answer:
            with answer:
                return answer.code, answer.read()
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            # The words of orchestrator.deadline.within: a socket read that timed out is the
            # same missed deadline, whichever of the two noticed it first.
            raise RunError(f"no answer from the job server at {shown(address)} within {timeout_s:g} s; check the address "
                           "and that the server is up (raise the limit with --timeout or ATTNSWEEP_TIMEOUT)") from None
        raise RunError(f"no Ray job server answers at {shown(address)}: {str(reason) or type(reason).__name__}; "
                       f"{_START_HINT}") from exc


def _json_object(body: bytes, address: str, strict: bool = True) -> dict:
    """``body`` as a JSON object; ``strict=False``: ``{}`` when it is not one.

    Raises:
        RunError: (``strict``) the body is not a JSON object.
    """
    try:
        value = json.loads(body.decode("utf-8"))
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    if not strict:
        return {}
    raise RunError(f"the job server at {shown(address)} answered with something that is not a JSON object: "
                   f"{_last_line(body)}")


def _last_line(body: bytes) -> str:
    """The last non-blank line of an answer (a server's traceback ends with its error), capped."""
    lines = [line.strip() for line in body.decode("utf-8", "replace").splitlines() if line.strip()]
    line = lines[-1] if lines else "(empty answer)"
    return line if len(line) <= ANSWER_CHARS else line[:ANSWER_CHARS] + "..."


def _quote_answer(answer: dict) -> str:
    """A JSON answer that lacks the expected field, as a message quotes it (capped)."""
    return _last_line(json.dumps(answer).encode())


def _auth_headers() -> tuple[dict[str, str], str]:
    """The ``authorization`` header Ray's client would send, and where its token came from.

    Ray's order (its ``AuthenticationTokenLoader``): ``RAY_AUTH_TOKEN``; else the first line
    of the file ``RAY_AUTH_TOKEN_PATH`` names; else the first line of ``~/.ray/auth_token``;
    each stripped of whitespace. No header when ``RAY_AUTH_MODE`` is set to anything but
    ``token`` (as Ray: the client then sends none) or no token is found.

    Raises:
        RunError: ``RAY_AUTH_TOKEN_PATH`` names a file that cannot be read or is empty (Ray
            refuses that too; the path is named, never the token).
    """
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":
        return {}, ""
    if os.environ.get("RAY_AUTH_TOKEN"):
        token, source = os.environ["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN"
    elif os.environ.get("RAY_AUTH_TOKEN_PATH"):
        path = os.environ["RAY_AUTH_TOKEN_PATH"]
        token, source = _first_line(Path(path)), f"RAY_AUTH_TOKEN_PATH={path}"
        if not token:
            raise RunError(f"RAY_AUTH_TOKEN_PATH={path}: no token there (the file cannot be read or is empty)")
    else:
        token, source = _first_line(Path.home() / ".ray" / "auth_token"), "~/.ray/auth_token"
    return ({"authorization": f"Bearer {token}"}, source) if token else ({}, "")


def _first_line(path: Path) -> str:
    """The first line of ``path``, stripped; "" when it cannot be read."""
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline().strip()
    except (OSError, ValueError):
        return ""


def _token_advice() -> str:
    """What to do when the server wants a token that this client did not send."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":
        return f"RAY_AUTH_MODE={mode} here sends none; unset it or set RAY_AUTH_MODE=token"
    return ("none was found here; set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, or put the cluster's token in "
            "~/.ray/auth_token")


def _use_token_if_present() -> None:
    """Turn on Ray's token authentication in this client when a token is there to use."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"
