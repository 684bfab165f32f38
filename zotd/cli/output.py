"""How the CLIs print: text from extensions made safe for a terminal, durations
as people read them, coloured states, progress, and a quiet exit when the
reader of stdout goes away (``zot tools | head -1``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import IO, Any

#: The exit code of a command whose output pipe closed (128 + SIGPIPE, as a
#: shell reports a command the signal ended).
BROKEN_PIPE_EXIT = 141

#: Rich styles of the extension states, on a terminal.
STATE_STYLES = {
    "ready": "green",
    "starting": "yellow",
    "restarting": "yellow",
    "stopping": "yellow",
    "failed": "bold red",
    "untrusted": "magenta",
    "disabled": "dim",
    "stopped": "dim",
}


def _escape(code: int) -> str:
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    if code in named:
        return named[code]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: What no text from a manifest or an extension reaches a terminal as: the C0
#: controls (ESC starts colour, cursor, title and OSC 52 clipboard sequences;
#: BEL, backspace and CR redraw), DEL, the C1 controls (U+0080-U+009F: 0x9B is
#: a one-byte CSI), the line and paragraph separators, and the bidi controls
#: that reorder what follows them (U+202A-U+202E, U+2066-U+2069, and the marks
#: U+200E, U+200F, U+061C); and lone surrogates, which stdout cannot encode.
_UNPRINTABLE = [
    *range(0x00, 0x20),
    *range(0x7F, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    *range(0xD800, 0xE000),  # lone surrogates: printing one would raise
]


# The tables (some 2,100 entries each, most of them surrogates) are made on
# first use, not at import: about 5 ms of a `zot` command's start. Text that
# is all printable (``str.isprintable``: no character of Unicode's "Other" or
# "Separator" categories, which hold every one above) never needs them.


@functools.cache
def _one_line() -> dict[int, str]:
    return str.maketrans({c: _escape(c) for c in _UNPRINTABLE})


@functools.cache
def _multiline() -> dict[int, str]:
    return str.maketrans({c: _escape(c) for c in _UNPRINTABLE if c not in (0x09, 0x0A)})


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` from a manifest or an extension, safe to print on a terminal:
    each control character shows as a visible escape (``\\x1b``, ``\\r``,
    ``\\x9b``, ``\\u202e``) instead of acting. With ``multiline``, newlines
    and tabs stay (and a CRLF is a newline); a one-line field (a name, a table
    cell) has those escaped too. Backslashes stay as they are, so a literal
    ``\\x1b`` in the text reads the same: the point is that nothing acts.

    ``--json`` output does not go through this: JSON escapes controls itself.
    """
    if text.isprintable():
        return text
    if multiline:
        return text.replace("\r\n", "\n").translate(_multiline())
    return text.translate(_one_line())


@functools.cache
def _json_unsafe() -> dict[int, str]:
    # What JSON leaves as it is but a terminal may act on: the C1 and bidi
    # controls, the separators, lone surrogates (JSON escapes the C0 ones itself).
    return str.maketrans({c: f"\\u{c:04x}" for c in _UNPRINTABLE if c >= 0x7F})


def json_printable(encoded: str) -> str:
    """Encoded JSON with the characters a terminal may act on written as
    ``\\u`` escapes: the same JSON value, byte for byte safe to print. (They
    can only be inside strings, as JSON's own syntax is ASCII.)"""
    if encoded.isascii() and "\x7f" not in encoded:
        return encoded
    return encoded.translate(_json_unsafe())


def duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``2 h 5 min``, ``3 d 4 h``: the two largest units."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 3600:
        return f"{minutes} min"
    if s < 86400:
        rest = minutes % 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    rest = hours % 24
    return f"{days} d {rest} h" if rest else f"{days} d"


def colour_enabled(stream: IO[str]) -> bool:
    """Whether to colour what goes to ``stream``: a terminal, and no ``NO_COLOR``."""
    if os.environ.get("NO_COLOR", "") != "":
        return False
    try:
        return stream.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


def styler(stream: IO[str]) -> Callable[[str, str], str]:
    """``paint(text, state)``: ``text`` in the colour of ``state`` on a
    terminal; as it is otherwise (or for a state without a colour)."""
    if not colour_enabled(stream):
        return lambda text, state: text
    from rich.color import ColorSystem
    from rich.style import Style

    styles = {k: Style.parse(v) for k, v in STATE_STYLES.items()}

    def paint(text: str, state: str) -> str:
        style = styles.get(state)
        return style.render(text, color_system=ColorSystem.STANDARD) if style else text

    return paint


class Progress:
    """Shows a tool call's ``tool_progress`` on stderr while it runs: a bar
    that redraws itself on a terminal, one plain line per update otherwise."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._out = stream or sys.stderr
        self._live = colour_enabled(self._out)
        self._drawn = False

    def update(self, message: str, progress: float | None, total: float | None) -> None:
        """One ``tool_progress`` frame (its message escaped: :func:`printable`)."""
        message = printable(message)
        if self._live:
            self._out.write("\r\x1b[2K" + self._bar(message, progress, total))
            self._drawn = True
        else:
            self._out.write(self._line(message, progress, total) + "\n")
        self._out.flush()

    def close(self) -> None:
        """Clears the bar (the result is printed next)."""
        if self._drawn:
            self._out.write("\r\x1b[2K")
            self._out.flush()
            self._drawn = False

    @staticmethod
    def _amount(progress: float | None, total: float | None) -> str:
        if progress is None:
            return ""
        if total:
            return f"{progress:g}/{total:g} ({min(100.0, 100 * progress / total):.0f}%)"
        return f"{progress:g}"

    def _line(self, message: str, progress: float | None, total: float | None) -> str:
        amount = self._amount(progress, total)
        return "progress: " + "  ".join(p for p in (amount, message) if p)

    def _bar(
        self, message: str, progress: float | None, total: float | None, width: int = 24
    ) -> str:
        if progress is not None and total:
            filled = round(width * min(1.0, max(0.0, progress / total)))
            bar = "[" + "#" * filled + "-" * (width - filled) + "] "
        else:
            bar = ""
        return bar + "  ".join(p for p in (self._amount(progress, total), message) if p)


def quiet_on_broken_pipe(main: Callable[[], Any]) -> Callable[[], None]:
    """Wraps an entry point: a closed stdout (``| head``) ends it quietly,
    exit 141, with no traceback and no complaint at interpreter exit."""

    def run() -> None:
        try:
            try:
                main()
            finally:  # also on SystemExit: what is buffered may hit the closed pipe
                sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            raise SystemExit(BROKEN_PIPE_EXIT) from None
        except BaseExceptionGroup as group:
            match, rest = group.split(BrokenPipeError)
            if match is None or rest is not None:
                raise
            _silence_stdout()
            raise SystemExit(BROKEN_PIPE_EXIT) from None

    return run


def _silence_stdout() -> None:
    # Python flushes stdout once more at exit; point it at /dev/null so that
    # flush cannot fail again.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
