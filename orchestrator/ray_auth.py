"""Ray's token authentication, found the way Ray finds it, so that users set nothing.

``ray start --head`` turns token authentication on when a token is on the machine
(``~/.ray/auth_token``, which any local ``ray.init()`` writes). Ray's own clients then need
``RAY_AUTH_MODE=token`` to send it, except ``ray.init("auto")``: a user who runs
``attnsweep run --address HOST:PORT`` or a cron job would otherwise meet Ray's
"InvalidAuthToken". :func:`use_token_if_present` sets the mode for this process (and the
processes it starts) when a token is there and the user chose no mode; an explicit
``RAY_AUTH_MODE`` is always kept. The token itself is never read into a message.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TOKEN_ADVICE = ("put the cluster's token (the head's ~/.ray/auth_token) in ~/.ray/auth_token here, or set "
                "RAY_AUTH_TOKEN_PATH=/path/to/that/file")
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
        try:
            sys.modules["ray._raylet"].Config.initialize("")
        except Exception:  # noqa: BLE001 - an older Ray without the cache: the variable is enough
            pass
    return True


def is_auth_failure(exc: BaseException) -> bool:
    """Whether Ray's error ``exc`` says the cluster refused this client's token (or its lack)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(word in text for word in ("authenticationerror", "invalidauthtoken", "authentication token",
                                         "unauthenticated"))


def auth_refused(address: str, exc: BaseException) -> str:
    """The message for a cluster at ``address`` that refused this client: why, and the one line to set."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.lower() != "token":
        return (f"the Ray cluster at {address} wants a token and RAY_AUTH_MODE={mode} here sends none: unset "
                "RAY_AUTH_MODE (attnsweep then uses the token it finds) or set RAY_AUTH_MODE=token")
    if not token_present():
        return f"the Ray cluster at {address} wants a token and none was found here: {TOKEN_ADVICE}"
    source = "RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN", "").strip() else str(token_file())
    return f"the Ray cluster at {address} refused the token from {source} (another cluster's?): {TOKEN_ADVICE}"
