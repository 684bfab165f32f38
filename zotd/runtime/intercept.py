"""One intercept decision: asking the guards, chaining their rewrites.

The guards of an event are ordered by priority, then name. Their verdicts
are taken in that order, as if each were asked in turn and saw what the ones
before it made of the event: a rewrite (``modified_args`` of a
``tool_call``, ``replace_text`` of an ``assistant_message``) is what the
guards after it see, and a ``block`` ends the decision.

Asking in turn would make every guard wait for all those before it, and a
silent guard would use up the 5 s for everyone after it. So guards are asked
at once, in *rounds*: a round runs up to and including the next guard known
to rewrite (one that has rewritten before), and the next round is asked,
with the rewritten payload, once that guard has answered. A guard not yet
known to rewrite that does so ends its round early: the guards after it,
asked about the old payload, are cancelled and asked again. With no
rewriting guards, that is one round: every guard asked at once.

A ``block`` decides at once, without waiting for the guards before it in its
round: they are not known to rewrite, so they could only block too, or allow.
(Should one of them rewrite for the first time just then, the block still
stands, though it judged the payload before that rewrite: a guard errs
towards refusing.) When several guards block, the first to answer names
the reason.

The whole decision is bounded by one deadline; a guard that has not
answered by then, or that fails, counts as allow. (What each guard
answered, and when, is kept for the audit trail: :mod:`.verdicts`.)
Rewritten arguments of an extension's tool must still fit the tool's
schema, else the last guard to rewrite them is taken to block; that check
runs inside the same deadline, off the event loop
(:func:`.argcheck.check_args`), and a check that cannot be made in time (or
at all) blocks too: it fails closed.

A guard drops a line longer than the frame limit unread, and would then
count as silent, so allow. So no ``event_intercept`` frame past
``max_frame_bytes`` is sent: the decision fails with ``frame_too_large``
instead, the agent's event as it stands or as a guard rewrote it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec
import trio

from ..model.audit import GuardVerdict
from ..model.errors import RequestError
from ..model.registry import Tool
from ..protocol import extension as ep
from ..protocol.agent import ErrorCode
from ..protocol.frames import is_json_object
from ..protocol.lines import DEFAULT_MAX_LINE
from . import argcheck
from .extension import Extension
from .verdicts import REWRITES, Verdicts, offered, plain

log = logging.getLogger(__name__)

_MISSING: Final = object()

#: Room for a request id in a frame measured before it has one (ids are
#: decimal counters: 20 digits hold any 64-bit one).
_ID_ROOM: Final = 20

#: What a guard's answer is, once known: its reply, or ``None`` for an allow
#: with nothing more to it (a plain allow, a failure, silence).
Answer = ep.EventInterceptResponse | None

_RESPONSE: Final = ep.EventInterceptResponse


class Outcome:
    """What the guards decided.

    Attributes:
        blocked_by: the guard that blocked ("" if none did).
        reason: why (the guard's reason, or zotd's when it refused a rewrite).
        args: the rewritten ``tool_args``, if a guard rewrote them.
        text: the rewritten ``text``, if a guard replaced it.
        rewritten_by: the guards whose rewrites were applied, in order.
        verdicts: every question to a guard, in the order asked (once decided).
        took: seconds the decision took (timed by :func:`.audit_trail.recording`).
    """

    __slots__ = ("args", "blocked_by", "reason", "rewritten_by", "text", "took", "verdicts")

    def __init__(self) -> None:
        self.blocked_by = ""
        self.reason = ""
        self.args: msgspec.Raw | None = None
        self.text: str | None = None
        self.rewritten_by: list[str] = []
        self.verdicts: list[GuardVerdict] = []
        self.took = 0.0

    def block(self, guard: str, reason: str) -> None:
        self.blocked_by = guard
        self.reason = reason


#: The most of an intercept's deadline kept back for checking rewritten
#: arguments: once a guard has rewritten them, the guards still thinking get
#: the deadline less this (or less a tenth of it, if smaller), so that a
#: silent guard cannot leave the check no time and so block the call.
CHECK_RESERVE = 0.5


def check_reserve(limit: float) -> float:
    """What of an intercept's ``limit`` the argument check is sure to have."""
    return min(CHECK_RESERVE, limit / 10)


class Decision:
    """Asks ``guards`` (already in order) about one event.

    Args:
        guards: the intercepting extensions, in order (see :func:`.guard_order.order`).
        event: the event's name.
        payload: the event's fields as the agent sent them, ``event`` included.
        rewriters: names of the guards known to rewrite; updated as guards do.
        tools: the registered tools by name, whose schemas rewritten
            ``tool_args`` must fit (``None``: not checked).
        max_frame: the longest ``event_intercept`` frame to send, in bytes
            without the newline (``max_frame_bytes``).
        outcome: the :class:`Outcome` to fill in (a new one if not given).
    """

    def __init__(
        self,
        guards: Sequence[Extension],
        event: str,
        payload: dict[str, msgspec.Raw],
        rewriters: set[str],
        tools: Mapping[str, Tool] | None = None,
        max_frame: int = DEFAULT_MAX_LINE,
        outcome: Outcome | None = None,
    ) -> None:
        self._guards = guards
        self._max_frame = max_frame
        self._tools = tools
        self._event = event
        self._payload = dict(payload)
        self._rewriters = rewriters
        self._answers: list[object] = [_MISSING] * len(guards)
        #: Requests in flight: guard index -> request id.
        self._asked: dict[int, str] = {}
        #: Every guard before this index has been taken into account.
        self._pos = 0
        #: The last guard of the round being asked.
        self._round_end = -1
        #: The first guard that answered ``block`` (its answer decides at once).
        self._blocker: int | None = None
        self._wake = trio.Event()
        self._verdicts = Verdicts(event)
        self._rounds = 0
        self._timed_out = False
        self.outcome = outcome if outcome is not None else Outcome()

    async def run(self, limit: float) -> Outcome:
        """Decides, within ``limit`` seconds.

        Rewritten ``tool_args`` are checked against the tool's schema within
        what is left of ``limit`` (see :func:`.argcheck.check_args`); once
        they are rewritten, the guards still thinking get ``limit`` less
        :func:`check_reserve`, so that the check has that much at least.

        Raises:
            RequestError: ``frame_too_large``: the event, as the agent sent it
                or as guards rewrote it, does not fit in an ``event_intercept``
                frame (see :meth:`_ask_round`); the guards still thinking are
                sent ``cancel``. Nothing else: a guard's failure counts as allow.

        Cancellation withdraws every question still in flight (each guard
        still thinking is sent ``cancel``), abandons a schema check (its
        child process is killed), then raises :exc:`trio.Cancelled`.
        """
        guards, answers, out = self._guards, self._answers, self.outcome
        deadline = trio.current_time() + limit
        try:
            self._ask_round()
            with trio.move_on_at(deadline) as scope:
                while self._pos < len(guards) and not out.blocked_by:
                    if self._blocker is not None:
                        self._apply(guards[self._blocker], answers[self._blocker])  # type: ignore[arg-type]
                        break
                    answer = answers[self._pos]
                    if answer is _MISSING:
                        self._wake = trio.Event()
                        await self._wake.wait()
                        continue
                    if answer is None:  # (an allow: nothing to apply)
                        self._pos += 1
                        if self._round_end < self._pos < len(guards):
                            self._ask_round()
                        continue
                    self._take(answer)  # type: ignore[arg-type]
                    if out.args is not None and self._checked_tool() is not None:
                        # The check of the rewrite must have time left.
                        scope.deadline = min(scope.deadline, deadline - check_reserve(limit))
            if scope.cancelled_caught:
                self._timed_out = True
                self._settle_at_deadline(limit)
            if out.args is not None and not out.blocked_by:
                await self._check_rewritten_args(deadline)
            await trio.lowlevel.checkpoint_if_cancelled()
        finally:
            for i, rid in self._asked.items():
                guards[i].withdraw(rid)  # tells a guard still thinking with `cancel`
            self._asked.clear()
            out.verdicts = self._verdicts.close(timed_out=self._timed_out)
        return out

    # --- asking ------------------------------------------------------------------------

    def _ask_round(self) -> None:
        """Asks every guard from ``_pos`` up to the next known rewriter, at once.

        Raises:
            RequestError: ``frame_too_large``, asking no one, if the frame
                would be longer than ``max_frame``.
        """
        guards, start = self._guards, self._pos
        end = start
        while end < len(guards) - 1 and guards[end].name not in self._rewriters:
            end += 1
        self._round_end = end
        self._rounds += 1
        make = ep.event_intercept_maker(self._payload)
        size = len(make("")) - 1 + _ID_ROOM
        if size > self._max_frame:
            raise self._too_large(size)
        answers, asked, on_answer = self._answers, self._asked, self._on_answer
        self._verdicts.asked_all(start, guards[start : end + 1], self._rounds)
        for i in range(start, end + 1):
            answers[i] = _MISSING
            try:
                # Each guard has its own stdin: written at once, not batched.
                asked[i] = guards[i].ask(make, _RESPONSE, functools.partial(on_answer, i))
            except RequestError as exc:
                self._on_failure(i, exc)

    def _too_large(self, size: int) -> RequestError:
        """The error for an ``event_intercept`` frame of ``size`` bytes."""
        over = f"{size} bytes, over the {self._max_frame}-byte frame limit (max_frame_bytes)"
        rewriters = self.outcome.rewritten_by
        if not rewriters:
            message = (
                f"intercept refused: the event_intercept frame for its guards would take {over}; "
                "a guard would drop it unread"
            )
        else:
            names = ", ".join(repr(n) for n in rewriters)
            message = (
                f"intercept refused: as rewritten by {names}, the event_intercept frame for "
                f"the guards after them would take {over}; a guard would drop it unread"
            )
            guard = next((g for g in self._guards if g.name == rewriters[-1]), None)
            if guard is not None:
                guard.note(f"rewrite refused: {message}")
        log.info("%s", message)
        return RequestError(ErrorCode.FRAME_TOO_LARGE, message)

    def _on_answer(self, i: int, outcome: ep.EventInterceptResponse | RequestError) -> None:
        # From the reader of guard i (or its expiry task): no request is
        # answered twice, and a withdrawn one is not answered at all.
        # The deciding task is woken only when it has something to do: a
        # block, a whole round in, or a rewrite at the head (to ask the
        # guards after it again sooner), not once per answer.
        asked = self._asked
        asked.pop(i, None)
        if isinstance(outcome, RequestError):
            self._on_failure(i, outcome)
            urgent = False
        elif plain(outcome):  # (the usual answer: an allow, nothing to apply)
            self._verdicts.allowed(i)
            self._answers[i] = None
            urgent = False
        else:
            self._verdicts.answered(i, outcome)
            self._answers[i] = outcome
            if outcome.block:
                urgent = True
                if self._blocker is None:
                    self._blocker = i
            else:
                urgent = i == self._pos and any(offered(outcome).values())
        if urgent or not asked:
            self._wake.set()

    def _on_failure(self, i: int, exc: RequestError) -> None:
        log.info("intercept: %s counts as allow: %s", self._guards[i].name, exc.message)
        self._verdicts.failed(i, exc)
        self._answers[i] = None

    def _restart_round(self) -> None:
        """The payload changed under guards already asked: ask them again."""
        for i in range(self._pos, self._round_end + 1):
            rid = self._asked.pop(i, None)
            if rid is not None:
                self._guards[i].withdraw(rid)
                self._verdicts.withdrawn(i)
        self._ask_round()

    # --- taking answers in order -------------------------------------------------------

    def _take(self, answer: Answer) -> None:
        """Takes the answer of the guard at ``_pos`` into account and moves on."""
        rewrote = answer is not None and self._apply(self._guards[self._pos], answer)
        if self.outcome.blocked_by:
            return
        self._pos += 1
        if self._pos >= len(self._guards):
            return
        if rewrote and self._pos <= self._round_end:
            self._restart_round()
        elif self._pos > self._round_end:
            self._ask_round()

    def _apply(self, guard: Extension, answer: ep.EventInterceptResponse) -> bool:
        """Applies one guard's verdict; ``True`` if it rewrote the payload."""
        out = self.outcome
        if answer.block:
            out.block(guard.name, answer.reason or f"blocked by extension {guard.name!r}")
            return False
        # Which rewrite the event takes, if any; another one is ignored (and noted).
        wanted, offers = REWRITES.get(self._event), offered(answer)
        for field in (f for f, present in offers.items() if present and f != wanted):
            guard.note(
                f"ignored `{field}` in its answer about `{self._event}`: it does not apply there"
            )
        if wanted is None or not offers[wanted]:
            return False
        self._rewriters.add(guard.name)
        if wanted == "modified_args":
            if not is_json_object(answer.modified_args):
                reason = (
                    f"extension {guard.name!r} rewrote the tool's arguments into something "
                    "that is not a JSON object"
                )
                guard.note(f"rewrite refused: {reason}")
                out.block(guard.name, reason)
                return False
            out.args = self._payload["tool_args"] = answer.modified_args
        else:
            out.text = answer.replace_text
            self._payload["text"] = msgspec.Raw(msgspec.json.encode(answer.replace_text))
        out.rewritten_by.append(guard.name)
        return True

    async def _check_rewritten_args(self, deadline: float) -> None:
        """Blocks the call if rewritten arguments of an extension's tool do not
        fit its schema, or cannot be checked by ``deadline``."""
        out = self.outcome
        tool = self._checked_tool()
        if tool is None or out.args is None:
            return
        tool_name = tool.name
        names = ", ".join(repr(n) for n in out.rewritten_by)
        try:
            error = await argcheck.check_args(tool, out.args, deadline)
        except argcheck.Unchecked as exc:
            reason = (
                f"the arguments of tool {tool_name!r} as rewritten by {names} could not be "
                f"checked against its schema within the intercept's deadline: {exc}"
            )
        else:
            if error is None:
                return
            reason = (
                f"the arguments of tool {tool_name!r} as rewritten by {names} "
                f"do not fit its schema: {error}"
            )
        last = out.rewritten_by[-1]
        log.info("intercept: refused a rewrite: %s", reason)
        guard = next((g for g in self._guards if g.name == last), None)
        if guard is not None:
            guard.note(f"rewrite refused: {reason}")
        out.block(last, reason)

    def _checked_tool(self) -> Tool | None:
        """The extension's tool whose arguments are at stake (rewritten
        arguments of it are checked against its schema); ``None`` for a
        built-in tool, an unknown one, or an event that is no tool call."""
        try:
            tool_name = msgspec.json.decode(self._payload.get("tool_name", b'""'))
        except msgspec.DecodeError:
            return None
        tools = self._tools or {}
        return tools.get(tool_name) if isinstance(tool_name, str) else None

    def _settle_at_deadline(self, timeout: float) -> None:
        # Whoever has not answered counts as allow. Answers already in, to the
        # payload as it stands, still count, in order, up to the first
        # rewrite: the guards after it never saw the rewritten payload.
        log.info("intercept: guards silent for %g s; they count as allow", timeout)
        if self._blocker is not None:
            self._apply(self._guards[self._blocker], self._answers[self._blocker])  # type: ignore[arg-type]
            return
        while self._pos <= self._round_end and not self.outcome.blocked_by:
            answer = self._answers[self._pos]
            self._pos += 1
            if answer is not _MISSING and answer is not None:
                assert isinstance(answer, ep.EventInterceptResponse)
                if self._apply(self._guards[self._pos - 1], answer):
                    break
