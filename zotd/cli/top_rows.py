"""What ``zot top`` shows, as plain data: no Textual here, so it is tested alone.

- :class:`Board`: the rows of the extensions table, from the last
  ``list_extensions`` poll with the ``extension_state`` pushes since applied;
  calls/s is worked out here, from the ``calls`` count of two polls.
- ``fmt_*``: the cells (``-`` for what is not known: ``None``).
- :class:`Tail`: the lines appended to a file since the last look, as ``zot
  ext logs -f`` follows one (it survives truncation, rotation, absence).
- :func:`parse_decision` and :func:`describe_decision`: one line of the
  intercept audit trail (``$ZOT_HOME/logs/audit.jsonl``,
  :class:`~zotd.model.audit.AuditRecord`), read or not.

Every string an extension (or a manifest) chose goes through
:func:`.output.printable` here, before the view sees it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from ..model.audit import AuditRecord
from ..protocol import agent as ap
from .output import printable

#: The table's columns, in order.
COLUMNS = (
    "NAME", "STATE", "PID", "UPTIME", "RESTARTS", "RSS", "CPU", "CALLS/S", "P95", "LAST ERROR",
)  # fmt: skip
#: What a cell shows when its value is not known.
DASH = "-"
#: Longest last error shown in the table (the rest is cut, with an ellipsis).
ERROR_WIDTH = 60
#: States in which an extension has no process (a push says so before the next poll).
NO_PROCESS = frozenset({"exited", "failed", "disabled", "untrusted", "restarting", "sleeping"})


# --- cells ----------------------------------------------------------------------------


def fmt_count(n: int | None) -> str:
    return DASH if n is None else str(n)


def fmt_uptime(seconds: float | None) -> str:
    """``42s``, ``12m05s``, ``3h07m``, ``2d05h``: short enough for a column."""
    if seconds is None:
        return DASH
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def fmt_bytes(n: int | None) -> str:
    """``512 B``, ``12.3 MiB``, ``1.5 GiB``."""
    if n is None:
        return DASH
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def fmt_percent(p: float | None) -> str:
    return DASH if p is None else f"{p:.1f}%"


def fmt_ms(ms: float | None) -> str:
    """``0.4 ms``, ``120 ms``, ``2.50 s``."""
    if ms is None:
        return DASH
    if ms < 100:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s"


def fmt_rate(per_s: float | None) -> str:
    return DASH if per_s is None else f"{per_s:.1f}"


def one_line(text: str, width: int = ERROR_WIDTH) -> str:
    """``text`` escaped as a one-line field, cut to ``width`` characters."""
    shown = printable(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


# --- rows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One extension as the table shows it."""

    name: str
    """Its name as it is (the key for requests about it); :attr:`cells` has it escaped."""
    state: str
    enabled: bool
    #: Its log file, as the daemon said (``""`` if it did not).
    log: str
    #: The cells, in :data:`COLUMNS` order, every one printable.
    cells: tuple[str, ...]


class CallRates:
    """Calls per second of each extension, from its ``calls`` count at two polls."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}
        self.rates: dict[str, float | None] = {}

    def update(self, infos: Iterable[ap.ExtensionInfo], now: float) -> None:
        """Takes one poll, made at ``now`` (seconds, monotonic)."""
        last, self._last, self.rates = self._last, {}, {}
        for info in infos:
            calls = info.metrics.calls
            self._last[info.name] = (now, calls)
            before = last.get(info.name)
            if before is None or now <= before[0] or calls < before[1]:
                # A first look, or a count that started over (its workspace
                # was made anew): no rate until the next poll.
                self.rates[info.name] = None
            else:
                self.rates[info.name] = (calls - before[1]) / (now - before[0])


class Board:
    """The extensions of one workspace, by name: the last poll, and the pushes since."""

    def __init__(self) -> None:
        self.infos: dict[str, ap.ExtensionInfo] = {}
        self._rates = CallRates()

    def poll(self, infos: Sequence[ap.ExtensionInfo], now: float) -> None:
        """A ``list_extensions`` reply, received at ``now`` (monotonic seconds)."""
        self.infos = {i.name: i for i in infos}
        self._rates.update(infos, now)

    def push(self, frame: ap.ExtensionStatePush) -> None:
        """An ``extension_state`` push: its state shows at once (the next
        poll brings the rest: a new extension, a pid, the figures)."""
        info = self.infos.get(frame.extension)
        if info is None:
            return
        if frame.state == "removed":
            del self.infos[frame.extension]
            return
        changes: dict[str, object] = {"state": frame.state}
        if frame.error:
            changes["last_error"] = frame.error
        if frame.state in NO_PROCESS:
            figures = msgspec.structs.replace(info.metrics, rss_bytes=None, cpu_percent=None)
            changes.update(pid=None, uptime_s=None, metrics=figures)
        self.infos[frame.extension] = msgspec.structs.replace(info, **changes)

    def rows(self) -> list[Row]:
        """The rows, by name."""
        return [self._row(self.infos[n]) for n in sorted(self.infos)]

    def _row(self, info: ap.ExtensionInfo) -> Row:
        m = info.metrics
        cells = (
            printable(info.name),
            printable(info.state),
            fmt_count(info.pid),
            fmt_uptime(info.uptime_s),
            fmt_count(info.restarts),
            fmt_bytes(m.rss_bytes),
            fmt_percent(m.cpu_percent),
            fmt_rate(self._rates.rates.get(info.name)),
            fmt_ms(m.p95_ms),
            one_line(info.last_error) if info.last_error else DASH,
        )
        return Row(info.name, info.state, info.enabled, info.log, cells)


# --- following a file -----------------------------------------------------------------


class Tail:
    """The whole lines appended to ``path`` since the last :meth:`read`.

    The file may be missing (nothing yet), truncated or replaced (rotated):
    reading then starts over at its beginning. Lines are decoded as UTF-8,
    bytes that are not replaced; they end at newlines only, as in ``zot ext
    logs``. One read takes at most :attr:`MAX_READ` bytes from the end of
    what was appended (a flood is skipped over, not held in memory).
    """

    MAX_READ = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""
        #: Within a line whose beginning was skipped: drop it up to its newline.
        self._dropping = False

    def start(self, lines: int) -> list[str]:
        """The last ``lines`` lines there are now; :meth:`read` goes on from their end."""
        found = self._take(from_end=max(8192, lines * 256))
        return found[-lines:] if lines else []

    def read(self) -> list[str]:
        """The lines appended since the last look."""
        return self._take(from_end=self.MAX_READ)

    def _take(self, from_end: int) -> list[str]:
        try:
            with self.path.open("rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self._inode or st.st_size < self._offset:
                    # Another file now (rotated), or cut short: from its beginning.
                    self._inode, self._offset = st.st_ino, 0
                    self._partial, self._dropping = b"", False
                if st.st_size == self._offset:
                    return []
                start = max(self._offset, st.st_size - from_end)
                skipped = start > self._offset
                f.seek(start - 1 if skipped else start)  # with the byte before, if skipping
                data = f.read(st.st_size - f.tell())
                end = f.tell()
        except OSError:  # not there (yet), or unreadable: nothing to show
            return []
        self._offset = end
        if skipped:
            # Skipped to mid-file: a line begins there only after a newline.
            self._partial, self._dropping = b"", data[:1] != b"\n"
            data = data[1:]
        if self._dropping:
            cut = data.find(b"\n")
            if cut < 0:
                return []
            data, self._dropping = data[cut + 1 :], False
        *whole, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > self.MAX_READ:  # a line without end: not kept whole
            self._partial, self._dropping = b"", True
        return [line.decode("utf-8", "replace") for line in whole]


# --- the audit trail ------------------------------------------------------------------

_decode_record = msgspec.json.Decoder(AuditRecord).decode


def parse_decision(line: str) -> AuditRecord | None:
    """One line of ``audit.jsonl``, or ``None`` if it is not a record (a
    torn or corrupt line, a blank one)."""
    if not line.strip():
        return None
    try:
        return _decode_record(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def local_time(stamp: str) -> str:
    """``HH:MM:SS`` in local time, from the record's UTC ISO 8601 time
    (the stamp itself, escaped, if it is not one)."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return printable(stamp)
    if when.tzinfo is None:
        return when.strftime("%H:%M:%S")
    return when.astimezone().strftime("%H:%M:%S")


def describe_decision(record: AuditRecord, workspace: str | None = None) -> tuple[str, str, str]:
    """``(time, decision, what)`` of one decision, each printable:
    ``("12:00:01", "block", "tool_call bash by guard: no rm -rf (3.1 ms)")``.
    ``what`` names the workspace when it is not ``workspace``."""
    what = f"{record.event} {record.tool}" if record.tool else record.event
    parts = [what]
    if record.blocked_by:
        parts.append(f"by {record.blocked_by}")
    if record.rewrites:
        parts.append(f"rewritten by {', '.join(record.rewrites)}")
    text = " ".join(parts)
    if record.reason:
        text += f": {record.reason}"
    odd = [f"{g.guard} {g.answer}" for g in record.guards if g.answer in ("silent", "crashed")]
    if odd:
        text += f" [{', '.join(odd)}]"
    text += f" ({fmt_ms(record.took_ms)})"
    if workspace is not None and record.workspace != workspace:
        text += f" in {record.workspace}"
    return local_time(record.time), printable(record.decision), printable(text)
