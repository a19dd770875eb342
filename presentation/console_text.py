"""Text from data, paths or a server, made safe to print on a terminal.

A trial id, a run status, a file name or a job server's log line is the user's (or anyone's)
text: printed as it is, ``[/x]`` is rich markup (a MarkupError, or a part of a path that
vanishes), an escape sequence is a command to the terminal (it can recolour, retitle or clear
it, or hide what follows), and a carriage return overwrites the line before it. Every console
output of the CLI passes such text through :func:`visible` (printed without markup) or
:func:`markup` (inside markup of our own); data written for scripts (CSV, JSON) passes through
:func:`for_stream`, which escapes it only where the stream is a terminal.
"""

from __future__ import annotations

import re

from rich.markup import escape

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")
# \udc80-\udcff: a byte of a file name that is not UTF-8 (os.fsdecode's surrogateescape), which
# a terminal would get raw (0x9b is a C1 control sequence's start).
_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\x00": "\\x00", "\x7f": "\\x7f"}


def _shown(ch: str) -> str:
    if 0xDC80 <= ord(ch) <= 0xDCFF:  # the undecodable byte itself
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def visible(value: object, newlines: bool = True) -> str:
    """``value`` as text whose control characters are written out (``\\x1b``, ``\\r``,
    ``\\x07``; bidirectional overrides as ``\\u202e``) instead of acting on the terminal; tabs
    stay, and newlines too unless ``newlines`` is False (then ``\\n``)."""
    text = _CONTROL.sub(lambda m: _shown(m[0]), str(value))
    return text if newlines else text.replace("\n", "\\n")


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` (a text or binary stream, or None) is a terminal: a person reads it."""
    try:
        return bool(stream is not None and stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def for_stream(text: str, stream: object) -> str:
    """``text`` (CSV, JSON, any data) as it goes to ``stream``: :func:`visible` (newlines
    kept) on a terminal, where an escape sequence in a value would act on it; as it is
    elsewhere (a file, a pipe: the data whole, byte for byte)."""
    return visible(text) if is_terminal(stream) else text


def markup(value: object) -> str:
    """``value`` for a place inside rich markup: :func:`visible` on one line, markup escaped."""
    return escape(visible(value, newlines=False))


def log_text(chunk: str) -> str:
    """A chunk of a job's log: a carriage return ends a line (progress bars redraw with it),
    other control characters are written out as :func:`visible` does."""
    return visible(chunk.replace("\r\n", "\n").replace("\r", "\n"))
