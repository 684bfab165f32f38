"""The intercept audit trail: one JSON line per intercept decision.

``$ZOT_HOME/logs/audit.jsonl`` (0600, size-rotated): every decision the
guards made, who was asked, what each answered and how fast, and what was
decided and why. A tool call's arguments are kept as a digest unless
``audit_args = true`` in zotd.toml. ``zot audit`` reads and follows it.

This module is the format (:class:`AuditRecord`) and the plain blocking
file work; the runtime writes records off the event loop.
"""

from __future__ import annotations

import msgspec

__all__ = ["AuditRecord", "GuardVerdict"]


class GuardVerdict(msgspec.Struct, omit_defaults=True):
    """One guard asked during a decision."""

    #: The guard (extension) name.
    guard: str
    #: ``allow``, ``block``, ``rewrite``, ``silent`` (no answer in time),
    #: ``crashed`` (its request failed), or ``cancelled`` (not needed: the
    #: decision was made without it, or it was asked again after a rewrite).
    answer: str
    #: Milliseconds from asking to its answer (``None`` if it gave none).
    latency_ms: float | None = None
    #: Its reason, when it blocked.
    reason: str = ""


class AuditRecord(msgspec.Struct, omit_defaults=True):
    """One intercept decision, as one line of ``audit.jsonl``."""

    #: When it was decided: UTC, ISO 8601 with milliseconds (``...Z``).
    time: str
    #: The workspace's root directory.
    workspace: str
    #: The event intercepted: ``tool_call``, ``assistant_message``, ...
    event: str
    #: ``allow``, ``block`` or ``rewrite`` (allowed, with what a guard rewrote).
    decision: str
    #: Why: the blocking guard's reason, zotd's (a refused rewrite, a frame
    #: too large), or "" when allowed.
    reason: str = ""
    #: The guard that blocked ("" if none did).
    blocked_by: str = ""
    #: The tool, for a ``tool_call``.
    tool: str = ""
    #: ``sha256:<hex>`` of the tool arguments' canonical JSON, for a ``tool_call``.
    args_digest: str = ""
    #: The arguments themselves, only with ``audit_args = true``.
    args: dict[str, object] | None = None
    #: Every guard asked, in the order the decision took their verdicts.
    guards: list[GuardVerdict] = []
    #: The guards whose rewrites were applied, in order.
    rewrites: list[str] = []
    #: Milliseconds the whole decision took.
    took_ms: float = 0.0
