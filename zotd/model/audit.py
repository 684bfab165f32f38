"""The intercept audit trail: one JSON line per intercept decision.

``$ZOT_HOME/logs/audit.jsonl`` (0600, size-rotated): every decision the
guards made, who was asked, what each answered and how fast, and what was
decided and why. A tool call's arguments are kept as a digest unless
``audit_args = true`` in zotd.toml. ``zot audit`` reads and follows it.

This module is the format (:class:`AuditRecord`) and the plain blocking
file work (:func:`append`, :func:`read`); the runtime writes records off
the event loop (:mod:`zotd.runtime.audit_trail`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

from . import logfiles

__all__ = [
    "CANCELLED",
    "DECISIONS",
    "FILE_NAME",
    "TIMEOUT",
    "AuditRecord",
    "GuardVerdict",
    "append",
    "canonical",
    "digest",
    "read",
    "rotated",
    "timestamp",
    "trail_path",
]

#: The trail's file name, in ``$ZOT_HOME/logs/``.
FILE_NAME: Final = "audit.jsonl"

#: A guard's question withdrawn before it answered (not counted in its metrics).
CANCELLED: Final = "cancelled"
#: A guard's request that failed on its own deadline (counted as ``silent``).
TIMEOUT: Final = "timeout"

#: The values of :attr:`AuditRecord.decision`.
DECISIONS: Final = ("allow", "block", "rewrite", "error")


class GuardVerdict(msgspec.Struct, omit_defaults=True):
    """One question to one guard during a decision."""

    #: The guard (extension) name.
    guard: str
    #: ``allow``, ``block``, ``rewrite``, ``silent`` (no answer in time),
    #: ``crashed`` (its request failed), ``timeout`` (its request failed on
    #: its own deadline), or ``cancelled`` (not needed: the decision was made
    #: without it, or it was asked again after a rewrite).
    answer: str
    #: Milliseconds from asking to its answer (``None`` if it gave none).
    latency_ms: float | None = None
    #: Its reason, when it blocked; why its request failed, when it crashed.
    reason: str = ""
    #: The round it was asked in (1 first): a guard after one that rewrote
    #: is asked in a later round, about the rewritten event; one asked
    #: again after a first rewrite appears twice, first ``cancelled`` or
    #: with its answer about the payload before that rewrite.
    round: int = 1


class AuditRecord(msgspec.Struct, omit_defaults=True):
    """One intercept decision, as one line of ``audit.jsonl``."""

    #: When it was decided: UTC, ISO 8601 with milliseconds (``...Z``).
    time: str
    #: The workspace's root directory.
    workspace: str
    #: The event intercepted: ``tool_call``, ``assistant_message``, ...
    event: str
    #: ``allow``, ``block``, ``rewrite`` (allowed, with what a guard
    #: rewrote), or ``error`` (no verdict: the decision failed, as when the
    #: event is too large for a guard's frame; the asker got an error).
    decision: str
    #: Why: the blocking guard's reason, zotd's (a refused rewrite, a frame
    #: too large), or "" when allowed.
    reason: str = ""
    #: The guard that blocked ("" if none did).
    blocked_by: str = ""
    #: The tool, for a ``tool_call``.
    tool: str = ""
    #: The call's ``tool_id``, for a ``tool_call`` that has one.
    tool_id: str = ""
    #: The extension whose own ``call_tool`` this call is ("" for an agent's).
    from_extension: str = ""
    #: The workspace's ``sequence`` stamped on the event (orders it among events).
    sequence: int = 0
    #: ``sha256:<hex>`` of the tool arguments' canonical JSON, for a ``tool_call``.
    args_digest: str = ""
    #: The arguments themselves, only with ``audit_args = true``.
    args: msgspec.Raw | None = None
    #: The same two of the arguments as the guards rewrote them.
    rewritten_args_digest: str = ""
    rewritten_args: msgspec.Raw | None = None
    #: Every question to a guard, in the order they were asked.
    guards: list[GuardVerdict] = []
    #: The guards whose rewrites were applied, in order.
    rewrites: list[str] = []
    #: Milliseconds the whole decision took.
    took_ms: float = 0.0


def trail_path(logs_dir: Path) -> Path:
    """``$ZOT_HOME/logs/audit.jsonl``."""
    return logs_dir / FILE_NAME


def rotated(path: Path) -> list[Path]:
    """The trail's files, oldest first: ``.3``, ``.2``, ``.1`` (those there
    are), then ``path`` itself."""
    older = [path.with_name(f"{path.name}.{n}") for n in range(logfiles.KEEP, 0, -1)]
    return [p for p in older if p.exists()] + [path]


def timestamp(seconds: float) -> str:
    """``seconds`` since the epoch as the trail writes times: ``2026-12-02T14:43:49.123Z``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def canonical(raw: bytes) -> bytes:
    """The JSON value ``raw`` in canonical form: object keys sorted, no
    whitespace, UTF-8 (as ``json.dumps(value, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)`` writes strings and integers).

    Raises:
        msgspec.DecodeError: ``raw`` is not JSON.
    """
    return msgspec.json.encode(msgspec.json.decode(raw), order="sorted")


def digest(raw: bytes, *, is_canonical: bool = False) -> str:
    """``sha256:<hex>`` of the :func:`canonical` form of the JSON value ``raw``
    (of ``raw`` itself if it ``is_canonical`` already).

    Raises:
        msgspec.DecodeError: ``raw`` is not JSON.
    """
    data = raw if is_canonical else canonical(raw)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def append(path: Path, data: bytes, max_bytes: int) -> logfiles.Rotation | None:
    """Appends ``data`` (whole lines) to the trail, created 0600 in a private
    directory; rotates it first (:func:`.logfiles.rotate_if_big`) if it
    would grow past ``max_bytes``. A file that does not end with a newline
    (a write cut short, by a full disk say) gets one first, so that the
    cut line does not swallow the next.

    Raises:
        OSError: it cannot be written (then nothing, or part of ``data``, is).
    """
    current = logfiles.size(path)
    rotation = None
    if current and current + len(data) > max_bytes:
        rotation = logfiles.rotate_if_big(path, max(0, max_bytes - len(data)))
    fd = logfiles.open_append(path)
    try:
        if _cut(path):
            data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)
    return rotation


def _cut(path: Path) -> bool:
    """Whether the file at ``path`` ends with part of a line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return False
        return os.pread(fd, 1, st.st_size - 1) != b"\n"
    finally:
        os.close(fd)


_decoder = msgspec.json.Decoder(AuditRecord)


def read(data: bytes, first_line: int = 1) -> Iterator[tuple[int, AuditRecord | None]]:
    """The records of whole lines of a trail (``data`` up to its last
    newline), with their line numbers from ``first_line``; ``None`` for a
    line that is not a record (blank lines are skipped)."""
    lines = data.split(b"\n")
    for n, line in enumerate(lines[:-1], first_line):
        if not line.strip():
            continue
        try:
            yield n, _decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            yield n, None
