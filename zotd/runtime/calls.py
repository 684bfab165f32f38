"""What the daemon sends one extension: requests, matched to their replies,
and one-way frames, down its stdin.

:class:`Calls` is the stdin half of an :class:`~.extension.Extension` (its
:class:`~.inbox.Inbox` is the stdout half, which resolves the replies).
Requests get ids from the extension's :class:`~.pending.PendingTable`; the
frames go through one :class:`~.outbox.Outbox`, made when the process
starts.

An extension that stops reading its stdin costs bounded memory:

* A request given up (its deadline passed, the client cancelled it or went
  away) while its frame still waits in the outbox is taken back from it: the
  extension never sees it (nor a ``cancel`` for it). One already written, in
  part or whole, is followed by ``cancel``.
* A tool call or guard question (:meth:`Calls.ask`) that finds the writer
  waiting for the extension to read, with ``extension_queue`` frames or
  ``extension_queue_bytes`` bytes unwritten already, finds the extension
  stuck: it fails, so does every request pending, with
  ``extension_failed`` ("stopped reading its stdin"), and the extension is
  killed (:meth:`~.extension.Extension.stuck`), so that its restart policy
  starts it again. Awaited requests wait for room instead, inside their
  deadline; one-way frames are dropped, as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..model.errors import RequestError, extension_failed
from ..model.metrics import COUNTED, Ending
from ..protocol import extension as ep
from .link import R
from .outbox import Outbox
from .pending import PendingTable, Slot, given_up
from .status import RUNNING

if TYPE_CHECKING:
    from .extension import Extension


class Calls:
    """The requests sent to one extension process, and its stdin.

    Args:
        ext: the extension (frames go only while it is running).
        queue: the bound of its stdin's queue, in frames (``extension_queue``).
        queue_bytes: the bound of its stdin's queue, in bytes not yet written
            (``extension_queue_bytes``).
    """

    __slots__ = ("_ext", "_queue", "_queue_bytes", "outbox", "pending")

    def __init__(self, ext: Extension, queue: int, queue_bytes: int = 16 * 1024 * 1024) -> None:
        self._ext = ext
        self._queue = queue
        self._queue_bytes = queue_bytes
        #: The requests sent and not yet answered, failed or withdrawn.
        self.pending: PendingTable[ep.ToolProgress] = PendingTable(on_expire=self._expired)
        #: Frames for its stdin; made by :meth:`open` when the process starts.
        self.outbox: Outbox | None = None

    def open(self, stdin: trio.abc.SendStream) -> Outbox:
        """Makes the outbox for the process's stdin (see :meth:`write`)."""
        self.outbox = Outbox(stdin, self._queue, self._queue_bytes)
        return self.outbox

    async def write(self, outbox: Outbox) -> None:
        """Writes what is queued for its stdin until the outbox is closed (then
        closes stdin) or the process stops reading.

        Cancellation stops the writing; frames still queued are dropped (the
        process is exiting or being killed: its supervisor owns that).
        """
        try:
            await outbox.run()
        except trio.BrokenResourceError:
            pass  # the process closed stdin or died; the exit is its supervisor's

    def shutdown(self) -> None:
        """Queues ``shutdown`` and closes the outbox: the writer sends what is
        queued, then closes stdin."""
        if self.outbox is not None:
            try:
                self.outbox.put_nowait(ep.encode(ep.Shutdown()))
                self.outbox.close()
            except trio.BrokenResourceError:
                pass

    def _next_request(self) -> tuple[Outbox, str]:
        """Its stdin's outbox and a new request id; ``RequestError`` if not running."""
        outbox = self.outbox
        if not self._ext.up or outbox is None:
            raise extension_failed(f"extension {self._ext.name!r} is {self._ext.state}")
        return outbox, self.pending.new_id()

    async def request(
        self,
        make: Callable[[str], bytes],
        expect: type[R],
        *,
        on_reply: Callable[[R], None] | None = None,
    ) -> R:
        """Sends the frame ``make(id)`` and waits for the reply with that id.

        ``on_reply`` is called with the reply by the task that reads it,
        before the extension's next frame is read.

        Cancellation (the caller's deadline) withdraws the request: the
        extension is sent ``cancel`` if no answer had come; a reply that
        comes later is logged, counted and dropped, and ``on_reply`` is not
        called.

        Raises:
            RequestError: the extension is not running, ends before replying,
                or replies with a malformed or mismatched frame.
        """
        outbox, rid = self._next_request()
        counters = self._ext.metrics if expect in COUNTED else None
        slot: Slot[R, ep.ToolProgress] = Slot(expect, on_reply=on_reply, counters=counters)
        self.pending.add(rid, slot)
        deadline = trio.current_effective_deadline()  # (the caller's: given up past it, timed out)
        put = False
        try:
            try:
                await outbox.put(make(rid), alone=len(self.pending) == 1, key=rid)
                put = True
            except trio.BrokenResourceError:
                error = extension_failed(f"extension {self._ext.name!r} stopped reading its stdin")
                slot.fail(error)  # (for the metrics: failed, not given up)
                raise error from None
            return await slot.wait()
        finally:
            if put:
                self._withdraw(rid, given_up(deadline))
            elif self.pending.pop(rid) is not None:
                # given up while waiting for room: the extension knows nothing of it
                slot.withdrawn(given_up(deadline))

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
        """Sends the frame ``make(id)`` without waiting; ``callback`` gets the
        reply (or the error) from the task that reads it.

        This is the hot path of tool calls and of intercepts: no task per
        request, no cancel scope per request. ``timeout`` is enforced by the
        pending table's expiry task, which fails the request with a
        ``timeout`` :class:`RequestError` at its deadline. The frame is queued
        even past ``extension_queue`` (requests are bounded by the daemon's
        ``busy`` limits), so that a request waits for a slow reader inside
        its deadline, as an awaited :meth:`request` does; but not behind a
        write the extension does not read with the queue past its bounds:
        the extension is stuck then (see the module's docstring).

        ``alone=False`` says more requests follow at once: the frame is queued
        for the writer to send with them, not written on its own.
        ``progress`` gets the ``tool_progress`` frames sent for the request.

        Returns the request's id: pass it to :meth:`withdraw` when the answer
        is no longer wanted. Raises :class:`RequestError` if the extension is
        not running, or is stuck.
        """
        # (`_next_request`, inline: this is the hot path)
        outbox, ext, pending = self.outbox, self._ext, self.pending
        if outbox is None or ext.state not in RUNNING:  # (`ext.up`)
            raise extension_failed(f"extension {ext.name!r} is {ext.state}")
        rid = pending.ids.next()
        frame = make(rid)
        if outbox.blocked and (
            len(outbox) >= self._queue or outbox.unwritten + len(frame) > self._queue_bytes
        ):
            raise self._stuck(outbox)
        try:
            outbox.put_nowait(frame, alone=alone and not pending, force=True, key=rid)
        except trio.BrokenResourceError:
            raise extension_failed(f"extension {ext.name!r} stopped reading its stdin") from None
        slot: Slot[R, ep.ToolProgress] = Slot(expect, callback, progress=progress)
        if expect in COUNTED:  # (not a keyword argument: this is the hot path)
            slot.counters = ext.metrics
        pending.add(rid, slot, timeout)
        return rid

    def _stuck(self, outbox: Outbox) -> RequestError:
        """Declares the extension stuck: pending requests fail, it is killed
        (its restart policy applies); returns the error for the new request."""
        reason = (
            f"stopped reading its stdin ({len(outbox)} frames, {outbox.unwritten} bytes "
            "waiting); it is stopped, and restarted per its restart policy"
        )
        error = extension_failed(f"extension {self._ext.name!r} {reason}")
        self.pending.fail_all(error)
        self._ext.stuck(reason)
        return error

    def withdraw(self, rid: str) -> None:
        """Forgets a request; if it was still unanswered, takes its frame
        back if it is not written yet, else tells the extension with a
        ``cancel`` frame (``tool_cancel`` for a tool call, see :meth:`cancel`).
        A reply that comes later is dropped and counted."""
        self._withdraw(rid, Ending.CANCEL)

    def _withdraw(self, rid: str, ending: Ending) -> None:
        """:meth:`withdraw`, recording ``ending`` for a request still unanswered."""
        slot = self.pending.pop(rid)
        if slot is not None:
            slot.withdrawn(ending)
            self.cancel(rid, tool=slot.expect is ep.ToolResult)

    def _expired(self, rid: str, slot: Slot[Any, ep.ToolProgress]) -> None:
        self.cancel(rid, tool=slot.expect is ep.ToolResult)

    def cancel(self, rid: str, *, tool: bool = False) -> None:
        """Takes back the frame of ``rid`` if it is still queued (the
        extension never sees it), else tells the extension (if it is
        running): ``cancel``, or for a tool call (``tool``) to an extension
        whose ``hello`` listed ``tool_cancel``, current zot's ``tool_cancel``
        (zot's SDK knows no other)."""
        if self.outbox is not None and self.outbox.withdraw(rid):
            return
        # Extensions that do not know `cancel` ignore it, as the reference's
        # examples ignore every frame they do not know.
        if self._ext.up:
            if tool and ep.TOOL_CANCEL in self._ext.capabilities:
                self.send_nowait(ep.encode(ep.ToolCancel(id=rid)))
            else:
                self.send_nowait(ep.encode(ep.Cancel(id=rid)))

    def send_nowait(self, frame: bytes, *, force: bool = False) -> bool:
        """Queues a one-way frame; ``False`` if it was dropped (queue full or
        not running). ``force``: past a full queue too (a reply owed to the
        extension, bounded by its own limits)."""
        if not self._ext.up or self.outbox is None:
            return False
        try:
            queued = self.outbox.put_nowait(frame, force=force)
        except trio.BrokenResourceError:
            return False
        if not queued:
            self._ext.note("stdin queue full: dropped a frame (is the extension reading stdin?)")
        return queued
