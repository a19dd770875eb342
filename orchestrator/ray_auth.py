"""Ray's token authentication, found the way Ray finds it, so that users set nothing.

``ray start --head`` turns token authentication on when a token is on the machine
(``~/.ray/auth_token``, which any local ``ray.init()`` writes). Ray's own clients then need
``RAY_AUTH_MODE=token`` to send it, except ``ray.init("auto")``: a user who runs
``attnsweep run --address HOST:PORT`` or a cron job would otherwise meet Ray's
"InvalidAuthToken". :func:`use_token_if_present` sets the mode for this process (and the
processes it starts) when a token is there and the user chose no mode; an explicit
``RAY_AUTH_MODE`` is always kept. :func:`auth_headers` gives the header Ray's client would
send, for calls to a job server's REST API. The token itself is never read into a message.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from attnsweep.orchestrator.errors import RunError

TOKEN_ADVICE = (
    "put the cluster's token (the head's ~/.ray/auth_token) in ~/.ray/auth_token here, or set "
    "RAY_AUTH_TOKEN_PATH=/path/to/that/file"
)
"""The one line that says what to set when a cluster wants a token this client lacks."""


def token_file() -> Path:
    """The file Ray reads the token from: ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def token_present() -> bool:
    """Whether Ray would find a token here (``RAY_AUTH_TOKEN`` or a non-empty token file)."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return True
    try:
        with token_file().open(encoding="utf-8") as f:
            return bool(f.readline().strip())
    except (OSError, ValueError):
        return False


def use_token_if_present() -> bool:
    """Turn on Ray's token authentication for this process when a token is there and
    ``RAY_AUTH_MODE`` is unset; returns whether token mode is on afterwards.

    Ray caches its configuration when it first reads it, so when Ray is already imported
    the cache is refreshed (as Ray itself does when it turns the mode on).
    """
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None:
        return mode.lower() == "token"
    if not token_present():
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    if "ray._raylet" in sys.modules:
        with contextlib.suppress(Exception):  # an older Ray without the cache: the variable is enough
            sys.modules["ray._raylet"].Config.initialize("")
    return True


def is_auth_failure(exc: BaseException) -> bool:
    """Whether Ray's error ``exc`` says the cluster refused this client's token (or its lack)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(
        word in text
        for word in (
            "authenticationerror",
            "invalidauthtoken",
            "authentication token",
            "unauthenticated",
        )
    )


def auth_refused(address: str, exc: BaseException) -> str:
    """The message for a cluster at ``address`` that refused this client: why, and the one line to set."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":
        return (
            f"the Ray cluster at {address} wants a token and RAY_AUTH_MODE={mode} here sends none: unset "
            "RAY_AUTH_MODE (attnsweep then uses the token it finds) or set RAY_AUTH_MODE=token"
        )
    if not token_present():
        return f"the Ray cluster at {address} wants a token and none was found here: {TOKEN_ADVICE}"
    source = "RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN", "").strip() else str(token_file())
    return f"the Ray cluster at {address} refused the token from {source} (another cluster's?): {TOKEN_ADVICE}"


def auth_headers() -> tuple[dict[str, str], str]:
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


def token_advice() -> str:
    """What to do when the server wants a token that this client did not send."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":
        return f"RAY_AUTH_MODE={mode} here sends none; unset it or set RAY_AUTH_MODE=token"
    return f"none was found here; {TOKEN_ADVICE}"
