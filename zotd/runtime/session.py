"""One agent connection on the socket: read requests, run them, write replies.

Each connection has one reader (this task), an outbox with its writer task,
and a nursery of in-flight requests, so a client may pipeline many requests
and get each reply as soon as it is ready. Tool calls, the hot path, have no
task: the reader starts them as it reads them (:mod:`zotd.runtime.agent_calls`),
and the reply is written by the task that reads the extension's answer.
Replies are never dropped: while the outbox holds ``client_outbox_bytes``
(or :data:`OUTBOX_SIZE` frames), the reader reads no more requests, so a
client that does not read its replies is not read either. Push frames are
dropped, and counted, when the client does not keep up, so a slow reader
never holds up an extension or another client.

Two things close a connection with an error frame (the hello deadline and
the eviction are :mod:`zotd.runtime.gatekeeper`'s): no successful ``hello``
within ``client_hello_timeout``, and an unfinished request line that would
take the bytes all connections hold in unfinished lines past
``max_buffered_bytes`` (one :class:`~zotd.runtime.streams.LineBudget` per
hub). Its requests in flight are then cancelled, and the error frame gets
:data:`~zotd.runtime.gatekeeper.CLOSE_GRACE` seconds to be written.

What each request does is :mod:`zotd.runtime.dispatch`'s; the session
gets the :class:`~zotd.runtime.hub.Hub` (workspaces, limits, shutdown
state), not the daemon.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import trio

from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol.frames import FrameError, UnknownFrame
from ..protocol.lines import Oversized
from .agent_calls import AgentCalls
from .dispatch import CANCELLABLE, dispatch, refusal
from .gatekeeper import CLOSE_GRACE, Gatekeeper
from .hangup import watch_hangup
from .hub import Hub
from .outbox import Outbox
from .streams import LineReader, OverBudget
from .workspace import Workspace

log = logging.getLogger(__name__)

#: Frames that may wait for one client's writer.
OUTBOX_SIZE = 1024

Code = ap.ErrorCode

_CALL_TOOL = ap.CallTool  # (a global: on the path of every request line)


def _wire_id(value: Any) -> ap.Id | None:
    # Echo an id only if it is one a client could have sent: a string or an int.
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


class ClientSession:
    """Serves one connection until the client hangs up or the daemon stops.

    It is a :class:`~zotd.runtime.dispatch.Connection`: the handlers of
    :mod:`~zotd.runtime.dispatch` see its hub and its state.

    Args:
        hub: the daemon's workspaces, limits and shutdown state.
        stream: the connection.
        number: a serial number, for logs.
    """

    def __init__(self, hub: Hub, stream: trio.abc.Stream, number: int) -> None:
        self.hub = hub
        self.number = number
        self.workspace: Workspace | None = None
        self.authenticated = False
        self.subscribed = False
        #: What its ``hello`` said it can do (``interactive``, ``host_tools``).
        self.capabilities: frozenset[str] = frozenset()
        self.dropped = 0
        self.done = trio.Event()
        self._stream = stream
        self._outbox = Outbox(stream, OUTBOX_SIZE, hub.config.client_outbox_bytes)
        self._read_scope = trio.CancelScope()
        #: The hello deadline; closing the connection from our side.
        self._gate = Gatekeeper(
            number,
            hub.config.client_hello_timeout,
            admitted=lambda: self.authenticated,
            reply=self._reply,
            stop_reading=self._read_scope.cancel,
        )
        #: Requests of this connection being run now.
        self.in_flight = 0
        #: Tool calls in flight (they have no task).
        self._calls = AgentCalls(self)
        #: Other requests in flight that ``cancel`` may stop: their id and scope.
        self._running: dict[int, tuple[ap.Id, trio.CancelScope]] = {}
        self._call_serial = 0
        #: The lines being handled came in one read with others: what they
        #: send on is gathered into one write, not written one by one.
        self._burst = False
        self._calls_idle: trio.Event | None = None
        #: Set when the last request in flight is done, once input has ended.
        self._drained: trio.Event | None = None

    async def run(self) -> None:
        """Serves the connection; never raises ``Exception``.

        At end of input, requests already in flight still get their replies
        (a client may half-close after its last request). If the client is
        gone for good (it closed the connection, or a write fails), in-flight
        requests are cancelled, and extensions told so. :meth:`close_soon`
        stops the reading only: in-flight requests finish and are answered.

        Cancellation cancels the requests in flight (each stops where it
        waits; changes already begun, see :mod:`~zotd.runtime.admin`, are
        carried through), withdraws its tool calls from the extensions
        (which are sent ``cancel``), leaves its workspace, closes the stream
        (shielded) and re-raises; replies not yet written are lost. Either
        way :attr:`done` is set at the end and the hub's in-flight count is
        back where it was.
        """
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, nursery.cancel_scope)
                deadline = trio.current_time() + self._gate.hello_timeout
                nursery.start_soon(self._gate.await_hello, deadline)
                async with trio.open_nursery() as requests:
                    with self._read_scope:
                        await self._read(requests)
                    self._gate.stop_waiting()  # input ended: nothing more to wait for
                    if self._gate.evicted:
                        requests.cancel_scope.cancel()
                    elif self.in_flight:  # a half-close, or a hangup?
                        self._drained = trio.Event()
                        nursery.start_soon(
                            watch_hangup,
                            self._stream,
                            lambda: self.in_flight,
                            self._drained,
                            nursery.cancel_scope,
                            self.number,
                        )
                if self._gate.evicted:
                    self._withdraw_calls()
                while self._calls:
                    self._calls_idle = trio.Event()
                    await self._calls_idle.wait()
                self._outbox.close()
                if self._gate.evicted:
                    nursery.cancel_scope.deadline = trio.current_time() + CLOSE_GRACE
        except Exception:
            log.exception("client %d: internal error", self.number)
        finally:
            self._withdraw_calls()  # the client is gone: nobody to tell
            if self.workspace is not None:
                self.workspace.release(self)
            if self.dropped:
                log.info(
                    "client %d: dropped %d push frame(s) it did not read", self.number, self.dropped
                )
            with trio.CancelScope(shield=True):
                await self._stream.aclose()
            self.done.set()

    async def _read(self, requests: trio.Nursery) -> None:
        # Before each request, wait while the outbox is full: a client that
        # does not read its replies is not read either (see `Outbox.room`).
        hub = self.hub
        config = hub.config
        reader = LineReader(self._stream, config.max_frame_bytes, hub.line_budget)
        gate, outbox, calls = self._gate, self._outbox, self._calls
        decode, decode_all = ap.decode_request, ap.decode_requests
        req: ap.Request | UnknownFrame
        try:
            async for lines in reader:
                self._burst = len(lines) > 1
                # Every line a request (the usual case): decoded at once.
                reqs = decode_all(lines)
                for i, line in enumerate(lines):
                    if outbox.full:
                        await outbox.room()
                    if gate.evicted:
                        return
                    if reqs is not None:
                        req = reqs[i]
                    elif isinstance(line, Oversized):
                        await self._oversized(line)
                        continue
                    else:
                        try:
                            req = decode(line)
                        except FrameError as exc:
                            if line and not line.isspace():  # (blank lines are skipped)
                                await self._send(
                                    ap.fail(
                                        _wire_id(exc.id), exc.type, Code.BAD_REQUEST, exc.message
                                    )
                                )
                            continue
                    # The hot path: a tool call that may run now starts here,
                    # without a task (or a coroutine) of its own. Anything
                    # else (a refusal or `busy` too) goes the long way.
                    if (
                        type(req) is _CALL_TOOL
                        and self.workspace is not None
                        and self.authenticated
                        and not hub.shutting_down
                        and self.in_flight < config.max_client_requests
                        and hub.in_flight < config.max_requests
                    ):
                        self.in_flight += 1
                        hub.in_flight += 1  # (Hub.request_started, inline)
                        calls.start(req, alone=not self._burst and self.in_flight <= 1)
                        continue
                    await self._on_request(req, cast(bytes, line), requests)  # (a line: decoded)
                    if gate.evicted:
                        return
        except OverBudget as exc:
            log.warning("client %d: closed: %s", self.number, exc)
            gate.evict(Code.BUSY, f"{exc} (max_buffered_bytes); closing this connection")
        finally:
            reader.close()

    def _withdraw_calls(self) -> None:
        for _ in range(self._calls.withdraw_all()):
            self._request_done()

    def close_soon(self) -> None:
        """Stops reading requests; in-flight ones finish, then the connection closes."""
        self._read_scope.cancel()

    def push(self, frame: bytes) -> None:
        """Queues a push frame, or drops it if the client is not keeping up."""
        if self.subscribed:
            self.deliver(frame)

    def deliver(self, frame: bytes) -> None:
        """Queues a push frame meant for this client alone (subscribed or
        not), or drops it if the client is not keeping up."""
        try:
            if not self._outbox.put_nowait(frame):
                self.dropped += 1
        except trio.BrokenResourceError:
            pass

    async def _write(self, cancel_all: trio.CancelScope) -> None:
        try:
            await self._outbox.run()
        except trio.BrokenResourceError:
            log.debug("client %d: gone; cancelling its requests", self.number)
            cancel_all.cancel()

    async def _send(self, frame: bytes) -> None:
        try:
            await self._outbox.put(frame, alone=self.in_flight <= 1)
        except trio.BrokenResourceError:
            pass  # the client is gone; nobody to tell

    # --- requests -----------------------------------------------------------------

    async def _oversized(self, line: Oversized) -> None:
        limit = self.hub.config.max_frame_bytes
        await self._send(
            ap.fail(
                None,
                None,
                Code.FRAME_TOO_LARGE,
                f"a {line.size}-byte request is over the {limit}-byte limit",
            )
        )

    async def _on_request(
        self, req: ap.Request | UnknownFrame, line: bytes, requests: trio.Nursery
    ) -> None:
        if isinstance(req, UnknownFrame):
            await self._send(
                ap.fail(
                    _wire_id(req.id),
                    req.type,
                    Code.UNKNOWN_COMMAND,
                    f"unknown request type {req.type!r}",
                )
            )
            return
        command = type(req).__struct_config__.tag
        assert isinstance(command, str)
        if isinstance(req, ap.Hello):
            self._gate.hello_running = True
            try:
                reply = await self._answer(req, command, line)
            finally:
                self._gate.hello_running = False
            await self._send(reply)
            self._gate.hello_answered()
            return
        error = refusal(self, req)
        if error is not None:
            await self._send(ap.fail(req.id, command, *error))
            return
        if type(req) is ap.CancelCall:  # answered at once: never `busy`
            cancelled = self._cancel(req.request_id)
            await self._send(ap.ok(req.id, command, ap.CancelData(cancelled)))
            return
        busy = self._busy()
        if busy is not None:
            await self._send(ap.fail(req.id, command, Code.BUSY, busy))
            return
        self.in_flight += 1
        self.hub.request_started()
        if type(req) is ap.CallTool:
            self._calls.start(req, alone=not self._burst and self.in_flight <= 1)
        else:
            requests.start_soon(self._run_request, req, command, line)

    async def _run_request(self, req: ap.Request, command: str, line: bytes) -> None:
        self._call_serial += 1
        key = self._call_serial
        try:
            with trio.CancelScope() as scope:
                if type(req) in CANCELLABLE:
                    self._running[key] = (req.id, scope)
                reply = await self._answer(req, command, line)
            if scope.cancelled_caught:  # by `cancel`: other cancellations propagate
                reply = _cancelled(req.id, command)
            await self._send(reply)
        finally:
            self._running.pop(key, None)
            self._request_done()

    def _request_done(self) -> None:
        self.in_flight -= 1
        self.hub.request_done()
        if not self._calls and self._calls_idle is not None:
            self._calls_idle.set()
        if not self.in_flight and self._drained is not None:
            self._drained.set()

    # --- tool calls: the hot path, without a task each (see agent_calls) -------------

    def call_answered(self, frame: bytes) -> None:
        """A tool call's reply: queued, never dropped (see :meth:`_reply`),
        and the call done (:meth:`_request_done`, inline: every call)."""
        in_flight = self.in_flight
        try:
            self._outbox.put_nowait(frame, alone=in_flight <= 1, force=True)
        except trio.BrokenResourceError:
            pass  # the client is gone
        self.in_flight = in_flight - 1
        self.hub.in_flight -= 1  # (Hub.request_done)
        if self._calls_idle is not None and not self._calls:
            self._calls_idle.set()
        if self._drained is not None and not self.in_flight:
            self._drained.set()

    def _cancel(self, rid: ap.Id) -> bool:
        """Abandons this connection's request ``rid`` (a ``call_tool``,
        ``invoke_command`` or ``intercept``): the extensions working on it are
        sent ``cancel``, and its reply is a ``cancelled`` error. ``False`` if
        no such request is in flight (it has been answered already)."""
        if self._calls.cancel(rid):
            self._reply(_cancelled(rid, "call_tool"))
            self._request_done()
            return True
        key = next((k for k, (req_id, _) in self._running.items() if req_id == rid), None)
        if key is None:
            return False
        _, scope = self._running.pop(key)
        scope.cancel()  # its task sends the reply
        return True

    def _reply(self, frame: bytes) -> None:
        # Never dropped: replies are bounded by the requests-in-flight limits,
        # and no request is read while the outbox is full.
        try:
            self._outbox.put_nowait(frame, alone=self.in_flight <= 1, force=True)
        except trio.BrokenResourceError:
            pass  # the client is gone

    def _busy(self) -> str | None:
        # Past a limit, a request is answered `busy` at once. A client that
        # writes requests but never reads the replies is held back all the
        # same: those replies fill its outbox, and then `_read` waits.
        if self.in_flight >= self.hub.config.max_client_requests:
            return (
                f"this connection has {self.in_flight} requests in flight, the most "
                "allowed; wait for some replies, then retry"
            )
        return self.hub.busy()

    async def _answer(self, req: ap.Request, command: str, line: bytes) -> bytes:
        try:
            return ap.ok(req.id, command, await dispatch(self, req, line))
        except Exception as exc:
            return self.failure(req.id, command, exc)

    def failure(self, rid: ap.Id, command: str, exc: Exception) -> bytes:
        """The failed reply for ``exc``: its own code for a ``RequestError``,
        ``internal`` (and a logged traceback) for anything else."""
        if isinstance(exc, RequestError):
            return ap.fail(rid, command, exc.code, exc.message)
        log.exception("client %d: %s failed", self.number, command)
        return ap.fail(rid, command, Code.INTERNAL, f"internal error in zotd: {exc!r}")


def _cancelled(rid: ap.Id, command: str) -> bytes:
    """The reply to a request the client gave up with ``cancel``."""
    return ap.fail(rid, command, Code.CANCELLED, "cancelled by the client")
