"""What each guard asked made of one intercept decision, and how fast.

A :class:`~.intercept.Decision` tells its :class:`Verdicts` when it asks a
guard, when the guard answers or its request fails, and when it withdraws
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
"""

from __future__ import annotations

from typing import Final

import trio

from ..model.audit import CANCELLED, TIMEOUT, GuardVerdict
from ..model.errors import RequestError
from ..model.metrics import GuardAnswer
from ..protocol import extension as ep
from ..protocol.agent import ErrorCode
from .extension import Extension

#: The rewrite each event takes: the reply field, keyed by event.
REWRITES: Final = {"tool_call": "modified_args", "assistant_message": "replace_text"}


def offered(answer: ep.EventInterceptResponse) -> dict[str, bool]:
    """Which rewrites ``answer`` offers, by reply field (an event takes one at most)."""
    return {"modified_args": answer.rewrites_args(), "replace_text": bool(answer.replace_text)}


def classify(event: str, answer: ep.EventInterceptResponse) -> GuardAnswer:
    """What ``answer`` about ``event`` is: a block, a rewrite the event takes
    (another one is ignored: that is an allow), or an allow."""
    if answer.block:
        return GuardAnswer.BLOCK
    wanted = REWRITES.get(event)
    if wanted is not None and offered(answer)[wanted]:
        return GuardAnswer.REWRITE
    return GuardAnswer.ALLOW


class _Question:
    """One question to one guard."""

    __slots__ = ("answer", "asked_at", "guard", "latency", "reason", "round")

    def __init__(self, guard: Extension, round_: int, now: float) -> None:
        self.guard = guard
        self.round = round_
        self.asked_at = now
        self.answer = ""
        self.latency: float | None = None
        self.reason = ""

    def settle(self, answer: str, reason: str = "", *, timed: bool = True) -> None:
        self.answer = answer
        self.reason = reason
        if timed:
            self.latency = trio.current_time() - self.asked_at
        if answer != CANCELLED:
            counted = GuardAnswer.SILENT if answer == TIMEOUT else GuardAnswer(answer)
            self.guard.metrics.answered(counted)

    def verdict(self) -> GuardVerdict:
        latency = None if self.latency is None else round(self.latency * 1000, 3)
        return GuardVerdict(
            guard=self.guard.name,
            answer=self.answer,
            latency_ms=latency,
            reason=self.reason,
            round=self.round,
        )


class Verdicts:
    """The questions of one decision about ``event``, in the order asked.

    Guards are keyed by their index in the decision's guard list: a guard
    has at most one question open at a time.
    """

    __slots__ = ("_event", "_open", "_questions")

    def __init__(self, event: str) -> None:
        self._event = event
        self._questions: list[_Question] = []
        self._open: dict[int, _Question] = {}

    def asked(self, i: int, guard: Extension, round_: int) -> None:
        """Guard ``i`` was asked, in round ``round_`` (1 first)."""
        question = _Question(guard, round_, trio.current_time())
        self._questions.append(question)
        self._open[i] = question

    def answered(self, i: int, answer: ep.EventInterceptResponse) -> None:
        """Guard ``i`` answered its open question."""
        question = self._open.pop(i, None)
        if question is not None:
            kind = classify(self._event, answer)
            question.settle(kind, answer.reason if kind is GuardAnswer.BLOCK else "")

    def gave(self, i: int, answer: GuardAnswer) -> None:
        """Guard ``i`` answered its open question, in effect ``answer`` (for
        an event whose answers are judged by the asker: the system prompt)."""
        question = self._open.pop(i, None)
        if question is not None:
            question.settle(answer)

    def silent(self, i: int) -> None:
        """Guard ``i`` gave no answer to its open question in time."""
        question = self._open.pop(i, None)
        if question is not None:
            question.settle(GuardAnswer.SILENT, timed=False)

    def failed(self, i: int, exc: RequestError) -> None:
        """Guard ``i``'s request failed (it exited, broke its pipe, answered
        nonsense; or it timed out on its own deadline)."""
        question = self._open.pop(i, None)
        if question is not None:
            answer = TIMEOUT if exc.code == ErrorCode.TIMEOUT else GuardAnswer.CRASHED
            question.settle(answer, exc.message)

    def withdrawn(self, i: int) -> None:
        """Guard ``i``'s question was withdrawn before it answered: it is
        asked again, or the decision no longer needs it."""
        question = self._open.pop(i, None)
        if question is not None:
            question.settle(CANCELLED, timed=False)

    def close(self, *, timed_out: bool) -> list[GuardVerdict]:
        """Settles the questions still open (``silent`` if the deadline passed,
        else ``cancelled``) and returns every verdict, in the order asked."""
        for question in self._open.values():
            if timed_out:
                question.settle(GuardAnswer.SILENT, timed=False)
            else:
                question.settle(CANCELLED, timed=False)
        self._open.clear()
        return [q.verdict() for q in self._questions]
