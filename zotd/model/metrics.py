"""What an extension has done: counts, recent latencies, intercept answers.

One :class:`Counters` per extension (``Extension.metrics``), kept across
its restarts; the runtime records into it where each request ends (plain
attribute updates: cheap enough to keep on), and ``list_extensions`` shows
:meth:`Counters.figures` as :class:`~zotd.protocol.agent_data.Metrics`.

What counts as a call is a tool call or a command (:func:`counted`):
intercept questions are counted apart, by answer (:meth:`Counters.answered`).

Latency percentiles are over the last :data:`WINDOW` answers only, so
they say how it does now, and memory stays bounded (256 floats).
"""

from __future__ import annotations

import math
from collections import deque
from enum import StrEnum

from ..protocol import extension as ep
from ..protocol.agent_data import Metrics

__all__ = ["COUNTED", "WINDOW", "Counters", "Ending", "GuardAnswer", "counted", "ending_of"]

#: How many recent answers the latency percentiles are taken over.
WINDOW = 256


class Ending(StrEnum):
    """How a request to an extension ended."""

    OK = "ok"  # it answered with a result
    ERROR = "error"  # it answered with an error (a tool's is_error, a command's error)
    FAILED = "failed"  # no answer could come: it crashed, was stuck, answered nonsense
    TIMEOUT = "timeout"  # no answer within its deadline
    CANCEL = "cancel"  # withdrawn first: by the agent, or by zotd shutting down


class GuardAnswer(StrEnum):
    """What a guard made of one intercept, as the audit trail and metrics count it."""

    ALLOW = "allow"
    BLOCK = "block"
    REWRITE = "rewrite"
    SILENT = "silent"  # no answer before the decision's deadline
    CRASHED = "crashed"  # its request failed (it exited, or broke its pipe)


# (Looked up once: these are on the path of every call.)
_TOOL_RESULT = ep.ToolResult
_COMMAND_RESPONSE = ep.CommandResponse
_OK, _ERROR, _FAILED, _TIMEOUT = Ending.OK, Ending.ERROR, Ending.FAILED, Ending.TIMEOUT


#: The replies of the requests the metrics count as calls: tool calls and
#: commands (not intercept questions).
COUNTED: frozenset[type] = frozenset({_TOOL_RESULT, _COMMAND_RESPONSE})


def counted(expect: type) -> bool:
    """Whether a request expecting ``expect`` is a call the metrics count
    (a tool call or a command; not an intercept question)."""
    return expect in COUNTED


def _is_error(reply: object) -> bool:
    """Whether ``reply`` is an error: a tool result with ``is_error``, a
    command response with an ``error``."""
    kind = type(reply)
    if kind is _TOOL_RESULT:
        return reply.is_error  # type: ignore[attr-defined, no-any-return]
    if kind is _COMMAND_RESPONSE:
        return bool(reply.error)  # type: ignore[attr-defined]
    return False


def ending_of(reply: object) -> Ending:
    """How a request ended that got ``reply``: ``OK``, or ``ERROR`` for a
    tool result with ``is_error`` or a command response with an ``error``."""
    return _ERROR if _is_error(reply) else _OK


class Counters:
    """One extension's counts and recent latencies."""

    __slots__ = ("_latencies", "calls", "cancels", "errors", "intercepts", "timeouts")

    def __init__(self) -> None:
        self.calls = 0
        self.errors = 0
        self.timeouts = 0
        self.cancels = 0
        self.intercepts: dict[str, int] = {}
        self._latencies: deque[float] = deque(maxlen=WINDOW)

    def ended(self, ending: Ending, seconds: float) -> None:
        """A tool call or command to it ended, ``seconds`` after it was sent.

        ``OK`` and ``ERROR`` are answers: counted as calls, their latency
        kept. ``FAILED`` is a call and an error, but no answer (its time
        says when it failed, not how fast it answers). ``TIMEOUT`` and
        ``CANCEL`` are not calls.
        """
        if ending is _OK:
            self.calls += 1
            self._latencies.append(seconds)
        elif ending is _ERROR:
            self.calls += 1
            self.errors += 1
            self._latencies.append(seconds)
        elif ending is _FAILED:
            self.calls += 1
            self.errors += 1
        elif ending is _TIMEOUT:
            self.timeouts += 1
        else:
            self.cancels += 1

    def replied(self, reply: object, seconds: float) -> None:
        """:meth:`ended` for a reply: ``ERROR`` if it is one (see
        :func:`ending_of`), else ``OK`` (the path of every answer, kept short)."""
        self.calls += 1
        kind = type(reply)  # (_is_error, inline)
        if (kind is _TOOL_RESULT and reply.is_error) or (  # type: ignore[attr-defined]
            kind is _COMMAND_RESPONSE and reply.error  # type: ignore[attr-defined]
        ):
            self.errors += 1
        self._latencies.append(seconds)

    def answered(self, answer: GuardAnswer) -> None:
        """It answered an intercept this way."""
        self.intercepts[answer] = self.intercepts.get(answer, 0) + 1

    def figures(
        self,
        *,
        late_replies: int = 0,
        rss_bytes: int | None = None,
        cpu_percent: float | None = None,
        cpu_s: float | None = None,
    ) -> Metrics:
        """The counts as ``list_extensions`` shows them."""
        ordered = sorted(self._latencies)
        return Metrics(
            calls=self.calls,
            errors=self.errors,
            timeouts=self.timeouts,
            cancels=self.cancels,
            late_replies=late_replies,
            p50_ms=_ms(_rank(ordered, 0.50)),
            p95_ms=_ms(_rank(ordered, 0.95)),
            intercepts=dict(sorted(self.intercepts.items())),
            rss_bytes=rss_bytes,
            cpu_percent=cpu_percent,
            cpu_s=cpu_s,
        )


def _rank(ordered: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of ``ordered`` (``None`` if empty)."""
    if not ordered:
        return None
    index = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[index]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)
