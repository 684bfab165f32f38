"""``zot audit [-f] [-n N] [--since T] [--blocked] [--json]``: read or follow
the intercept audit trail, ``$ZOT_HOME/logs/audit.jsonl``.

It reads the files itself (with ``--since``, the rotated copies too, oldest
first), so it works whether or not zotd runs. As text, one line a decision:
its time (UTC), the decision, the event and tool, who blocked or rewrote and
why, each guard asked with its answer and latency, and how long it took;
everything from the file is shown escaped (:func:`.output.printable`). With
``--json``, the records' own lines. A line that is not a record is reported
on stderr with its file and line number, once, and skipped.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, BinaryIO

import msgspec
from cyclopts import Parameter

from ..model import audit as trail
from ..model.audit import AuditRecord, GuardVerdict
from ..model.log_time import parse_since
from .common import Options, Where, die, settings
from .output import json_printable, printable

#: How often ``-f`` looks for more.
FOLLOW_INTERVAL = 0.2

#: How many records are printed first without ``--since`` or ``-n``.
DEFAULT_LINES = 100

#: Lines that are not records reported one by one before the rest go unsaid.
MAX_REPORTS = 5


_decode = msgspec.json.Decoder(AuditRecord).decode


def audit(
    *,
    follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative=())] = False,
    lines: Annotated[int | None, Parameter(name=["--lines", "-n"])] = None,
    since: str | None = None,
    blocked: Annotated[bool, Parameter(negative=())] = False,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Print the intercept audit trail: every decision the guards made.

    Reads $ZOT_HOME/logs/audit.jsonl directly, so it works whether or not
    zotd runs. With --json, the records as JSON lines.

    Args:
        follow: Keep printing decisions as they are made, until Ctrl+C.
        lines: How many decisions from the end to print first [default: 100; all with --since].
        since: Only decisions from then on: a time (2026-12-02T14:00, local unless it ends in Z or +HH:MM) or how long ago (30s, 10m, 2h, 1d). Reads the rotated files too.
        blocked: Only the decisions that blocked.
    """
    o = opts or Options()
    if lines is not None and lines < 0:
        die("zot: --lines must be 0 or more", code=2)
    threshold = None if since is None else _threshold(since)
    paths, _ = settings(where)
    path = trail.trail_path(paths.logs_dir)
    reader = _Reader(o.json, threshold, blocked)
    files = trail.rotated(path) if threshold is not None else [path]
    if not any(f.exists() for f in files) and not follow:
        print(printable(f"no intercept decisions yet ({path})"), file=sys.stderr)
        return 0
    keep = lines if lines is not None else (None if threshold is not None else DEFAULT_LINES)
    shown: deque[str] = deque(maxlen=keep)
    offset = count = 0
    for file in files:
        offset, count = reader.read(file, 0, 0, shown.append)
    for line in shown:
        print(line)
    sys.stdout.flush()
    if follow:
        try:
            _follow(path, offset, count, reader)
        except KeyboardInterrupt:
            pass
    return 0


def _threshold(since: str) -> str:
    """``--since`` as a time in the trail's own form (UTC, ``...Z``), which
    its times compare with as strings."""
    try:
        moment = parse_since(since, time.time())
    except ValueError:
        die(
            f"zot: --since '{printable(since)}': give a time, like 2026-12-02T14:00 (local "
            "time, or ending in Z or +01:00), or how long ago, like 30s, 10m, 2h or 1d",
            code=2,
        )
    return trail.timestamp(moment)


class _Reader:
    """Turns the trail's lines into what is printed, and reports those that
    are not records."""

    def __init__(self, as_json: bool, threshold: str | None, blocked: bool) -> None:
        self._json = as_json
        self._threshold = threshold
        self._blocked = blocked
        self._reports = 0

    def read(
        self, path: Path, offset: int, count: int, emit: Callable[[str], None]
    ) -> tuple[int, int]:
        """Emits what the whole lines of ``path`` past ``offset`` show (the
        ``count`` lines before it already read); returns where they end and
        how many lines that makes."""
        try:
            with path.open("rb") as f:
                f.seek(offset)
                for line in _whole_lines(f):
                    offset += len(line)
                    count += 1
                    self.line(path, count, line, emit)
        except FileNotFoundError:
            pass
        return offset, count

    def line(self, path: Path, number: int, line: bytes, emit: Callable[[str], None]) -> None:
        if not line.strip():
            return
        try:
            record = _decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self._report(path, number)
            return
        if self._threshold is not None and record.time < self._threshold:
            return
        if self._blocked and record.decision != "block":
            return
        if self._json:
            emit(json_printable(line.decode("utf-8", "replace").rstrip("\n")))
        else:
            emit(describe(record))

    def _report(self, path: Path, number: int) -> None:
        self._reports += 1
        if self._reports <= MAX_REPORTS:
            message = f"zot: {path} line {number} is not an audit record; skipped"
        elif self._reports == MAX_REPORTS + 1:
            message = "zot: more lines are not audit records; skipped without a word"
        else:
            return
        print(printable(message), file=sys.stderr)
        sys.stderr.flush()


def _whole_lines(f: BinaryIO) -> Iterator[bytes]:
    """The lines of ``f`` from where it is that end with a newline (a last
    line without one is still being written)."""
    for line in f:
        if not line.endswith(b"\n"):
            return
        yield line


def _follow(path: Path, offset: int, count: int, reader: _Reader) -> None:
    """Prints each decision appended to ``path`` past ``offset`` until
    interrupted. When the file is rotated (copied to ``.1`` and truncated),
    what was appended before that is read from ``.1`` first."""

    def emit(text: str) -> None:
        print(text)

    while True:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:  # rotated: finish its copy, then start over
            reader.read(path.with_name(f"{path.name}.1"), offset, count, emit)
            offset = count = 0
        if size > offset:
            offset, count = reader.read(path, offset, count, emit)
        sys.stdout.flush()
        time.sleep(FOLLOW_INTERVAL)


# --- one decision as text ---------------------------------------------------------------


def describe(record: AuditRecord) -> str:
    """One decision on one line, escaped: ``TIME  DECISION  EVENT TOOL  WHY
    [GUARD ANSWER LATENCY, ...]  (TOOK)``."""
    what = f"{record.event} {record.tool}" if record.tool else record.event
    if record.decision == "block":
        what += f"  by {record.blocked_by}: {record.reason}"
    elif record.reason:
        what += f": {record.reason}"
    if record.rewrites:
        what += f"  rewritten by {', '.join(record.rewrites)}"
    guards = ", ".join(_verdict(g) for g in record.guards) or "no guard asked"
    text = f"{record.time}  {record.decision:<7}  {what}  [{guards}]  ({_ms(record.took_ms)})"
    return printable(text)


def _verdict(verdict: GuardVerdict) -> str:
    text = f"{verdict.guard} {verdict.answer}"
    if verdict.latency_ms is not None:
        text += f" {_ms(verdict.latency_ms)}"
    if verdict.round > 1:
        text += f" (round {verdict.round})"
    return text


def _ms(ms: float) -> str:
    """``0.4 ms``, ``120 ms``, ``2.50 s``."""
    if ms < 100:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s"
