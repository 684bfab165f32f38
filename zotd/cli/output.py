"""How the CLIs print: durations as people read them, coloured states, progress,
and a quiet exit when the reader of stdout goes away (``zot tools | head -1``).
"""

from __future__ import annotations

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
        """One ``tool_progress`` frame."""
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
