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
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from attnsweep.orchestrator.deadline import TIMEOUT_S, within
from attnsweep.orchestrator.errors import RunError
from attnsweep.orchestrator.ray_auth import TOKEN_ADVICE, use_token_if_present

PACKAGES = ("presentation", "orchestrator", "stats", "results", "workers", "tasks")
"""The packages inside the ``attnsweep`` namespace (folders at the top of the repository)."""
# What the job's command falls back to when no --store is given: the store the cluster
# itself names (cluster.yaml exports ATTNSWEEP_STORE on every node).
CLUSTER_STORE = '"${ATTNSWEEP_STORE:?set ATTNSWEEP_STORE on the cluster or give --store}"'
ANSWER_CHARS = 300
"""Characters of a job server's error answer that a message quotes at most (its last line)."""
ANSWER_BYTES = 64 * 2**20
"""Bytes of a job server's answer read at most (64 MiB: a job's whole log fits many times over)."""
READ_BYTES = 2**16
"""Bytes read from a socket at a time."""


def client(address: str, timeout_s: float = TIMEOUT_S, limit_s: float | None = None):
    """A ``JobSubmissionClient`` for the job server at ``address`` (``http://host:8265``)
    whose every answer is read with a cap (:data:`ANSWER_BYTES`) and every socket read
    with ``timeout_s`` (``limit_s``: the whole command's limit, for the message).

    Raises:
        RunError: nothing answers there within ``timeout_s`` seconds, or it refuses the client.
    """
    _base_url(address)  # a malformed address is one clear error before Ray sees it
    use_token_if_present()
    capped = _capped_client_class()
    try:
        return within(timeout_s, f"the job server at {shown(address)}", lambda: capped(address, timeout_s),
                      limit_s)
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
        raise RunError(f"no Ray job server answers at {shown(address)}: {_said(exc)}; start one with `ray start --head` "
                       "or forward it with `ray dashboard cluster.yaml`") from exc


def _capped_client_class():
    """Ray's ``JobSubmissionClient`` with its HTTP answers read through :func:`_read_capped`.

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
                response._content = _read_capped(response.headers.get("content-length"),
                                                  lambda n: next(response.iter_content(n), b""),
                                                  self._attnsweep_address)
                return response

            kwargs.update(stream=True, hooks={"response": [cap]})
            kwargs.setdefault("timeout", self._attnsweep_timeout_s)
            return super()._do_request(method, endpoint, **kwargs)

    return CappedJobSubmissionClient


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

    started = time.monotonic()
    spec = load_spec(spec_path)
    if store is not None and "://" not in store and not store.startswith("/"):
        raise RunError(f"--store {store!r}: give an absolute path or a URI as the cluster sees it; a relative path "
                       "would land in the job's temporary working directory and be lost")

    def left() -> float:
        return timeout_s - (time.monotonic() - started)

    jobs = client(address, max(left(), 0.1), timeout_s)
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
        # A head that has just started answers before its job agent is ready ("try again later"):
        # retried, within the one deadline of the whole command.
        agentless = False
        for wait_s in (1, 2, 4, 8, 16, 32, None):
            try:
                return within(max(left(), 0.1), f"the job server at {shown(address)}", lambda: jobs.submit_job(
                    entrypoint=entrypoint, submission_id=submission_id,
                    runtime_env={"working_dir": str(staging)},
                    metadata={"sweep": spec.name, "spec_hash": spec.spec_hash()},
                ), timeout_s)
            except RunError as exc:
                if agentless and str(exc).startswith("no answer"):  # the deadline passed while the server still had no agent
                    raise RunError(_no_agent(address, timeout_s)) from None
                raise
            except RecursionError:
                raise RunError(f"the job server at {shown(address)} answered with JSON nested too deeply to be a job "
                               "server's answer") from None
            except Exception as exc:  # noqa: BLE001
                agentless = _is_agentless(str(exc))
                if wait_s is None or not agentless and "try again later" not in str(exc):
                    if agentless:
                        raise RunError(_no_agent(address, timeout_s)) from None
                    raise RunError(f"the job server at {shown(address)} refused the job: {_said(exc)}") from exc
                if left() <= wait_s:
                    if agentless:
                        raise RunError(_no_agent(address, timeout_s)) from None
                    raise RunError(f"the job server at {shown(address)} did not take the job within {timeout_s:g} s: "
                                   f"{_said(exc)}") from exc
                time.sleep(wait_s)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _is_agentless(text: str) -> bool:
    """Whether a job server's answer says it has no dashboard agent to hand the job to (Ray's
    job head answers so to a submit, and with a TimeoutError traceback to a stop)."""
    return "No available agent" in text or "Failed to get head node agent" in text


def _no_agent(address: str, timeout_s: float) -> str:
    """The message for a job server whose head has no dashboard agent: the cause and what to check."""
    return (f"the job server at {shown(address)} has no dashboard agent to run jobs (Ray: \"No available agent\"; "
            f"none came within --timeout {timeout_s:g} s): the head's dashboard agent is not running, most often because its "
            "port is taken by another process. Check `ray status` and the head's "
            "logs/dashboard_agent.log (in /tmp/ray/session_latest, or under RAY_TMPDIR), then restart the head with "
            "free ports (ray start --head --dashboard-agent-listen-port=PORT --dashboard-agent-grpc-port=PORT)")


def _said(exc: BaseException) -> str:
    """A client error's text for a message: its last non-blank line, capped and printable
    (a server's traceback ends with its error; its body may hold anything)."""
    return printable(shown(_last_line(str(exc).encode("utf-8", "replace"))))


SOURCE_SUFFIXES = frozenset({".py", ".j2", ".csv"})
"""What counts as the project's source when a job is staged: its modules, and the package
data that pyproject.toml ships (report templates, reference read-offs). Nothing else in the
package folders travels to the cluster (no .env, keys, stores, notebooks, caches)."""
SECRET_NAMES = re.compile(r"(^\.env(\..*)?$|^\.netrc$|^\.pgpass$|^id_(rsa|dsa|ecdsa|ed25519)|\.(pem|key|p12|pfx|jks|keystore)$"
                          r"|credential|secret|token)", re.IGNORECASE)
"""File names that look like secrets: never staged, even with a source suffix (a warning names them)."""


def stage_sources(staging: Path, warn: Callable[[str], None] | None = None) -> Path:
    """Copy the source into ``staging`` as it installs: ``attnsweep/`` (its own modules) with
    ``attnsweep/orchestrator``, ``attnsweep/results``... inside, wherever each folder lives
    here (at the top of a checkout, or inside ``attnsweep/`` when installed from a wheel).
    Only source files go (:func:`copy_source`). ``python -m attnsweep.cli`` then runs in
    ``staging``; returns ``staging / "attnsweep"``.

    Args:
        warn: told each file left out because its name looks like a secret (default: stderr).
    """
    top = staging / "attnsweep"
    # Found, not imported: the face (attnsweep/__init__.py) sits above this package. Resolved:
    # a strict editable install finds each module through a link into the checkout, and
    # copy_source follows no link out of the folder it copies.
    face = Path(importlib.util.find_spec("attnsweep").origin).resolve().parent
    copy_source(face, top, warn, skip=set(PACKAGES))
    for package in PACKAGES:
        source = Path(importlib.util.find_spec(f"attnsweep.{package}").origin).resolve().parent
        copy_source(source, top / package, warn)
    return top


def copy_source(source: Path, target: Path, warn: Callable[[str], None] | None = None,
                skip: set[str] = frozenset()) -> list[Path]:
    """Copy the source files under ``source`` to ``target`` (same relative paths); returns
    the paths copied, relative to ``source``.

    A source file has a suffix in :data:`SOURCE_SUFFIXES` and a name that does not look
    like a secret (:data:`SECRET_NAMES`; those are named to ``warn``). Links are never
    followed out of ``source``: a link (to a file or a folder) whose target lies outside it
    is left out, one inside is copied as the file it names. Hidden folders and caches are
    not walked. Top-level folders named in ``skip`` are left out.
    """
    warn = warn or (lambda text: print(text, file=sys.stderr))
    root = source.resolve()
    copied: list[Path] = []
    for folder, dirs, files in os.walk(source, followlinks=False):
        here = Path(folder)
        rel_dir = here.relative_to(source)
        kept = []
        for name in sorted(dirs):
            path = here / name
            if name.startswith(".") or name == "__pycache__" or (rel_dir == Path(".") and name in skip):
                continue
            if path.is_symlink():  # os.walk does not enter it; a link inside the tree names files seen anyway
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            path = here / name
            if Path(name).suffix not in SOURCE_SUFFIXES:
                if SECRET_NAMES.search(name):
                    warn(f"not staged (looks like a secret): {printable(str(path))}")
                continue
            if SECRET_NAMES.search(name):
                warn(f"not staged (looks like a secret): {printable(str(path))}")
                continue
            resolved = path.resolve()
            if not resolved.is_file() or not resolved.is_relative_to(root):
                continue  # a link out of the tree (or to nothing): never followed
            dest = target / rel_dir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resolved, dest)
            copied.append(rel_dir / name)
    return copied


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
        write(printable_log(answer["logs"]))
        return
    import asyncio

    started = time.monotonic()
    jobs = client(address, timeout_s)
    try:
        # One deadline for reaching the server and finding the job; the stream then lasts as long as the job.
        within(max(timeout_s - (time.monotonic() - started), 0.1), f"the job server at {shown(address)}",
               lambda: jobs.get_job_info(job_id), timeout_s)

        async def tail() -> None:
            async for chunk in jobs.tail_job_logs(job_id):
                write(printable_log(chunk))

        asyncio.run(tail())
    except RunError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise RunError(f"cannot read the log of job {job_id!r} at {shown(address)}: {_said(exc)}") from exc


def printable_log(text: str) -> str:
    """A log from a server as a terminal shows it as it is: its lines kept, every other
    control or format character but the tab (``\\r``, escape sequences, bidi overrides) written as an
    escape by :func:`printable`, so a log cannot rewrite or recolour the screen."""
    return "\n".join("\t".join(map(printable, line.split("\t"))) for line in text.split("\n"))


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
        if _is_agentless(body[-4096:].decode("utf-8", "replace")):
            raise RunError(_no_agent(address, timeout_s))
        raise RunError(f"cannot {doing} job {job_id!r} at {shown(address)}: HTTP {code}: {printable(_last_line(body))}")

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
                return response.status, _read_capped(response.headers.get("content-length"), response.read, address)
        except urllib.error.HTTPError as answer:
            with answer:
                return answer.code, _read_capped(answer.headers.get("content-length"), answer.read, address)
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            # The words of orchestrator.deadline.within: a socket read that timed out is the
            # same missed deadline, whichever of the two noticed it first.
            raise RunError(f"no answer from the job server at {shown(address)} within {timeout_s:g} s; check the address "
                           "and that the server is up (raise the limit with --timeout or ATTNSWEEP_TIMEOUT)") from None
        raise RunError(f"no Ray job server answers at {shown(address)}: {str(reason) or type(reason).__name__}; "
                       f"{_START_HINT}") from exc


def _read_capped(content_length: str | None, read: Callable[[int], bytes], address: str) -> bytes:
    """An answer's body, read in pieces by ``read(n)`` (at most ``n`` bytes; b"" at its end),
    refused as soon as it passes :data:`ANSWER_BYTES`: memory stays bounded whatever the
    server sends (an endless body, a ``Content-Length`` of 10^12).

    Raises:
        RunError: the body is (or says it will be) longer than the cap.
    """
    too_long = RunError(f"the job server at {shown(address)} sent an answer longer than {ANSWER_BYTES // 2**20} MiB; "
                        "a Ray job server does not (for a job's long log, use `attnsweep logs --follow`)")
    try:
        if content_length is not None and int(content_length) > ANSWER_BYTES:
            raise too_long
    except ValueError:
        pass  # a malformed length: the body is read with the cap as if none were given
    pieces: list[bytes] = []
    size = 0
    while piece := read(min(READ_BYTES, ANSWER_BYTES + 1 - size)):
        pieces.append(piece)
        size += len(piece)
        if size > ANSWER_BYTES:
            raise too_long
    return b"".join(pieces)


def _json_object(body: bytes, address: str, strict: bool = True) -> dict:
    """``body`` as a JSON object; ``strict=False``: ``{}`` when it is not one.

    Raises:
        RunError: (``strict``) the body is not a JSON object.
    """
    try:
        value = json.loads(body.decode("utf-8"))
    except ValueError:
        value = None
    except RecursionError:  # nested deeper than the parser's stack: no job server answers so
        if not strict:
            return {}
        raise RunError(f"the job server at {shown(address)} answered with JSON nested too deeply to be a job "
                       "server's answer") from None
    if isinstance(value, dict):
        return value
    if not strict:
        return {}
    raise RunError(f"the job server at {shown(address)} answered with something that is not a JSON object: "
                   f"{_last_line(body)}")


def _last_line(body: bytes) -> str:
    """The last non-blank line of an answer (a server's traceback ends with its error), capped."""
    # Split at line feeds only: a carriage return inside a line is shown (escaped), not obeyed.
    lines = [line.strip() for line in body.decode("utf-8", "replace").split("\n") if line.strip()]
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
    return f"none was found here; {TOKEN_ADVICE}"


