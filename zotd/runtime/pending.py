"""Requests waiting for their replies: a table of one-shot slots, by id.

Whoever sends requests over a stream (an extension's :class:`~.calls.Calls`)
keeps one :class:`PendingTable`: it hands out the ids (a counter), holds a
:class:`Slot` per request until the reply comes, and fails the slots whose
deadline passes. The reader that gets a reply pops its slot and resolves it;
the slot wakes the task waiting in :meth:`Slot.wait`, or calls the slot's
callback (a request with no task of its own, on the hot path of tool calls).

Deadlines cost one cancel scope per table, not one per request:
:meth:`PendingTable.expire` sleeps until the earliest deadline, fails what
is due, and sleeps until the next (a cancel scope per call would cost a
fifth of a call's time).

Each slot is typed by the reply it expects (``R``); the table by the
interim updates its requests may get (``U``: a tool call's progress).

The ids come from an :class:`Ids` counter, which tables may share: an
extension's runs (and the requests held while it wakes, see
:mod:`.waking`) draw from one, so an id names one request for the
extension's whole life, whichever run it is sent to.

A slot given the extension's :class:`~zotd.model.metrics.Counters` (a tool
call's or a command's) records how it ended, once, in the one place every
ending passes: :meth:`Slot.resolve` (answered: its latency too),
:meth:`Slot.fail` (a deadline, a crash, nonsense) and :meth:`Slot.withdrawn`
(given up first), whichever kind of extension it went to.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Generic, NoReturn, TypeVar

import trio

from ..model.errors import RequestError
from ..model.metrics import Counters, Ending
from ..protocol.agent import ErrorCode

log = logging.getLogger(__name__)

R = TypeVar("R")
U = TypeVar("U")

#: How a request failed with each error code ended, for the metrics (else ``FAILED``).
_FAILED_AS: dict[str, Ending] = {
    ErrorCode.TIMEOUT: Ending.TIMEOUT,
    ErrorCode.CANCELLED: Ending.CANCEL,
    ErrorCode.SHUTTING_DOWN: Ending.CANCEL,
}


def _clock() -> tuple[Callable[[], float], float]:
    """The current run's clock as a reading and an offset, whose sum is trio
    time: for trio's own clock (``perf_counter() + offset``) the C function
    itself, read without a Python call in between; for another (a test's
    ``MockClock``) its ``current_time``; outside a run ``trio.current_time``."""
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:
        return trio.current_time, 0.0
    offset = getattr(clock, "offset", None)
    if (
        type(clock).__name__ == "SystemClock"
        and isinstance(offset, float)
        and abs(time.perf_counter() + offset - clock.current_time()) < 0.01  # (what it is)
    ):
        return time.perf_counter, offset
    return clock.current_time, 0.0


#: The last clock :func:`reader` was asked about, and its reading.
_read_of: tuple[object, Callable[[], float]] | None = None


def reader() -> Callable[[], float]:
    """A reading of the current run's clock, for time differences (its
    origin is not trio's): :func:`_clock`'s, kept for as long as the run's
    clock stays the same object, so that a caller on the path of every
    intercept pays one lookup, not :func:`_clock`'s checks."""
    global _read_of
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:
        return trio.current_time
    known = _read_of
    if known is not None and known[0] is clock:
        return known[1]
    read = _clock()[0]
    _read_of = (clock, read)
    return read


def given_up(deadline: float) -> Ending:
    """How an awaited request withdrawn now ended: ``TIMEOUT`` if its
    caller's deadline (its effective deadline when it was made) has passed,
    else ``CANCEL`` (the agent's ``cancel``, a hangup)."""
    return Ending.TIMEOUT if trio.current_time() >= deadline else Ending.CANCEL


class Ids:
    """Request ids: ``"1"``, ``"2"``, ... (never reused); one counter may
    serve several tables (see the module's docstring)."""

    __slots__ = ("_last", "_preset")

    def __init__(self) -> None:
        self._last = 0
        self._preset: str | None = None

    def next(self) -> str:
        """A new id, or the one :meth:`preset` gave (once)."""
        rid = self._preset
        if rid is not None:
            self._preset = None
            return rid
        self._last += 1
        return str(self._last)

    def preset(self, rid: str | None) -> None:
        """The next :meth:`next` returns ``rid`` (an id handed out already, for
        a held request sent now under its own id); ``None`` takes it back."""
        self._preset = rid


class Slot(Generic[R, U]):
    """A one-shot slot for the reply to one request: an ``expect``, or an error.

    The waiting task is parked and rescheduled directly (no Event): this is
    on the path of every call.

    Args:
        expect: the type of the reply.
        callback: called with the outcome instead of waking a task.
        on_reply: called with the reply (not an error) before the waiting
            task runs, by the task that resolves it: for what must happen
            before the next frame is read.
        progress: called with each interim update for the request, if set.
        counters: where its ending is recorded (a tool call's or a
            command's), if anywhere; it is timed from when its table
            takes it (:meth:`PendingTable.add`).
    """

    __slots__ = (
        "_callback",
        "_outcome",
        "_task",
        "clock",
        "counters",
        "deadline",
        "expect",
        "on_reply",
        "progress",
        "sent_at",
    )

    def __init__(
        self,
        expect: type[R],
        callback: Callable[[R | RequestError], None] | None = None,
        *,
        on_reply: Callable[[R], None] | None = None,
        progress: Callable[[U], None] | None = None,
        counters: Counters | None = None,
    ) -> None:
        self.expect = expect
        self._callback = callback
        self.on_reply = on_reply
        self.progress = progress
        #: When :meth:`PendingTable.expire` fails it with ``timeout``.
        self.deadline = math.inf
        self._outcome: R | RequestError | None = None
        self._task: trio.lowlevel.Task | None = None
        #: Where its ending is recorded (``None``: nowhere, or recorded already).
        self.counters = counters
        #: When its table took it, for its latency, as read from ``clock``
        #: (its table's reading: see :class:`PendingTable`).
        self.sent_at = 0.0
        self.clock: Callable[[], float] = trio.current_time

    @property
    def callback(self) -> Callable[[R | RequestError], None] | None:
        """What gets the outcome instead of a waiting task, if anything."""
        return self._callback

    @property
    def done(self) -> bool:
        """Whether it has been resolved or failed."""
        return self._outcome is not None

    def resolve(self, reply: object) -> bool:
        """Delivers ``reply`` if it is an ``expect``, else returns ``False``
        (and the caller fails it). Once it is done, later calls change nothing."""
        if not isinstance(reply, self.expect):
            return False
        if self._outcome is None:
            self._outcome = reply
            counters = self.counters
            if counters is not None:
                self.counters = None  # (once)
                counters.replied(reply, self.clock() - self.sent_at)
            if self.on_reply is not None:
                try:
                    self.on_reply(reply)
                except Exception:  # a bug there must not take the reader down with it
                    log.exception("a reply's hook failed")
            callback = self._callback
            if callback is None:
                self._wake(reply)
            else:  # (the path of every tool call: `_wake`, inline)
                try:
                    callback(reply)
                except Exception:  # a bug there must not take the reader down with it
                    log.exception("a reply's callback failed")
        return True

    def fail(self, error: RequestError) -> None:
        """Delivers ``error`` instead of a reply; does nothing if it is done."""
        if self._outcome is None:
            self._outcome = error
            if self.counters is not None:
                self._record(_FAILED_AS.get(error.code, Ending.FAILED))
            self._wake(error)

    def withdrawn(self, ending: Ending = Ending.CANCEL) -> None:
        """It was given up unanswered (its table forgot it): records
        ``ending`` (``CANCEL``, or ``TIMEOUT`` for a caller's deadline) if
        nothing ended it yet."""
        if self._outcome is None and self.counters is not None:
            self._record(ending)

    def _record(self, ending: Ending) -> None:
        counters, self.counters = self.counters, None  # (once)
        assert counters is not None
        counters.ended(ending, self.clock() - self.sent_at)

    def _wake(self, outcome: R | RequestError) -> None:
        if self._callback is not None:
            try:
                self._callback(outcome)
            except Exception:  # a bug there must not take the reader down with it
                log.exception("a reply's callback failed")
        elif self._task is not None:
            trio.lowlevel.reschedule(self._task)
            self._task = None

    async def wait(self) -> R:
        """Waits for the reply and returns it; raises the error instead.

        Cancellation withdraws the wait and nothing else: the slot stays in
        its table, and a reply that comes later still resolves it (unseen);
        the caller pops it (see :meth:`PendingTable.pop`).

        Raises:
            RequestError: what :meth:`fail` delivered.
        """
        if self._outcome is None:
            self._task = trio.lowlevel.current_task()

            def abort(_: object) -> trio.lowlevel.Abort:
                self._task = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        else:
            await trio.lowlevel.checkpoint()
        outcome = self._outcome
        if isinstance(outcome, RequestError):
            raise outcome
        assert outcome is not None
        return outcome


class PendingTable(Generic[U]):
    """The requests sent on one stream and not yet answered, by id.

    Args:
        on_expire: told the id (and the slot) of each request whose deadline
            passed, just before its slot fails with ``timeout`` (to tell the
            peer, say).
        ids: where its ids come from (its own counter if not given; the
            attribute ``ids`` may be set to share one).
    """

    __slots__ = ("_next_expiry", "_offset", "_on_expire", "_read", "_scope", "_slots", "ids")

    def __init__(
        self, on_expire: Callable[[str, Slot[Any, U]], None], ids: Ids | None = None
    ) -> None:
        self._on_expire = on_expire
        self.ids = ids if ids is not None else Ids()
        #: Slots of every reply type, hence ``Any``: each knows its own.
        self._slots: dict[str, Slot[Any, U]] = {}
        #: The earliest deadline of a slot, and the cancel scope of
        #: :meth:`expire` that sleeps until it.
        self._next_expiry = math.inf
        self._scope: trio.CancelScope | None = None
        #: The run's clock, read directly (a table lives in one run): trio
        #: time is ``_read() + _offset``, read on the path of every call
        #: without ``trio.current_time()``'s Python calls.
        self._read, self._offset = _clock()

    def __len__(self) -> int:
        return len(self._slots)

    def new_id(self) -> str:
        """A new request id: ``"1"``, ``"2"``, ... (never reused; see :class:`Ids`)."""
        return self.ids.next()

    def add(self, rid: str, slot: Slot[Any, U], timeout: float | None = None) -> None:
        """Holds ``slot`` under ``rid``; with ``timeout``, it fails with a
        ``timeout`` :class:`RequestError` that many seconds from now (if
        :meth:`expire` runs). It is timed from now, for the metrics (one
        look at the clock for both)."""
        if timeout is not None:
            read = self._read()
            slot.deadline = deadline = read + self._offset + timeout
            if deadline < self._next_expiry:
                self._next_expiry = deadline
                if self._scope is not None:
                    self._scope.deadline = deadline
            if slot.counters is not None:
                slot.sent_at = read
                slot.clock = self._read
        elif slot.counters is not None:
            slot.sent_at = self._read()
            slot.clock = self._read
        self._slots[rid] = slot

    def items(self) -> list[tuple[str, Slot[Any, U]]]:
        """The pending requests, oldest first."""
        return list(self._slots.items())

    def get(self, rid: str) -> Slot[Any, U] | None:
        """The slot of the pending request ``rid``, if it is pending."""
        return self._slots.get(rid)

    def pop(self, rid: str) -> Slot[Any, U] | None:
        """Forgets ``rid`` and returns its slot, if it was pending (resolve or
        fail it: the table will not)."""
        return self._slots.pop(rid, None)

    def fail_all(self, error: RequestError) -> None:
        """Fails every pending request with ``error`` and forgets them."""
        slots, self._slots = self._slots, {}
        for slot in slots.values():
            slot.fail(error)

    async def expire(self) -> NoReturn:
        """Fails each request whose deadline passes; runs until cancelled.

        One cancel scope serves every deadline: it sleeps until the earliest
        (:meth:`add` moves it earlier), pops and fails what is due, and
        sleeps until the next.

        Cancellation ends it and nothing else: requests still pending stay
        pending, past their deadlines too (fail them with :meth:`fail_all`).
        """
        while True:
            with trio.CancelScope(deadline=self._next_expiry) as self._scope:
                await trio.sleep_forever()
            self._scope = None
            now = trio.current_time()
            soonest = self._next_expiry = math.inf  # what callbacks add meanwhile lowers it
            for rid, slot in list(self._slots.items()):
                if slot.deadline > now:
                    soonest = min(soonest, slot.deadline)
                elif self._slots.pop(rid, None) is slot:  # (a callback may have popped it)
                    self._on_expire(rid, slot)
                    slot.fail(RequestError(ErrorCode.TIMEOUT, "no reply in time"))
            self._next_expiry = min(self._next_expiry, soonest)
