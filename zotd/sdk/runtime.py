"""The SDK's runtime: the host's frames dispatched to the extension's handlers.

:meth:`Runtime.run` runs :meth:`Runtime.main` on an asyncio loop (no trio,
no daemon code), once ``Extension.run()`` has written the opening frames
(``hello``, the registrations, ``subscribe``, ``ready``): this module, and
asyncio with it, is imported only then, so that an extension is ready
without paying for them (:mod:`zotd.sdk.extension`). It answers every
frame in a task of its own (plain functions run in a worker thread), so a
slow tool never holds up another call, a guard or ``shutdown``; writes each
reply whole, from the event loop only; answers ``shutdown`` with
``shutdown_ack`` and returns.

A request is a :class:`~zotd.sdk.requests.Request`, known by id while it
runs. A ``cancel`` from the host (or current zot's ``tool_cancel``, the same
for a tool call) cancels the request's task and marks it, closes the panels
it opened, and nothing is sent for it afterwards. Panel events are handled
one at a time, in order; those of a panel a handler opened itself go to
its :class:`~zotd.sdk.panels.LivePanel`. The extension's own tool calls
(``call_tool``) wait in :class:`~zotd.sdk.calls.HostCalls` for their
``tool_result``. What handlers' actions reach on the loop (writing a frame,
panels, progress) is its base, :class:`~zotd.sdk.bridge.Bridge`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import sys
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from ..protocol import extension as ep
from ..protocol.frames import FrameError, UnknownFrame
from . import guards, results
from .bridge import Bridge
from .calls import HostCalls
from .handlers import Handlers
from .reader import Reader
from .requests import Kind, Request, current
from .schema import ArgumentError
from .stdio import Stdio

#: Plain-function handlers that may run at once.
HANDLER_THREADS = 256

#: The three panel events, by frame type: the key of their handler.
PANEL_EVENTS: dict[type[msgspec.Struct], str] = {
    ep.PanelKey: "key",
    ep.PanelResize: "resize",
    ep.PanelClose: "close",
}

_encoder = msgspec.json.Encoder()

_Work = Callable[[Request], Coroutine[Any, Any, None]]


class Runtime(Bridge):
    """One run of an extension: its loop, its tasks and the requests in flight.

    Args:
        name: the extension's name (its worker threads' prefix).
        handlers: what it registered.
        stdio: where its frames' lines come and go (the handshake written).
        log: writes a line to its log (stderr).
        on_host: given the host's ``hello_ack``.
    """

    def __init__(
        self,
        name: str,
        handlers: Handlers,
        stdio: Stdio,
        log: Callable[..., None],
        on_host: Callable[[ep.HelloAck], None],
    ) -> None:
        super().__init__(stdio)
        self.name = name
        self.handlers = handlers
        self.log = log
        assert stdio.stdin is not None, "stdio.take_over() first"
        self._reader = Reader(stdio.stdin, log)
        self._on_host = on_host
        #: The host's ``hello_ack``, once it came.
        self.host: ep.HelloAck | None = None
        self.calls = HostCalls(self.send)
        self._tasks: set[asyncio.Task[None]] = set()
        self._requests: dict[str, Request] = {}
        self._panel_lock = asyncio.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def run(self) -> None:
        """Runs :meth:`main` on a new event loop (Ctrl+C ends it quietly)."""
        try:
            asyncio.run(self.main())
        except KeyboardInterrupt:
            pass

    async def main(self) -> None:
        """Speaks the protocol until ``shutdown``, or until stdin is closed and
        every request asked has been answered (the handshake is out already)."""
        self.loop = asyncio.get_running_loop()
        # Plain-function handlers each get a thread: many slow tools must not
        # starve a guard (which has 5 s) or the rest of the calls.
        # (Not the loop's default executor: asyncio.run would wait for its
        # threads at exit, and a slow handler would hold up `shutdown`.)
        self._executor = ThreadPoolExecutor(
            max_workers=HANDLER_THREADS, thread_name_prefix=self.name
        )
        await self._reader.open()
        while True:
            line = await self._reader.readline()
            if not line:
                # The host closed stdin: finish what was asked, then go
                # (what waits for the host now never gets it).
                self.calls.end("the host closed the extension's stdin")
                self.live_panels.end_all()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                return
            if self._on_line(line):
                return

    def _on_line(self, line: bytes) -> bool:
        """Handles one frame; ``True`` once the extension should exit."""
        if line.isspace():  # (as the host skips an extension's blank lines)
            return False
        try:
            frame = ep.decode_host_frame(line)
        except FrameError as exc:
            self.log(f"skipped a malformed frame ({exc.message})")
            self.calls.unreadable(line, exc.message)
            return False
        if isinstance(frame, UnknownFrame):
            return False  # a newer host's frame: ignore it
        if isinstance(frame, ep.HelloAck):
            self.host = frame
            self._on_host(frame)
        elif isinstance(frame, ep.Shutdown):
            self.send(ep.ShutdownAck())
            return True
        elif isinstance(frame, ep.ToolCall):
            self._start(frame.id, "tool", lambda r: self._call_tool(r, frame))
        elif isinstance(frame, ep.CommandInvoked):
            self._start(frame.id, "command", lambda r: self._invoke(r, frame))
        elif isinstance(frame, ep.EventIntercept):
            self._start(frame.id, "intercept", lambda r: self._intercept(r, frame, line))
        elif isinstance(frame, ep.Cancel | ep.ToolCancel):
            self._cancel(frame.id)
        elif isinstance(frame, ep.HostToolResult):
            if not self.calls.answered(frame):
                self.log(f"dropped a tool_result for {frame.id!r}: no call_tool waits for it")
        elif isinstance(frame, ep.LifecycleEvent):
            for handler in self.handlers.observers.get(frame.event, ()):
                self._spawn(self._observe(handler, line))
        elif isinstance(frame, ep.PanelKey | ep.PanelResize | ep.PanelClose):
            if self.to_live_panel(frame):
                return False
            on_panel = self.handlers.panel.get(PANEL_EVENTS[type(frame)])
            if on_panel is not None:
                self._spawn(self._on_panel(on_panel, frame))
        return False

    # --- tasks and cancellation ---------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _start(self, rid: str, kind: Kind, work: _Work) -> None:
        """Handles a request in a task of its own, known by ``rid`` until it ends."""
        request = Request(rid, kind)
        self._requests[rid] = request
        request.task = self._spawn(self._serve(request, work))

        def done(_: asyncio.Task[None]) -> None:
            request.finish()
            if self._requests.get(rid) is request:
                del self._requests[rid]

        request.task.add_done_callback(done)

    async def _serve(self, request: Request, work: _Work) -> None:
        # (The coroutine is made here, so that none is left unawaited when
        # a cancel comes before the task has started.)
        current.set(request)  # this task's context, copied into worker threads
        await work(request)

    def _cancel(self, rid: str) -> None:
        """The host stopped waiting for ``rid``: cancel it, if it still runs."""
        request = self._requests.pop(rid, None)
        if request is None:
            return  # answered already, or never asked: nothing to do
        request.cancelled = True
        request.finish()
        if request.task is not None:
            request.task.cancel()
        undo, request.on_cancel = request.on_cancel, []
        for callback in undo:
            callback()

    # --- the kinds of work ------------------------------------------------------------

    async def _call_tool(self, request: Request, frame: ep.ToolCall) -> None:
        tool = self.handlers.tools.get(frame.name)
        if tool is None:
            reply = results.tool_frame(frame.id, results.tool_error(f"no tool {frame.name!r}"))
        else:
            try:
                args, kwargs = tool.signature.arguments(bytes(frame.args))
                value = await self._call(tool.handler, *args, **kwargs)
                structured = tool.meta.output_schema is not None
                reply = results.tool_frame(frame.id, value, structured=structured)
            except ArgumentError as exc:
                reply = results.tool_frame(frame.id, results.tool_error(str(exc)))
            except Exception as exc:
                self._report(f"tool {frame.name!r}")
                reply = results.tool_frame(frame.id, results.tool_error(_describe(exc)))
        self._answer(
            request,
            reply,
            lambda why: results.tool_frame(
                frame.id, results.tool_error(f"the tool's result cannot be sent: {why}")
            ),
        )

    async def _invoke(self, request: Request, frame: ep.CommandInvoked) -> None:
        command = self.handlers.commands.get(frame.name)
        if command is None:
            reply = ep.CommandResponse(id=frame.id, error=f"no command /{frame.name}")
        else:
            try:
                reply = results.command_frame(
                    frame.id, await self._call(command.handler, frame.args)
                )
            except Exception as exc:
                self._report(f"command /{frame.name}")
                reply = ep.CommandResponse(id=frame.id, error=_describe(exc))
        self._answer(
            request,
            reply,
            lambda why: ep.CommandResponse(
                id=frame.id, error=f"the command's answer cannot be sent: {why}"
            ),
        )

    async def _intercept(self, request: Request, frame: ep.EventIntercept, line: bytes) -> None:
        guard = self.handlers.guards.get(frame.event)
        reply = guards.intercept_frame(frame.id, None)
        if frame.event == guards.BEFORE_AGENT_START and frame.system_prompt is None:
            guard = None  # no prompt to change (as zot's SDK: the guard is not asked)
        if guard is not None:
            try:
                if guard.spread:
                    args = frame.tool_args if isinstance(frame.tool_args, dict) else {}
                    verdict = await self._call(guard.handler, frame.tool_name or "", args)
                else:
                    event = msgspec.json.decode(line)
                    event.pop("type", None)
                    event.pop("id", None)
                    verdict = await self._call(guard.handler, event)
                reply = guards.intercept_frame(frame.id, verdict, frame.event)
            except Exception:
                # A broken guard allows, as the host would.
                self._report(f"the {frame.event} guard")
        self._answer(request, reply, lambda why: guards.intercept_frame(frame.id, None))

    async def _observe(self, handler: Callable[..., Any], line: bytes) -> None:
        try:
            event = msgspec.json.decode(line)
            event.pop("type", None)
            await self._call(handler, event)
        except Exception:
            self._report(f"the {getattr(handler, '__name__', 'event')} observer")

    async def _on_panel(
        self, handler: Callable[..., Any], frame: ep.PanelKey | ep.PanelResize | ep.PanelClose
    ) -> None:
        # One at a time, in the order they came (the lock is fair): a panel
        # must see "down, down, enter" in that order.
        async with self._panel_lock:
            try:
                if isinstance(frame, ep.PanelKey):
                    value = await self._call(handler, frame.panel_id, frame.key, frame.text)
                elif isinstance(frame, ep.PanelResize):
                    value = await self._call(handler, frame.panel_id, frame.width, frame.height)
                else:
                    value = await self._call(handler, frame.panel_id)
            except Exception:
                self._report(f"the panel_{PANEL_EVENTS[type(frame)]} handler")
                return
            if isinstance(value, results.Panel) and not isinstance(frame, ep.PanelClose):
                self.send(results.render_frame(value))

    async def _call(self, handler: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Awaits an ``async def`` handler; runs a plain one in a worker thread."""
        if inspect.iscoroutinefunction(handler):
            return await handler(*args, **kwargs)
        loop = asyncio.get_running_loop()
        # run_in_executor does not carry the context over: do it, so that
        # progress() and cancelled() know their request in the thread too.
        context = contextvars.copy_context()
        return await loop.run_in_executor(
            self._executor, functools.partial(context.run, handler, *args, **kwargs)
        )

    # --- answering --------------------------------------------------------------------------

    def _answer(
        self,
        request: Request,
        frame: msgspec.Struct,
        instead: Callable[[str], msgspec.Struct],
    ) -> None:
        """Sends the reply to ``request``, unless the host has cancelled it
        (it would drop the reply, and count it)."""
        if request.cancelled:
            return
        if request.progress is not None:  # merged, not sent yet: it goes first
            self.send(request.progress)
        request.finish()
        # A reply is owed: if the handler's answer cannot be encoded (a str
        # with lone surrogates, from a file name, say), say so instead.
        try:
            line = _encoder.encode(frame) + b"\n"
        except Exception as exc:
            self._report("encoding a reply")
            line = _encoder.encode(instead(_describe(exc))) + b"\n"
        self._stdio.write(line)

    def _report(self, what: str) -> None:
        self.log(f"{what} failed:")
        traceback.print_exc(file=sys.stderr)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
