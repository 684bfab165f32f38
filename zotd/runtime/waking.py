"""The requests of an extension that sleeps: held while it wakes, then sent.

An extension that is lazy (``lazy = true``) or stops when idle
(``idle_stop``) has no process while it sleeps, yet its tools stay listed.
:class:`Waking` stands in front of the current run's :class:`~.link.Link`
(its :class:`~.calls.Calls`, or an MCP server's calls):

* While it is *open* (the process is up and, after a wake, ready),
  requests go straight through: nothing is held, nothing is copied.
* While it is *holding* (asleep, being stopped for idleness, or woken and
  not yet ready), a tool call or guard question (:meth:`Waking.ask`) is
  held: its frame is made at once under an id of the extension's own
  counter (:class:`~.pending.Ids`), and its slot waits in a table whose
  deadlines are the call's own (a tool's 60 s, an intercept's 5 s). An
  awaited request (:meth:`Waking.request`: a command, a system prompt
  guard) waits for the process within its caller's cancel scope. An event
  (``send_nowait`` of an ``event`` frame) is held too. Each asks for a wake
  (:attr:`Waking.wanted`).
* Once the woken process is ready, :meth:`Waking.open` sends what is held,
  in order, each request under the id it was given (so a withdrawal, a
  late ``parent_id`` or ``Extension.serving`` need no mapping) and with
  what is left of its deadline. A request withdrawn or past its deadline
  while held is never sent. If the process fails to start,
  :meth:`Waking.fail` fails what is held at once, with the reason.

Held memory is bounded in bytes: the frames held (requests and events) at
most ``extension_queue_bytes``, events at most ``extension_queue`` frames;
a request past the bound fails with ``busy``, an event is dropped (and
noted). The number of held requests is bounded by the daemon's own busy
limits (``max_client_requests``, ``max_requests``): each is a client's
request in flight.

It also keeps the idle clock (:meth:`Waking.idle`): work is a request in
flight, held or waited for, and each event delivered; ``idle_stop``
seconds after the last work ended, the extension is put to sleep.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from ..model.errors import RequestError, extension_failed
from ..model.metrics import Ending, counted
from ..protocol import extension as ep
from ..protocol.agent import ErrorCode
from .link import Link, R
from .pending import Ids, PendingTable, Slot, given_up

if TYPE_CHECKING:
    from .extension import Extension

__all__ = ["EVENT_PREFIX", "Waking"]

#: How an ``event`` frame begins (``ep.encode_event``): the one one-way
#: frame that is held for a sleeping extension (and wakes it).
EVENT_PREFIX = b'{"type":"event",'


class _Named(msgspec.Struct):
    """What a held frame is about, for the log's "woke for ..." line."""

    type: str = ""
    name: str = ""
    event: str = ""


_decode_named = msgspec.json.Decoder(_Named).decode


def _same(frame: bytes, _rid: str) -> bytes:
    """A held request's frame, made under its id already."""
    return frame


def what(frame: bytes) -> str:
    """``tool NAME``, ``command /NAME``, ``event NAME`` or ``intercept NAME``."""
    try:
        named = _decode_named(frame)
    except msgspec.DecodeError:
        return "a request"
    if named.type == "tool_call":
        return f"tool {named.name}"
    if named.type == "command_invoked":
        return f"command /{named.name}"
    if named.type == "event_intercept":
        return f"intercept {named.event}"
    return f"event {named.event}" if named.type == "event" else f"`{named.type}`"


class Waking:
    """Holds an extension's requests while it sleeps or wakes (see the module).

    Args:
        ext: the extension (its name, state and log).
        idle_stop: seconds of no work before it is put to sleep (0 never).
        queue: the most events held (``extension_queue``).
        queue_bytes: the most bytes of frames held (``extension_queue_bytes``).
    """

    def __init__(self, ext: Extension, *, idle_stop: float, queue: int, queue_bytes: int) -> None:
        self._ext = ext
        self._idle_stop = idle_stop
        self._queue = queue
        self._queue_bytes = queue_bytes
        #: The extension's request ids, shared with every run's link.
        self.ids = Ids()
        #: The current run's link (``None`` before a process starts).
        self.link: Link | None = None
        #: Whether requests are held (asleep, being put to sleep, or waking).
        self.holding = False
        #: Set when a held request asks for a wake (and :attr:`reason` says which).
        self.wanted = trio.Event()
        self.reason = ""
        #: Called (once) at the first wake asked for: starts the supervisor of
        #: an extension that dozes without one (see ``SleepCycle.doze``).
        self.on_want: Callable[[], None] | None = None
        #: The held tool calls and guard questions, with their deadlines.
        self.held: PendingTable[ep.ToolProgress] = PendingTable(self._expired, self.ids)
        #: What is held, in order: a request's id (its frame in ``_frames``) or an event.
        self._order: list[str | bytes] = []
        self._frames: dict[str, bytes] = {}
        self._events = 0
        self._bytes = 0
        self._dropped = 0
        #: Set when holding ends (open, or failed); replaced when it begins again.
        self._released = trio.Event()
        self._failure: RequestError | None = None
        # The idle clock: awaited requests in flight, and when work last ended.
        self._waiting = 0
        self.last_work = -math.inf
        self._idle_scope: trio.CancelScope | None = None

    # --- the lifecycle (the extension's) -------------------------------------------

    def attach(self, link: Link) -> None:
        """A run's link: it draws its ids from :attr:`ids`."""
        link.pending.ids = self.ids
        self.link = link

    def hold(self) -> None:
        """Requests are held from now on (the extension sleeps, or is put to sleep)."""
        if not self.holding:
            self.holding = True
            self._released = trio.Event()
            self._failure = None

    def open(self) -> None:
        """The woken process is ready: sends what is held, in order, and lets
        requests through from now on."""
        link = self.link
        assert link is not None
        self.holding = False
        order, self._order = self._order, []
        self._events = self._bytes = 0
        now = trio.current_time()
        for item in order:
            if isinstance(item, bytes):
                link.send_nowait(item)
                continue
            frame = self._frames.pop(item, None)
            slot = self.held.pop(item)
            if frame is None or slot is None:
                continue  # withdrawn, or past its deadline
            left = None if slot.deadline == math.inf else max(slot.deadline - now, 0.0)
            callback = slot.callback
            assert callback is not None
            self.ids.preset(item)
            try:
                link.ask(
                    functools.partial(_same, frame),
                    slot.expect,
                    callback,
                    timeout=left,
                    alone=False,
                    progress=slot.progress,
                )
            except RequestError as exc:
                slot.fail(exc)  # (its callback gets it, and the metrics count it)
            finally:
                self.ids.preset(None)
        self.wanted = trio.Event()
        self._released.set()
        if self._dropped:
            self._ext.note(
                f"dropped {self._dropped} events while it woke (more than {self._queue} "
                f"events or {self._queue_bytes} bytes held)"
            )
            self._dropped = 0

    def fail(self, error: RequestError) -> None:
        """The extension could not wake, or is gone: what is held fails now
        with ``error``, and so does every request made from now on."""
        self._failure = error
        self._order.clear()
        self._frames.clear()
        self._events = self._bytes = 0
        self.held.fail_all(error)
        self._released.set()

    # --- the Link -------------------------------------------------------------------

    async def request(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        *,
        on_reply: Callable[[R], None] | None = None,
    ) -> R:
        """The link's :meth:`~.calls.Calls.request`, once the extension is up:
        while it sleeps or wakes, waits for it first (within the caller's
        cancel scope: cancelled while waiting, nothing is sent).

        Raises:
            RequestError: it could not wake (the reason), or what the link raises.
        """
        while self.holding:
            self._waiting += 1
            self._want(lambda: make(""))
            released = self._released
            deadline = trio.current_effective_deadline()
            try:
                await released.wait()
            except trio.Cancelled:  # given up before it woke: never sent
                if counted(expect):
                    self._ext.metrics.ended(given_up(deadline), 0.0)
                raise
            finally:
                self._waiting -= 1
                self._touch()
            if self._failure is not None:
                if counted(expect):
                    self._ext.metrics.ended(Ending.FAILED, 0.0)
                raise self._failure
        link = self._link_now()
        if not self._idle_stop:
            return await link.request(make, expect, on_reply=on_reply)
        self._waiting += 1
        self._touch()
        try:
            return await link.request(make, expect, on_reply=on_reply)
        finally:
            self._waiting -= 1
            self._touch()

    def ask(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        callback: Callable[[R | RequestError], None],
        *,
        timeout: float | None = None,
        alone: bool = True,
        progress: Callable[[ep.ToolProgress], None] | None = None,
    ) -> str:
        """The link's :meth:`~.calls.Calls.ask`; while it sleeps or wakes, the
        request is held (see the module) and its id returned all the same."""
        if self._idle_stop:
            callback = self._tracked(callback)
        if self.holding:
            return self._hold_ask(make, expect, callback, timeout, progress)
        rid = self._link_now().ask(
            make, expect, callback, timeout=timeout, alone=alone, progress=progress
        )
        if self._idle_stop:
            self._touch()
        return rid

    def withdraw(self, rid: str) -> None:
        """Forgets a request: one still held is dropped unsent; else the link withdraws it."""
        slot = self.held.pop(rid)
        if slot is not None:
            slot.withdrawn()
            self._forget(rid)
        elif self.link is not None:
            self.link.withdraw(rid)
        if self._idle_stop:
            self._touch()

    def send_nowait(self, frame: bytes, *, force: bool = False) -> bool:
        """The link's ``send_nowait``; while it sleeps or wakes an event is
        held (and wakes it), other frames are dropped (there is no process
        they could be for) unless its process is up."""
        if self.holding and frame.startswith(EVENT_PREFIX):
            if self._events >= self._queue or self._bytes + len(frame) > self._queue_bytes:
                self._dropped += 1
                return False
            self._order.append(frame)
            self._events += 1
            self._bytes += len(frame)
            self._want(lambda: frame)
            return True
        if self.link is None or (self.holding and not self._ext.up):
            return False
        if self._idle_stop and frame.startswith(EVENT_PREFIX):
            self._touch()
        return self.link.send_nowait(frame, force=force)

    def shutdown(self) -> None:
        """The link's ``shutdown``."""
        if self.link is not None:
            self.link.shutdown()

    def _link_now(self) -> Link:
        # (whether the process takes requests, the link itself checks)
        if self.link is None:
            raise extension_failed(f"extension {self._ext.name!r} is {self._ext.state}")
        return self.link

    # --- holding ---------------------------------------------------------------------

    def _hold_ask(
        self,
        make: Callable[[str], bytes],
        expect: type[Any],
        callback: Callable[[Any], None],
        timeout: float | None,
        progress: Callable[[ep.ToolProgress], None] | None,
    ) -> str:
        if self._failure is not None:
            raise self._failure
        rid = self.ids.next()
        frame = make(rid)
        if self._bytes + len(frame) > self._queue_bytes:
            raise RequestError(
                ErrorCode.BUSY,
                f"extension {self._ext.name!r} is starting and holds {self._bytes} bytes of "
                "requests already; try again once it is ready",
            )
        self._frames[rid] = frame
        self._order.append(rid)
        self._bytes += len(frame)
        counters = self._ext.metrics if counted(expect) else None
        self.held.add(rid, Slot(expect, callback, progress=progress, counters=counters), timeout)
        self._want(lambda: frame)
        return rid

    def _expired(self, rid: str, slot: Slot[Any, ep.ToolProgress]) -> None:
        self._forget(rid)  # held until its deadline: never sent

    def _forget(self, rid: str) -> None:
        frame = self._frames.pop(rid, None)
        if frame is not None:
            self._bytes -= len(frame)
            self._order.remove(rid)

    def _want(self, frame: Callable[[], bytes]) -> None:
        if not self.wanted.is_set():
            self.reason = what(frame())
            self.wanted.set()
            start, self.on_want = self.on_want, None
            if start is not None:
                start()
        self._touch()

    # --- the idle clock ----------------------------------------------------------------

    def _tracked(
        self, callback: Callable[[R | RequestError], None]
    ) -> Callable[[R | RequestError], None]:
        def done(outcome: R | RequestError) -> None:
            callback(outcome)
            self._touch()  # (its slot has left the table: the answer ends its work)

        return done

    def busy(self) -> bool:
        """Whether any work is in flight (held, waited for, or sent and unanswered)."""
        sent = len(self.link.pending) if self.link is not None else 0
        return bool(self._waiting or self._order or len(self.held) or sent)

    def _touch(self) -> None:
        """Work began or ended now: the idle clock starts again from now."""
        self.last_work = trio.current_time()
        if self._idle_scope is not None:
            self._idle_scope.deadline = self._idle_deadline()

    def _idle_deadline(self) -> float:
        return math.inf if self.busy() else self.last_work + self._idle_stop

    async def idle(self) -> None:
        """Returns once no work has been in flight for ``idle_stop`` seconds
        (never, if it is 0). One cancel scope, moved by every start and end
        of work. Cancellation just ends it."""
        if not self._idle_stop:
            await trio.sleep_forever()
        self._touch()
        while True:
            with trio.CancelScope(deadline=self._idle_deadline()) as self._idle_scope:
                await trio.sleep_forever()
            self._idle_scope = None
            if not self.busy() and trio.current_time() >= self.last_work + self._idle_stop:
                return
