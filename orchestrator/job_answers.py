"""A job server's answers, read safely: one HTTP exchange with a socket timeout and no
redirects, its body read with a byte cap, parsed as a JSON object, and any text of it (or
of an address) made safe to print in a message or a terminal."""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from attnsweep.orchestrator.errors import RunError

ANSWER_CHARS = 300
"""Characters of a job server's error answer that a message quotes at most (its last line)."""
ANSWER_BYTES = 64 * 2**20
"""Bytes of a job server's answer read at most (64 MiB: a job's whole log fits many times over)."""
READ_BYTES = 2**16
"""Bytes read from a socket at a time."""
START_HINT = "start one with `ray start --head` or forward it with `ray dashboard cluster.yaml`"
"""What a message says to do when no job server answers."""


def base_url(address: str) -> str:
    """``address`` as the URL that the API paths are appended to (``http://`` when no scheme)."""
    url = address.strip()
    if "://" not in url:
        url = f"http://{url}"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what finds "host:notaport"
    except ValueError as exc:
        raise RunError(
            f"--address {shown(address)!r}: not a URL ({shown(exc)}); give the job server as http://host:port "
            "(or https://)"
        ) from None
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


def http_answer(method: str, url: str, headers: dict[str, str], address: str, timeout_s: float) -> tuple[int, bytes]:
    """``(status code, body)`` of one request; error statuses are answers too.

    Raises:
        RunError: nothing (or nothing that speaks HTTP) answers at ``address``, or a socket
            read waited ``timeout_s`` seconds.
    """
    request = urllib.request.Request(
        url,
        method=method,
        headers={"accept": "application/json", **headers},
        data=b"" if method == "POST" else None,
    )
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        try:
            with opener.open(request, timeout=timeout_s) as response:
                return response.status, read_capped(response.headers.get("content-length"), response.read, address)
        except urllib.error.HTTPError as answer:
            with answer:
                return answer.code, read_capped(answer.headers.get("content-length"), answer.read, address)
    except (
        TimeoutError,
        urllib.error.URLError,
        http.client.HTTPException,
        OSError,
        ValueError,
    ) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            # The words of orchestrator.deadline.within: a socket read that timed out is the
            # same missed deadline, whichever of the two noticed it first.
            raise RunError(
                f"no answer from the job server at {shown(address)} within {timeout_s:g} s; check the address "
                "and that the server is up (raise the limit with --timeout or ATTNSWEEP_TIMEOUT)"
            ) from None
        raise RunError(
            f"no Ray job server answers at {shown(address)}: {str(reason) or type(reason).__name__}; {START_HINT}"
        ) from exc


def read_capped(content_length: str | None, read: Callable[[int], bytes], address: str) -> bytes:
    """An answer's body, read in pieces by ``read(n)`` (at most ``n`` bytes; b"" at its end),
    refused as soon as it passes :data:`ANSWER_BYTES`: memory stays bounded whatever the
    server sends (an endless body, a ``Content-Length`` of 10^12).

    Raises:
        RunError: the body is (or says it will be) longer than the cap.
    """
    too_long = RunError(
        f"the job server at {shown(address)} sent an answer longer than {ANSWER_BYTES // 2**20} MiB; "
        "a Ray job server does not (for a job's long log, use `attnsweep logs --follow`)"
    )
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


def json_object(body: bytes, address: str, strict: bool = True) -> dict:
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
        raise RunError(
            f"the job server at {shown(address)} answered with JSON nested too deeply to be a job server's answer"
        ) from None
    if isinstance(value, dict):
        return value
    if not strict:
        return {}
    raise RunError(
        f"the job server at {shown(address)} answered with something that is not a JSON object: {last_line(body)}"
    )


def last_line(body: bytes) -> str:
    """The last non-blank line of an answer (a server's traceback ends with its error), capped."""
    # Split at line feeds only: a carriage return inside a line is shown (escaped), not obeyed.
    lines = [line.strip() for line in body.decode("utf-8", "replace").split("\n") if line.strip()]
    line = lines[-1] if lines else "(empty answer)"
    return line if len(line) <= ANSWER_CHARS else line[:ANSWER_CHARS] + "..."


def quote_answer(answer: dict) -> str:
    """A JSON answer that lacks the expected field, as a message quotes it (capped)."""
    return last_line(json.dumps(answer).encode())


def said(exc: BaseException) -> str:
    """A client error's text for a message: its last non-blank line, capped and printable
    (a server's traceback ends with its error; its body may hold anything)."""
    return printable(shown(last_line(str(exc).encode("utf-8", "replace"))))


def printable(text: str) -> str:
    """``text`` from a server as one line a terminal shows as it is: control and format
    characters (escape sequences, carriage returns, line breaks, bidi overrides) written as
    escapes (``\\x1b``), so an answer cannot move the cursor, recolour or rewrite the screen."""
    import unicodedata

    return "".join(
        ch if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp") else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour or style sequence (Select Graphic Rendition, ECMA-48 8.3.117), as Ray writes around
its own log lines."""


def printable_log(text: str) -> str:
    """A log from a server as a terminal shows it as it is: its lines kept, colour and style
    sequences dropped (they can only restyle text, and written out they are noise), every other
    control or format character but the tab (``\\r``, other escape sequences, bidi overrides)
    written as an escape by :func:`printable`, so a log cannot rewrite or recolour the screen."""
    text = _SGR.sub("", text)
    return "\n".join("\t".join(map(printable, line.split("\t"))) for line in text.split("\n"))
