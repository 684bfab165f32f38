"""The intercept audit trail's writer: every decision, one line of
``$ZOT_HOME/logs/audit.jsonl`` (the format: :mod:`zotd.model.audit`).

A decision hands :meth:`AuditTrail.decided` what it knows, which queues it
and returns: nothing is encoded, hashed or written on the event loop, and
the asker's reply does not wait. One writer task (:meth:`AuditTrail.run`,
in the hub's nursery) takes what has queued up, and in a worker thread
builds the records (the arguments' digest, and the arguments themselves
with ``audit_args``), appends them in one write, and rotates the file past
``audit_max_bytes``.

A decision alone is written at once; after a write the writer waits
:data:`PACE` (or until half the queue's room is taken) before it takes the
next ones, so that a busy agent's
decisions go in a few writes (:data:`JOB` at a time), not one each: a
worker thread's turn and the file's opening cost more than a decision's own
work, and the thread, running Python beside the event loop, would take
turns with it for the GIL while the next decisions are being made. A
record is on disk within :data:`PACE` of its decision, or of the previous
write's end.

The queue is bounded in bytes (:data:`QUEUE_BYTES`, counting what the
records hold until they are written): a decision that finds it full is
dropped, counted (:attr:`AuditTrail.dropped`) and logged once for each run
of drops, never waited for. A record alone in the queue is taken whatever
its size (the agent's frame holds those bytes already; the frame limit
bounds it). A file that cannot be written (a full disk, a read-only one, a
directory at its name) loses those records, counted (:attr:`AuditTrail.lost`)
and logged once until a write succeeds again; nothing else is affected.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec
import trio

from ..model import audit
from ..model.audit import AuditRecord
from ..model.errors import RequestError
from . import threads

if TYPE_CHECKING:  # (the hub makes the trail: it need not load the decisions' machinery)
    from .intercept import Outcome

log = logging.getLogger(__name__)

#: The most bytes of decisions waiting to be written.
QUEUE_BYTES: Final = 4 * 1024 * 1024

#: How long the writer may take at shutdown for what is still queued.
FLUSH_BOUND: Final = 2.0

#: The least time between two writes (what queues meanwhile goes in the next).
PACE: Final = 0.05

#: The most decisions written in one turn of a worker thread (one write).
JOB: Final = 16

#: What a record is taken to cost beyond the strings and JSON it holds.
_OVERHEAD: Final = 256


@contextlib.contextmanager
def recording(
    trail: AuditTrail | None,
    workspace: Path,
    event: str,
    payload: dict[str, msgspec.Raw],
    out: Outcome,
) -> Iterator[None]:
    """Records the decision made inside, ``out``, in ``trail`` (if any), with
    how long it took: when it is made, and when it fails with a
    :class:`RequestError` (as ``error``). A decision cancelled (the agent's
    ``cancel``, a hangup) is no decision and is not recorded."""
    start = trio.current_time()
    try:
        yield
    except RequestError as exc:
        out.took = trio.current_time() - start
        if trail is not None:
            trail.decided(workspace, event, payload, out, exc)
        raise
    out.took = trio.current_time() - start
    if trail is not None:
        trail.decided(workspace, event, payload, out)


class _Decided:
    """One decision as the event loop saw it, not yet a record."""

    __slots__ = ("at", "error", "event", "outcome", "payload", "size", "workspace")

    def __init__(
        self,
        workspace: str,
        event: str,
        payload: dict[str, msgspec.Raw],
        outcome: Outcome,
        error: RequestError | None,
    ) -> None:
        self.at = time.time()
        self.workspace = workspace
        self.event = event
        self.payload = {k: payload[k] for k in _FIELDS if k in payload}
        self.outcome = outcome
        self.error = error
        held = sum(len(v) for v in self.payload.values()) + len(outcome.args or b"")
        held += len(outcome.reason) + len(workspace) + (len(error.message) if error else 0)
        held += sum(_OVERHEAD + len(v.reason) for v in outcome.verdicts)
        self.size = _OVERHEAD + held


#: The payload's fields a record uses.
_FIELDS: Final = ("tool_name", "tool_id", "tool_args", "sequence", "origin_extension")


class AuditTrail:
    """The trail of one daemon.

    Args:
        path: ``$ZOT_HOME/logs/audit.jsonl``.
        max_bytes: rotate it when it would grow past this (``audit_max_bytes``).
        with_args: keep a tool call's arguments, not only their digest
            (``audit_args``).
        queue_bytes: the most bytes of decisions waiting to be written.
        pace: the least time between two writes, in seconds (:data:`PACE`).
    """

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int,
        with_args: bool,
        queue_bytes: int = QUEUE_BYTES,
        pace: float = PACE,
    ) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._with_args = with_args
        self._limit = queue_bytes
        self._pace = pace
        self._queue: deque[_Decided] = deque()
        #: Bytes queued or being written.
        self._bytes = 0
        self._ready = trio.Event()
        #: Set when half the queue's room is taken: the writer's pace ends.
        self._hurry = trio.Event()
        #: Records written, dropped (the queue was full), lost (the file could not be written).
        self.written = 0
        self.dropped = 0
        self.lost = 0
        self._dropping = 0  # dropped since the queue was last empty
        self._failing = False

    def decided(
        self,
        workspace: Path,
        event: str,
        payload: dict[str, msgspec.Raw],
        outcome: Outcome,
        error: RequestError | None = None,
    ) -> None:
        """Queues the record of one decision; never waits, never raises."""
        entry = _Decided(str(workspace), event, payload, outcome, error)
        if self._queue and self._bytes + entry.size > self._limit:
            self.dropped += 1
            if not self._dropping:
                log.warning(
                    "audit trail: %d bytes of decisions wait to be written, the most allowed; "
                    "decisions are dropped from it until the writer catches up",
                    self._bytes,
                )
            self._dropping += 1
            return
        self._queue.append(entry)
        self._bytes += entry.size
        self._ready.set()
        if self._bytes * 2 > self._limit:
            self._hurry.set()

    async def run(self) -> None:
        """Writes what is queued, as it comes, at most one write every
        ``pace`` seconds; returns only when cancelled, after writing what is
        left (within :data:`FLUSH_BOUND`)."""
        try:
            while True:
                await self._ready.wait()
                self._ready = trio.Event()
                await self._write_queued(abandon=False)
                # What comes meanwhile goes in the next write, unless it
                # takes half the queue's room first.
                with trio.move_on_after(self._pace):
                    await self._hurry.wait()
                self._hurry = trio.Event()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(FLUSH_BOUND):
                while self._queue:
                    await self._write_queued(abandon=True)

    async def _write_queued(self, *, abandon: bool) -> None:
        queue = self._queue
        left = len(queue)  # (what comes meanwhile waits for the next time)
        while left:
            # A worker thread's turn for at most JOB of them: it runs Python
            # (the records) holding the GIL, which the event loop waits for.
            batch = [queue.popleft() for _ in range(min(JOB, left))]
            left -= len(batch)
            size = sum(entry.size for entry in batch)
            try:
                await threads.run_sync(self._write, batch, abandon_on_cancel=abandon)
            finally:
                self._bytes -= size
        if not queue and self._dropping:
            log.warning(
                "audit trail: %d decisions were dropped (the queue was full)", self._dropping
            )
            self._dropping = 0

    # --- in the worker thread ----------------------------------------------------

    def _write(self, batch: list[_Decided]) -> None:
        try:
            data = b"".join(_line(self._record(e)) for e in batch)
            rotation = audit.append(self.path, data, self._max_bytes)
        except OSError as exc:
            self.lost += len(batch)
            if not self._failing:
                log.warning(
                    "audit trail: cannot write %s (%s): decisions are not recorded until it can",
                    self.path,
                    exc.strerror or exc,
                )
            self._failing = True
            return
        except Exception:  # a bug of ours: these records are lost, not the daemon
            self.lost += len(batch)
            log.exception("audit trail: could not write %d record(s)", len(batch))
            return
        self.written += len(batch)
        if self._failing:
            log.warning("audit trail: writing %s again (%d decisions lost)", self.path, self.lost)
            self._failing = False
        if rotation is not None and rotation.copy_error is not None:
            log.warning(
                "audit trail: rotated %s without a copy (%s): %d bytes of it are lost",
                self.path,
                rotation.copy_error.strerror or rotation.copy_error,
                rotation.size,
            )

    def _record(self, entry: _Decided) -> AuditRecord:
        out, fields = entry.outcome, entry.payload
        if entry.error is not None:
            decision, reason = "error", entry.error.message
        elif out.blocked_by:
            decision, reason = "block", out.reason
        else:
            decision, reason = ("rewrite" if out.rewritten_by else "allow"), ""
        record = AuditRecord(
            time=audit.timestamp(entry.at),
            workspace=entry.workspace,
            event=entry.event,
            decision=decision,
            reason=reason,
            blocked_by=out.blocked_by if entry.error is None else "",
            tool=_text(fields.get("tool_name")),
            tool_id=_text(fields.get("tool_id")),
            from_extension=_text(fields.get("origin_extension")),
            sequence=_integer(fields.get("sequence")),
            guards=out.verdicts,
            rewrites=list(out.rewritten_by),
            took_ms=round(out.took * 1000, 3),
        )
        args = fields.get("tool_args")
        if args is not None:
            record.args_digest, record.args = self._args(args)
        if out.args is not None:
            record.rewritten_args_digest, record.rewritten_args = self._args(out.args)
        return record

    def _args(self, raw: msgspec.Raw) -> tuple[str, msgspec.Raw | None]:
        """The digest of arguments, and their canonical JSON with ``audit_args``."""
        try:
            canonical = audit.canonical(raw)
        except msgspec.DecodeError:
            return "", None
        kept = msgspec.Raw(canonical) if self._with_args else None
        return audit.digest(canonical, is_canonical=True), kept


#: What JSON leaves unescaped in strings but some readers take for the end
#: of a line (Python's ``str.splitlines``, JavaScript): NEL, U+2028, U+2029.
_LINE_BREAKS: Final = (
    (b"\xc2\x85", b"\\u0085"),
    (b"\xe2\x80\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\\u2029"),
)


def _line(record: AuditRecord) -> bytes:
    """One line of the trail: the record's JSON, with no character any
    reader could split it at, and a newline."""
    data = msgspec.json.encode(record)
    for raw, escaped in _LINE_BREAKS:
        data = data.replace(raw, escaped)  # (only in strings: JSON's syntax is ASCII)
    return data + b"\n"


def _text(raw: msgspec.Raw | None) -> str:
    """A payload field that should be a string, as one ("" if absent; JSON if not one)."""
    if raw is None:
        return ""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ""
    return value if isinstance(value, str) else bytes(raw).decode("utf-8", "replace")


def _integer(raw: msgspec.Raw | None) -> int:
    if raw is None:
        return 0
    try:
        return msgspec.json.decode(raw, type=int)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return 0
