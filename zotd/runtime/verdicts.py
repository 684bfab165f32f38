"""What each guard asked made of one intercept decision, and how fast.

A :class:`~.intercept.Decision` tells its :class:`Verdicts` when it asks
guards, when a guard answers or its request fails, and when it withdraws
the question (the decision was made without it, or the payload changed
under it and it is asked again). When the decision ends, every question
still open is ``silent`` if the deadline passed, else ``cancelled``; the
verdicts, in the order the guards were asked, go into the decision's
:class:`~.intercept.Outcome` and from there into the audit trail
(:mod:`.audit_trail`).

Each guard's answer is also counted on its metrics
(:meth:`~zotd.model.metrics.Counters.answered`) as it is known: ``allow``,
``block``, ``rewrite``, ``crashed``, and ``silent`` at the end (a request
that failed with ``timeout`` counts as silent there). A cancelled question
is not counted: the guard was not given its chance.

This is on the path of every guard's answer: the questions are kept field
by field (one list each, a round's appended at once, with one reading of
the clock), the time is read from the run's clock directly
(:func:`.pending.reader`), and a plain allow (:func:`plain`, the usual
answer) is recorded without being classified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from ..model.audit import CANCELLED, TIMEOUT, GuardVerdict
from ..model.errors import RequestError
from ..model.metrics import GuardAnswer
from ..protocol import extension as ep
from ..protocol.agent import ErrorCode
from .extension import Extension
from .pending import reader

#: The rewrite each event takes: the reply field, keyed by event.
REWRITES: Final = {"tool_call": "modified_args", "assistant_message": "replace_text"}

_ALLOW, _BLOCK, _REWRITE = GuardAnswer.ALLOW, GuardAnswer.BLOCK, GuardAnswer.REWRITE
_SILENT, _CRASHED = GuardAnswer.SILENT, GuardAnswer.CRASHED


def offered(answer: ep.EventInterceptResponse) -> dict[str, bool]:
    """Which rewrites ``answer`` offers, by reply field (an event takes one at most)."""
    return {"modified_args": answer.rewrites_args(), "replace_text": bool(answer.replace_text)}


def plain(answer: ep.EventInterceptResponse) -> bool:
    """Whether ``answer`` only allows: no block, nothing offered (the usual
    answer, told apart without :func:`offered`)."""
    return not (answer.block or answer.modified_args or answer.replace_text)


def classify(event: str, answer: ep.EventInterceptResponse) -> GuardAnswer:
    """What ``answer`` about ``event`` is: a block, a rewrite the event takes
    (another one is ignored: that is an allow), or an allow."""
    if answer.block:
        return _BLOCK
    if plain(answer):
        return _ALLOW
    wanted = REWRITES.get(event)
    if wanted is not None and offered(answer)[wanted]:
        return _REWRITE
    return _ALLOW


class Verdicts:
    """The questions of one decision about ``event``, in the order asked.

    Guards are keyed by their index in the decision's guard list: a guard
    has at most one question open at a time. The questions are kept field
    by field, one list each, indexed by the order they were asked in.
    """

    __slots__ = (
        "_answers",
        "_asked_at",
        "_event",
        "_guards",
        "_latencies",
        "_now",
        "_open",
        "_reasons",
        "_rounds",
    )

    def __init__(self, event: str) -> None:
        self._event = event
        self._guards: list[Extension] = []
        self._rounds: list[int] = []
        self._asked_at: list[float] = []
        self._answers: list[str] = []
        self._latencies: list[float | None] = []
        self._reasons: list[str] = []
        #: The open question of each guard asked: guard index -> question index.
        self._open: dict[int, int] = {}
        self._now: Callable[[], float] = reader()

    def asked(self, i: int, guard: Extension, round_: int) -> None:
        """Guard ``i`` was asked, in round ``round_`` (1 first)."""
        self.asked_all(i, (guard,), round_)

    def asked_all(self, start: int, guards: Sequence[Extension], round_: int) -> None:
        """Guards ``start`` to ``start + len(guards) - 1`` were asked at once,
        in round ``round_``."""
        first, count = len(self._guards), len(guards)
        self._open.update(
            zip(range(start, start + count), range(first, first + count), strict=True)
        )
        self._guards += guards
        self._rounds += [round_] * count
        self._asked_at += [self._now()] * count
        self._answers += [""] * count
        self._latencies += [None] * count
        self._reasons += [""] * count

    def answered(self, i: int, answer: ep.EventInterceptResponse) -> None:
        """Guard ``i`` answered its open question."""
        q = self._open.pop(i, None)
        if q is not None:
            kind = classify(self._event, answer)
            self._settle(q, kind, kind, answer.reason if kind is _BLOCK else "", timed=True)

    def allowed(self, i: int) -> None:
        """Guard ``i`` answered its open question with a plain allow (see
        :func:`plain`): :meth:`answered`, without looking at the answer."""
        q = self._open.pop(i, None)
        if q is not None:
            self._answers[q] = _ALLOW
            self._latencies[q] = self._now() - self._asked_at[q]
            self._guards[q].metrics.answered(_ALLOW)

    def gave(self, i: int, answer: GuardAnswer) -> None:
        """Guard ``i`` answered its open question, in effect ``answer`` (for
        an event whose answers are judged by the asker: the system prompt)."""
        q = self._open.pop(i, None)
        if q is not None:
            self._settle(q, answer, answer, "", timed=True)

    def silent(self, i: int) -> None:
        """Guard ``i`` gave no answer to its open question in time."""
        q = self._open.pop(i, None)
        if q is not None:
            self._settle(q, _SILENT, _SILENT, "", timed=False)

    def failed(self, i: int, exc: RequestError) -> None:
        """Guard ``i``'s request failed (it exited, broke its pipe, answered
        nonsense; or it timed out on its own deadline)."""
        q = self._open.pop(i, None)
        if q is not None:
            if exc.code == ErrorCode.TIMEOUT:  # (counted as silent)
                self._settle(q, TIMEOUT, _SILENT, exc.message, timed=True)
            else:
                self._settle(q, _CRASHED, _CRASHED, exc.message, timed=True)

    def withdrawn(self, i: int) -> None:
        """Guard ``i``'s question was withdrawn before it answered: it is
        asked again, or the decision no longer needs it."""
        q = self._open.pop(i, None)
        if q is not None:
            self._answers[q] = CANCELLED

    def close(self, *, timed_out: bool) -> list[GuardVerdict]:
        """Settles the questions still open (``silent`` if the deadline passed,
        else ``cancelled``) and returns every verdict, in the order asked."""
        for q in self._open.values():
            if timed_out:
                self._settle(q, _SILENT, _SILENT, "", timed=False)
            else:
                self._answers[q] = CANCELLED
        self._open.clear()
        return [
            GuardVerdict(
                guard.name, answer, None if latency is None else round(latency * 1000, 3), reason, n
            )
            for guard, answer, latency, reason, n in zip(
                self._guards,
                self._answers,
                self._latencies,
                self._reasons,
                self._rounds,
                strict=True,
            )
        ]

    def _settle(
        self, q: int, answer: str, counted: GuardAnswer, reason: str, *, timed: bool
    ) -> None:
        """Gives question ``q`` its ``answer`` (and its latency if ``timed``),
        counted on its guard's metrics as ``counted``."""
        self._answers[q] = answer
        self._reasons[q] = reason
        if timed:
            self._latencies[q] = self._now() - self._asked_at[q]
        self._guards[q].metrics.answered(counted)
