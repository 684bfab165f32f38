"""The client library: talk to zotd from any asyncio or trio program (via anyio).

Example::

    async with zotd.client.connect(cwd="/path/to/project", client="my-agent/1.0") as zot:
        tools = await zot.list_tools()
        result = await zot.call_tool("weather", {"city": "Berlin"})

Every method sends one request and returns the typed ``data`` of its reply;
a failed reply raises :class:`ZotdError` with the protocol's error ``code``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec
from anyio.abc import SocketAttribute

from .. import AGENT_PROTOCOL_VERSION
from ..model.paths import Paths, check_socket_path
from ..protocol import agent as ap
from ..protocol.lines import LineSplitter, Oversized
from . import autostart

log = logging.getLogger(__name__)

#: Requests zotd can give up when the client does (see ``cancel``).
_CANCELLABLE = frozenset({"call_tool", "invoke_command", "intercept"})

if TYPE_CHECKING:
    import trio

T = TypeVar("T")

#: Push frames buffered for :meth:`Client.notifications` before new ones are dropped.
PUSH_BUFFER = 1024

_READ_SIZE = 64 * 1024

_encode = msgspec.json.Encoder().encode

#: One decoder per type of reply data, made on first use.
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decode_as(cls: type[T], data: msgspec.Raw, request: str) -> T:
    """A reply's raw ``data`` as ``cls``; ``bad_reply`` if it does not fit."""
    decoder = _decoders.get(cls)
    if decoder is None:
        decoder = _decoders[cls] = msgspec.json.Decoder(cls)
    try:
        result: T = decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise ZotdError("bad_reply", f"zotd's reply to {request} did not fit: {exc}") from None
    return result


class ZotdError(Exception):
    """A request failed. ``code`` is an :class:`~zotd.protocol.agent.ErrorCode` value,
    or ``not_running``, ``cannot_connect`` or ``connection_lost`` for failures of
    the connection itself, or ``bad_reply`` for a reply this client cannot read."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


class NotRunning(ZotdError):
    """No daemon answers on the socket."""

    def __init__(self, socket: Path) -> None:
        super().__init__(
            "not_running",
            f"zotd is not running (nothing answers on {socket}); start it with `zotd start`",
        )


class _Slot:
    """Where the reply to one request lands; any event loop (anyio)."""

    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reply: ap.RawResponse | None = None

    def wake(self) -> None:
        self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


class _TrioSlot:
    """A :class:`_Slot` for trio: the waiting task is parked and rescheduled
    directly, without an Event (this is on the path of every call).

    trio is imported only by programs that run on it: the imports below find
    it loaded already.
    """

    __slots__ = ("done", "reply", "task")

    def __init__(self) -> None:
        self.reply: ap.RawResponse | None = None
        self.task: trio.lowlevel.Task | None = None
        self.done = False

    def wake(self) -> None:
        self.done = True
        if self.task is not None:
            _trio_lowlevel.reschedule(self.task)
            self.task = None

    async def wait(self) -> None:
        lowlevel = _trio_lowlevel
        if self.done:
            await lowlevel.checkpoint()
            return
        self.task = lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self.task = None
            succeeded: trio.lowlevel.Abort = lowlevel.Abort.SUCCEEDED
            return succeeded

        await lowlevel.wait_task_rescheduled(abort)


#: ``trio.lowlevel``, once a client was made in a trio task.
_trio_lowlevel: Any = None


def _on_trio() -> bool:
    """Whether this runs in a trio task (without importing trio otherwise)."""
    global _trio_lowlevel
    trio_module = sys.modules.get("trio")
    if trio_module is None:
        return False
    try:
        trio_module.lowlevel.current_task()
    except RuntimeError:
        return False
    _trio_lowlevel = trio_module.lowlevel
    return True


class Client:
    """One connection to zotd. Use :func:`connect` to make one.

    A client made by hand must have :meth:`run` running in a task beside the
    requests.

    Requests may be sent from many tasks at once; each waits for its own
    reply. A request sent while the connection is idle is written at once;
    requests sent while a write is under way go out together in the next.
    """

    def __init__(
        self, stream: anyio.abc.ByteStream, *, max_frame_bytes: int = 16 * 1024 * 1024
    ) -> None:
        self._stream = stream
        # The socket under the stream, for non-blocking reads and writes
        # without a task switch; None for other streams (they get the
        # stream's own methods).
        self._sock: socket.socket | None = stream.extra(SocketAttribute.raw_socket, None)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Slot | _TrioSlot] = {}
        #: ``on_progress`` callbacks of the tool calls in flight, by request id.
        self._progress: dict[int, Callable[[ap.ToolProgressPush], object]] = {}
        self._slot: type[_Slot | _TrioSlot] = _TrioSlot if _on_trio() else _Slot
        self._queue: list[bytes] = []
        self._writing = False
        self._kick = anyio.Event()
        self._push_send, self._push_recv = anyio.create_memory_object_stream[ap.Push](PUSH_BUFFER)
        self._max = max_frame_bytes
        self._lost: str | None = None
        #: Push frames dropped because nobody read :meth:`notifications`.
        self.dropped = 0
        #: The reply to ``hello``, once sent.
        self.hello_data: ap.HelloData | None = None

    async def run(self) -> None:
        """Reads replies and writes requests until the connection ends or this is cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write_loop)
                await self._read_loop()
                tg.cancel_scope.cancel()
        finally:
            self._lose("the connection to zotd was closed")
            self._push_send.close()

    def _lose(self, why: str) -> None:
        # Every request still waiting fails now: nothing waits for a reply
        # that cannot come.
        self._lost = self._lost or why
        for slot in self._pending.values():
            slot.wake()

    async def _receive(self, waited: bool) -> bytes:
        sock = self._sock
        if sock is None:
            return await self._stream.receive()
        if not waited:
            await anyio.lowlevel.checkpoint()  # the last read did not wait: be fair
        while True:
            try:
                chunk = sock.recv(_READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(sock)
                continue
            if not chunk:
                raise anyio.EndOfStream
            return chunk

    async def _read_loop(self) -> None:
        splitter = LineSplitter(self._max)
        waited = True
        while True:
            try:
                chunk = await self._receive(waited)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except OSError as exc:
                self._lose(f"the connection to zotd failed: {exc.strerror or exc}")
                return
            waited = False
            for line in splitter.feed(chunk):
                if not isinstance(line, Oversized):
                    self._on_line(line)

    def _on_line(self, line: bytes) -> None:
        try:
            frame = ap.decode_reply(line)
        except msgspec.DecodeError:
            return  # a newer daemon's frame we cannot read
        if isinstance(frame, ap.RawResponse):
            slot = self._pending.get(frame.id) if isinstance(frame.id, int) else None
            if slot is not None:
                slot.reply = frame
                slot.wake()
            return
        if type(frame) is ap.ToolProgressPush and isinstance(frame.request_id, int):
            on_progress = self._progress.get(frame.request_id)
            if on_progress is not None:
                try:
                    on_progress(frame)
                except Exception:  # the caller's bug must not stop the connection
                    log.exception("an on_progress callback failed")
                return
        try:
            self._push_send.send_nowait(frame)
        except anyio.WouldBlock:
            self.dropped += 1

    def _send(self, line: bytes) -> None:
        # A lone request on an idle connection is written now, by its own
        # task; with others in flight, requests are gathered for the writer
        # so that a burst costs one write (and one wakeup of zotd).
        sock = self._sock
        if sock is not None and not self._queue and not self._writing and len(self._pending) <= 1:
            try:
                sent = sock.send(line)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise ZotdError("connection_lost", f"cannot send to zotd: {exc}") from None
            if sent == len(line):
                return
            line = line[sent:]
        self._queue.append(line)
        self._kick.set()

    async def _write_loop(self) -> None:
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            self._writing = True  # until all of it is out, nothing is written inline
            while self._queue:
                data = b"".join(self._queue)
                self._queue.clear()
                try:
                    await self._write(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._lose(f"cannot send to zotd: {exc}")
                    return
            self._writing = False

    async def _write(self, data: bytes) -> None:
        sock = self._sock
        if sock is None:
            await self._stream.send(data)
            return
        view = memoryview(data)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(sock)

    async def _call(
        self,
        type: str,
        fields: dict[str, Any],
        progress: Callable[[ap.ToolProgressPush], object] | None = None,
    ) -> ap.RawResponse:
        if self._lost is not None:
            raise ZotdError("connection_lost", self._lost)
        rid = next(self._ids)
        fields["id"] = rid
        fields["type"] = type
        line = _encode(fields) + b"\n"
        if len(line) - 1 > self._max:
            # The daemon could only answer with an id-less error; say it here.
            raise ZotdError(
                "frame_too_large",
                f"a {len(line) - 1}-byte request is over the {self._max}-byte limit",
            )
        slot = self._slot()
        self._pending[rid] = slot
        if progress is not None:
            self._progress[rid] = progress
        try:
            self._send(line)
            await slot.wait()
        except BaseException:
            if type in _CANCELLABLE and slot.reply is None and self._lost is None:
                # Given up here (cancelled, a timeout around it): tell zotd,
                # which tells the extensions. Its reply and the request's own
                # (a `cancelled` error) are for nobody and are ignored.
                cancel = {"id": next(self._ids), "type": "cancel", "request_id": rid}
                with contextlib.suppress(ZotdError):  # the connection is gone: nothing to tell
                    self._send(_encode(cancel) + b"\n")
            raise
        finally:
            del self._pending[rid]
            if progress is not None:
                del self._progress[rid]
        reply = slot.reply
        if reply is None:
            raise ZotdError("connection_lost", self._lost or "no reply")
        if not reply.success:
            error = reply.error or ap.ErrorBody("internal", "failed without an error")
            raise ZotdError(error.code, error.message)
        return reply

    async def request(self, type: str, **fields: Any) -> Any:
        """Sends any request and returns its reply's ``data`` (decoded JSON).

        Raises:
            ZotdError: the daemon answered with an error, or the connection was lost.
        """
        return msgspec.json.decode((await self._call(type, fields)).data)

    async def _typed(self, cls: type[T], type: str, **fields: Any) -> T:
        return _decode_as(cls, (await self._call(type, fields)).data, type)

    # --- one method per request ---------------------------------------------------

    async def hello(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        provider: str = "",
        model: str = "",
        client: str = "",
        token: str | None = None,
        attach: bool = True,
    ) -> ap.HelloData:
        """Joins the workspace of ``cwd`` (the daemon's own if ``None``).

        Returns once its extensions are ready (or their ready grace passed).
        """
        fields: dict[str, Any] = {
            "protocol_version": AGENT_PROTOCOL_VERSION,
            "provider": provider,
            "model": model,
            "client": client,
            "attach": attach,
        }
        if cwd is not None:
            fields["cwd"] = _absolute(cwd)
        if token is not None:
            fields["token"] = token
        self.hello_data = await self._typed(ap.HelloData, "hello", **fields)
        return self.hello_data

    async def ping(self) -> bool:
        """Whether the daemon answers."""
        return (await self._typed(ap.PingData, "ping")).pong

    async def status(self) -> ap.StatusData:
        """The daemon's pid, version, socket and workspaces."""
        return await self._typed(ap.StatusData, "status")

    async def list_extensions(self) -> list[ap.ExtensionInfo]:
        """The workspace's extensions with their live state."""
        return (await self._typed(ap.ExtensionsData, "list_extensions")).extensions

    async def list_commands(self) -> list[ap.CommandInfo]:
        """The workspace's slash commands."""
        return (await self._typed(ap.CommandsData, "list_commands")).commands

    async def list_tools(self) -> list[ap.ToolInfo]:
        """The workspace's tools."""
        return (await self._typed(ap.ToolsData, "list_tools")).tools

    async def list_commands_data(self) -> ap.CommandsData:
        """The workspace's slash commands, and the registrations hidden
        because another holds the name (``shadowed``)."""
        return await self._typed(ap.CommandsData, "list_commands")

    async def list_tools_data(self) -> ap.ToolsData:
        """The workspace's tools, and the registrations hidden because
        another holds the name (``shadowed``)."""
        return await self._typed(ap.ToolsData, "list_tools")

    async def invoke_command(self, name: str, args: str = "") -> ap.InvokeData:
        """Runs a slash command (``name`` with or without the ``/``)."""
        return await self._typed(
            ap.InvokeData, "invoke_command", name=name.removeprefix("/"), args=args
        )

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        on_progress: Callable[[ap.ToolProgressPush], object] | None = None,
    ) -> ap.CallData:
        """Calls a tool with a JSON object of arguments.

        ``on_progress`` is called (in the task reading the connection: keep it
        quick) with each ``tool_progress`` frame the tool sends; without it,
        they go to :meth:`notifications`. Cancelling the call (a cancel
        scope or timeout around it) tells zotd, which tells the extension
        (so does cancelling :meth:`invoke_command` or :meth:`intercept`).
        """
        # The hot path: no **kwargs, no copy of a dict, one decode.
        fields: dict[str, Any] = {
            "name": name,
            "args": args if type(args) is dict else dict(args or {}),
        }
        if timeout_s is not None:
            fields["timeout_s"] = timeout_s
        reply = await self._call("call_tool", fields, on_progress)
        return _decode_as(ap.CallData, reply.data, "call_tool")

    async def emit_event(self, event: str, **payload: Any) -> list[str]:
        """Sends a lifecycle event; returns the extensions it was queued for."""
        return (await self._typed(ap.EmitData, "emit_event", event=event, **payload)).delivered

    async def intercept(
        self, tool_name: str, tool_args: Mapping[str, Any] | None = None, *, tool_id: str = ""
    ) -> ap.InterceptData:
        """Asks the guards whether a tool call may run; ``args`` of the reply
        holds the arguments to run it with if a guard rewrote them."""
        return await self.intercept_event(
            "tool_call", tool_id=tool_id, tool_name=tool_name, tool_args=dict(tool_args or {})
        )

    async def intercept_event(self, event: str, **payload: Any) -> ap.InterceptData:
        """Asks the guards whether an event may go ahead: ``tool_call``,
        ``turn_start`` (``step=``) or ``assistant_message`` (``text=``; the
        reply's ``text`` is what to show the user if a guard replaced it)."""
        return await self._typed(ap.InterceptData, "intercept", event=event, **payload)

    async def panel_key(
        self, panel_id: str, key: str, *, text: str = "", extension: str = ""
    ) -> None:
        """Sends a key pressed in a panel this connection opened."""
        await self.request("panel_key", panel_id=panel_id, key=key, text=text, extension=extension)

    async def panel_resize(
        self, panel_id: str, width: int, height: int, *, extension: str = ""
    ) -> None:
        """Tells a panel's extension the panel's size, in cells."""
        await self.request(
            "panel_resize", panel_id=panel_id, width=width, height=height, extension=extension
        )

    async def panel_close(self, panel_id: str, *, extension: str = "") -> None:
        """Closes a panel this connection opened."""
        await self.request("panel_close", panel_id=panel_id, extension=extension)

    async def subscribe(self, notifications: bool = True) -> None:
        """Turns push frames on (see :meth:`notifications`)."""
        await self.request("subscribe", notifications=notifications)

    async def ext_install(self, source: str, *, scope: str = "global") -> ap.ExtChangeData:
        """Installs an extension from a directory or git URL, and starts it."""
        return await self._typed(ap.ExtChangeData, "ext_install", source=source, scope=scope)

    async def ext_remove(self, name: str) -> ap.ExtChangeData:
        """Stops an installed extension and deletes its directory."""
        return await self._typed(ap.ExtChangeData, "ext_remove", name=name)

    async def ext_enable(self, name: str) -> ap.ExtChangeData:
        """Enables an extension in its manifest and starts it."""
        return await self._typed(ap.ExtChangeData, "ext_enable", name=name)

    async def ext_disable(self, name: str) -> ap.ExtChangeData:
        """Disables an extension in its manifest and stops it."""
        return await self._typed(ap.ExtChangeData, "ext_disable", name=name)

    async def ext_reload(self, name: str | None = None) -> list[ap.ExtensionInfo]:
        """Restarts one extension, or all, from disk; returns them once ready."""
        fields = {} if name is None else {"name": name}
        return (await self._typed(ap.ExtReloadData, "ext_reload", **fields)).extensions

    async def ext_trust(self) -> list[ap.ExtensionInfo]:
        """Trusts this workspace's project-local extensions as they are now, and starts them."""
        return (await self._typed(ap.ExtReloadData, "ext_trust")).extensions

    async def ext_logs(self, name: str, lines: int = 100) -> ap.LogsData:
        """The end of an extension's log."""
        return await self._typed(ap.LogsData, "ext_logs", name=name, lines=lines)

    async def shutdown(self) -> None:
        """Asks the daemon to stop gracefully."""
        await self.request("shutdown")

    def notifications(self) -> AsyncIterator[ap.Push]:
        """Push frames until the connection closes: ``notify`` and
        ``extension_state`` (after :meth:`subscribe`), and those meant for
        this connection alone, subscribed or not: ``panel_render`` and
        ``panel_close`` of the panels its commands opened, and
        ``tool_progress`` of its calls made without ``on_progress``.

        Iterate it with ``async for``.
        """
        return self._push_recv


def _absolute(path: str | os.PathLike[str]) -> str:
    # Pure string work (joins with the cwd); no file system access.
    return os.path.abspath(path)


@asynccontextmanager
async def connect(
    socket: str | os.PathLike[str] | None = None,
    *,
    hello: bool = True,
    cwd: str | os.PathLike[str] | None = None,
    provider: str = "",
    model: str = "",
    client: str = "zotd.client",
    token: str | None = None,
    attach: bool = True,
    start: bool | None = None,
) -> AsyncIterator[Client]:
    """Connects to zotd (and says ``hello`` unless ``hello=False``).

    If no daemon answers, one is started in the background (see
    :mod:`zotd.client.autostart`) and waited for, unless ``start=False`` or
    ``$ZOTD_NO_AUTOSTART=1``.

    Args:
        socket: the socket path (default: ``$ZOTD_SOCKET``, else the user runtime dir).
        hello: send ``hello`` right away with the fields below.
        cwd: the project directory (default: this process's cwd).
        token: needed only if the daemon was configured with one
            (default: ``$ZOTD_TOKEN``).

    Raises:
        NotRunning: nothing answers on the socket (and none was to be started).
        ZotdError: ``hello`` failed; ``cannot_start`` if a daemon could not be started.
    """
    path = Path(socket) if socket is not None else Paths.from_env().socket
    try:
        check_socket_path(path)
    except ValueError as exc:
        raise ZotdError("cannot_connect", str(exc)) from None
    try:
        stream = await anyio.connect_unix(path)
    except (FileNotFoundError, ConnectionRefusedError):
        if not autostart.enabled(start):
            raise NotRunning(path) from None
        try:
            stream = await autostart.start_daemon(path)
        except autostart.StartError as exc:
            raise ZotdError("cannot_start", f"cannot start zotd: {exc}") from None
    except OSError as exc:
        raise ZotdError(
            "cannot_connect", f"cannot connect to {path}: {exc.strerror or exc}"
        ) from None
    try:
        async with stream, anyio.create_task_group() as tg:
            zot = Client(stream)
            tg.start_soon(zot.run)
            try:
                if hello:
                    await zot.hello(
                        cwd=cwd if cwd is not None else os.getcwd(),
                        provider=provider,
                        model=model,
                        client=client,
                        token=token if token is not None else os.environ.get("ZOTD_TOKEN"),
                        attach=attach,
                    )
                yield zot
            finally:
                tg.cancel_scope.cancel()
                zot._push_send.close()
                zot._push_recv.close()
    except BaseExceptionGroup as group:
        # The reader task never raises, so a group holds the caller's own
        # exception: hand it back as itself.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
