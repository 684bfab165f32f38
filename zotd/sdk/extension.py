"""The extension object: decorators to register handlers, and ``run()``.

``run()`` speaks the protocol on the process's real stdout and stdin with
asyncio (no trio, no daemon code): it sends ``hello``, the registrations,
``subscribe`` and ``ready``; answers every frame in a task of its own (plain
functions run in a worker thread), so a slow tool never holds up another
call, a guard or ``shutdown``; writes each reply whole, from the event loop
only; answers ``shutdown`` with ``shutdown_ack`` and exits.

Each request (a tool call, a command, an intercept) is a :class:`_Request`,
found by id while it runs and visible to its handler through a context
variable (copied into the worker thread): that is how ``ext.progress()``
knows its call and ``ext.cancelled()`` its request. A ``cancel`` from the
host cancels the request's task and marks it, and nothing is sent for it
afterwards. Panel events are handled one at a time, in order.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import msgspec
import platformdirs

from ..protocol import extension as ep
from ..protocol.frames import FrameError, UnknownFrame
from . import results
from .schema import ArgumentError, Signature

F = TypeVar("F", bound=Callable[..., Any])

#: The longest line read from the host.
MAX_LINE = 16 * 1024 * 1024

#: Plain-function handlers that may run at once.
HANDLER_THREADS = 256

#: Seconds between two ``tool_progress`` frames of one call; updates made in
#: between are merged (the latest is sent when the time comes, or just
#: before the call's result).
PROGRESS_INTERVAL = 0.05

_encoder = msgspec.json.Encoder()


_Kind = Literal["tool", "command", "intercept"]


@dataclass(eq=False)
class _Request:
    """A request of the host being handled: ``tool``, ``command`` or ``intercept``.

    ``cancelled`` is set on the loop and read from any thread; the rest is
    the loop's alone.
    """

    id: str
    kind: _Kind
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    #: Answered or cancelled: nothing more goes out for it.
    finished: bool = False
    #: The latest progress not sent yet, its timer, and when the next may go.
    progress: ep.ToolProgress | None = None
    timer: asyncio.TimerHandle | None = None
    next_progress: float = 0.0

    def finish(self) -> None:
        self.finished = True
        self.progress = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


#: The request whose handler is running (in its task, or its worker thread).
_current: contextvars.ContextVar[_Request | None] = contextvars.ContextVar(
    "zotd_sdk_request", default=None
)


@dataclass
class _Command:
    name: str
    description: str
    handler: Callable[..., Any]


@dataclass
class _Tool:
    name: str
    description: str
    handler: Callable[..., Any]
    signature: Signature


@dataclass
class _Guard:
    handler: Callable[..., Any]
    #: ``handler(tool_name, tool_args)`` (``intercept_tool_call``) rather
    #: than ``handler(event)``.
    spread: bool = False


#: The three panel events, by frame type.
_PANEL_EVENTS = {ep.PanelKey: "key", ep.PanelResize: "resize", ep.PanelClose: "close"}


class Extension:
    """A zot extension.

    Args:
        name: must match ``name`` in its ``extension.json``.
        version: shown in ``zot ext list``.

    Example::

        ext = Extension("hello", "1.0.0")

        @ext.command("hello", "say hi")
        def hello(args: str) -> Response:
            return prompt("Greet me in one short sentence.")

        ext.run()
    """

    def __init__(self, name: str, version: str = "0.0.0") -> None:
        self.name = name
        self.version = version
        #: What the host said in ``hello_ack`` (provider, model, cwd, ...),
        #: once it has said it; ``None`` before.
        self.host: ep.HelloAck | None = None
        self._commands: dict[str, _Command] = {}
        self._tools: dict[str, _Tool] = {}
        self._observers: dict[str, list[Callable[..., Any]]] = {}
        self._guards: dict[str, _Guard] = {}
        self._panel_handlers: dict[str, Callable[..., Any]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out_fd = 1
        self._tasks: set[asyncio.Task[None]] = set()
        self._requests: dict[str, _Request] = {}
        self._panel_lock = asyncio.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._in: Any = sys.stdin

    # --- registering ----------------------------------------------------------------

    def command(self, name: str, description: str = "") -> Callable[[F], F]:
        """Registers ``/name``; the handler gets the text after the command.

        It returns :func:`~zotd.sdk.prompt`, :func:`~zotd.sdk.insert`,
        :func:`~zotd.sdk.display`, :func:`~zotd.sdk.noop` or
        :func:`~zotd.sdk.error` (a string is displayed), or a
        :class:`~zotd.sdk.Panel` to open.
        """

        def register(handler: F) -> F:
            self._commands[name.removeprefix("/")] = _Command(
                name.removeprefix("/"), description, handler
            )
            return handler

        return register

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        schema: dict[str, Any] | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        description: str | None = None,
        *,
        schema: dict[str, Any] | None = None,
    ) -> Any:
        """Registers a tool the model can call.

        Its JSON Schema comes from the handler's annotated parameters (or the
        one :class:`msgspec.Struct` it takes), and the model's arguments are
        checked and converted before the handler runs. With ``schema``, the
        handler gets the arguments as one ``dict`` instead. ``name`` defaults
        to the function's name, ``description`` to its docstring. Works with
        and without parentheses (``@ext.tool`` or ``@ext.tool()``).
        """
        if callable(name):  # @ext.tool, bare
            handler, name = name, None
            return self.tool()(handler)

        def register(handler: F) -> F:
            tool_name = name or handler.__name__
            text = description if description is not None else inspect.getdoc(handler) or ""
            self._tools[tool_name] = _Tool(tool_name, text, handler, Signature(handler, schema))
            return handler

        return register

    def on(self, event: str) -> Callable[[F], F]:
        """Observes a lifecycle event (``session_start``, ``turn_start``,
        ``turn_end``, ``tool_call``, ``assistant_message``); the handler gets
        the event's fields as a ``dict``."""

        def register(handler: F) -> F:
            self._observers.setdefault(event, []).append(handler)
            return handler

        return register

    def intercept_tool_call(self, handler: F) -> F:
        """Registers the guard asked before every tool call: ``handler(tool_name,
        tool_args)`` returns :func:`~zotd.sdk.block` to refuse it,
        :func:`~zotd.sdk.rewrite` to change its arguments, or ``None``."""
        self._guards["tool_call"] = _Guard(handler, spread=True)
        return handler

    def intercept(self, event: str) -> Callable[[F], F]:
        """Registers the guard asked before ``event`` goes ahead: ``tool_call``,
        ``turn_start`` or ``assistant_message``; one per event, the last
        registered wins (``intercept_tool_call`` included).

        The handler gets the event's fields as a ``dict`` (as an observer
        does) and returns :func:`~zotd.sdk.block` to refuse it,
        :func:`~zotd.sdk.rewrite` (``tool_call``) or
        :func:`~zotd.sdk.replace_text` (``assistant_message``) to change it,
        or ``None`` to let it be.
        """
        if event not in ep.INTERCEPTABLE:
            raise ValueError(
                f"cannot intercept {event!r}: only {', '.join(sorted(ep.INTERCEPTABLE))}"
            )

        def register(handler: F) -> F:
            self._guards[event] = _Guard(handler)
            return handler

        return register

    def on_panel_key(self, handler: F) -> F:
        """Registers what handles a key pressed in one of the extension's
        panels: ``handler(panel_id, key, text)``, where ``key`` names it
        (``up``, ``enter``, ``a``, ...) and ``text`` is what it types, if
        anything. It may return a :class:`~zotd.sdk.Panel` to redraw."""
        self._panel_handlers["key"] = handler
        return handler

    def on_panel_resize(self, handler: F) -> F:
        """Registers what handles a panel's new size:
        ``handler(panel_id, width, height)``, in cells. It may return a
        :class:`~zotd.sdk.Panel` to redraw."""
        self._panel_handlers["resize"] = handler
        return handler

    def on_panel_close(self, handler: F) -> F:
        """Registers what is told that a panel was closed by the user (or
        their client went away): ``handler(panel_id)``."""
        self._panel_handlers["close"] = handler
        return handler

    @property
    def data_dir(self) -> Path:
        """A directory for this extension's state that survives reinstalls and
        upgrades: the ``data_dir`` of ``hello_ack`` when the host sends one,
        else ``$ZOT_HOME/data/<name>`` (without ``ZOT_HOME``, zot's default
        home), created (mode 0700) on first use."""
        if self.host is not None and self.host.data_dir:
            return Path(self.host.data_dir)  # the host made it
        home = os.environ.get("ZOT_HOME")
        root = Path(home) if home else platformdirs.user_state_path("zot")
        path = root / "data" / self.name
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    # --- talking to the user ----------------------------------------------------------

    def log(self, *parts: Any) -> None:
        """Writes a line to the extension's log (its stderr)."""
        print(f"[{self.name}]", *parts, file=sys.stderr, flush=True)

    def notify(self, message: str, level: str = "info") -> None:
        """Shows the user a note (``info``, ``success``, ``warn`` or ``error``);
        safe from any thread."""
        self._soon("notify", self._send, ep.Notify(message=message, level=level))

    def progress(
        self, message: str = "", progress: float | None = None, total: float | None = None
    ) -> None:
        """Tells the agent how far the running tool call has got, from inside
        its handler (its thread, its task, or tasks it starts): a ``message``,
        and optionally ``progress`` out of ``total``.

        Updates closer together than :data:`PROGRESS_INTERVAL` are merged:
        the latest goes out when the time comes, or just before the result.
        None goes out once the call is cancelled.

        Raises:
            RuntimeError: not inside a tool handler.
        """
        request = _current.get()
        if request is None or request.kind != "tool":
            raise RuntimeError(
                "progress() works only inside a tool handler, in its own thread or task"
            )
        for name, value in (("progress", progress), ("total", total)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise TypeError(f"progress(): {name} must be a number, not {type(value).__name__}")
        frame = ep.ToolProgress(id=request.id, message=str(message), progress=progress, total=total)
        self._soon("progress", self._queue_progress, request, frame)

    def cancelled(self) -> bool:
        """Whether the host has given up on the request being handled (a tool
        call, a command, an intercept): its reply would be dropped, so a
        long-running plain-function handler may stop early. ``False``
        outside a request. (An ``async def`` handler is cancelled outright.)"""
        request = _current.get()
        return request is not None and request.cancelled

    def render_panel(
        self, panel_id: str, *, title: str = "", lines: Sequence[str] | str = (), footer: str = ""
    ) -> None:
        """Redraws an open panel whole (what is left out is blank; ``lines``
        may be one ``str``, split at its newlines); safe from any thread."""
        self._soon(
            "render_panel",
            self._send,
            results.render_frame(results.Panel(panel_id, title, lines, footer)),
        )

    def close_panel(self, panel_id: str) -> None:
        """Closes a panel; safe from any thread."""
        self._soon("close_panel", self._send, ep.PanelClose(panel_id=panel_id))

    # --- running ------------------------------------------------------------------------

    def run(self) -> None:
        """Runs the extension until the host says ``shutdown`` or closes stdin."""
        # Frames go to the real stdout; from now on anything else printed to
        # stdout (a stray print(), a child process) lands in stderr, the log.
        sys.stdout.flush()
        self._out_fd = os.dup(1)
        os.dup2(2, 1)
        # Frames come from the real stdin; child processes a handler starts
        # get /dev/null there, so that none can read (steal) a frame.
        self._in = os.fdopen(os.dup(0), "rb", buffering=0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = sys.stderr
        try:
            asyncio.run(self._main())
        except KeyboardInterrupt:
            pass
        sys.stderr.flush()
        # Handlers still running in threads are abandoned: the host asked us to go.
        os._exit(0)

    async def _main(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        # Plain-function handlers each get a thread: many slow tools must not
        # starve a guard (which has 5 s) or the rest of the calls.
        # (Not the loop's default executor: asyncio.run would wait for its
        # threads at exit, and a slow handler would hold up `shutdown`.)
        self._executor = ThreadPoolExecutor(
            max_workers=HANDLER_THREADS, thread_name_prefix=self.name
        )
        reader = asyncio.StreamReader(limit=MAX_LINE)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._in)
        except ValueError:  # a regular file: someone trying the extension by hand
            reader.feed_data(self._in.read())
            reader.feed_eof()
        for frame in self._opening():
            self._send(frame)
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a line over MAX_LINE
                self.log("dropped a line longer than", MAX_LINE, "bytes")
                continue
            if not line:
                # The host closed stdin: finish what was asked, then go.
                await asyncio.gather(*self._tasks, return_exceptions=True)
                return
            if self._on_line(line):
                return

    def _capabilities(self) -> list[str]:
        """What ``hello`` says the extension does (informational for the host)."""
        found = [
            kind
            for kind, present in (
                ("commands", self._commands),
                ("tools", self._tools),
                ("events", self._observers),
                ("intercept", self._guards),
                ("panels", self._commands or self._panel_handlers),  # a command may open one
                ("tool_progress", self._tools),
            )
            if present
        ]
        return [*found, "cancel"]

    def _opening(self) -> list[msgspec.Struct]:
        frames: list[msgspec.Struct] = [
            ep.Hello(name=self.name, version=self.version, capabilities=self._capabilities())
        ]
        frames += [
            ep.RegisterCommand(name=c.name, description=c.description)
            for c in self._commands.values()
        ]
        frames += [
            ep.RegisterTool(
                name=t.name,
                description=t.description,
                schema=msgspec.Raw(_encoder.encode(t.signature.schema)),
            )
            for t in self._tools.values()
        ]
        if self._observers or self._guards:
            frames.append(
                ep.Subscribe(events=sorted(self._observers), intercept=sorted(self._guards))
            )
        frames.append(ep.Ready())
        return frames

    def _on_line(self, line: bytes) -> bool:
        """Handles one frame; ``True`` once the extension should exit."""
        try:
            frame = ep.decode_host_frame(line)
        except FrameError as exc:
            self.log(f"skipped a malformed frame ({exc.message})")
            return False
        if isinstance(frame, UnknownFrame):
            return False  # a newer host's frame: ignore it
        if isinstance(frame, ep.HelloAck):
            self.host = frame
        elif isinstance(frame, ep.Shutdown):
            self._send(ep.ShutdownAck())
            return True
        elif isinstance(frame, ep.ToolCall):
            self._start(frame.id, "tool", lambda r: self._call_tool(r, frame))
        elif isinstance(frame, ep.CommandInvoked):
            self._start(frame.id, "command", lambda r: self._invoke(r, frame))
        elif isinstance(frame, ep.EventIntercept):
            self._start(frame.id, "intercept", lambda r: self._intercept(r, frame, line))
        elif isinstance(frame, ep.Cancel):
            self._cancel(frame.id)
        elif isinstance(frame, ep.LifecycleEvent):
            for handler in self._observers.get(frame.event, ()):
                self._spawn(self._observe(handler, line))
        elif isinstance(frame, ep.PanelKey | ep.PanelResize | ep.PanelClose):
            on_panel = self._panel_handlers.get(_PANEL_EVENTS[type(frame)])
            if on_panel is not None:
                self._spawn(self._on_panel(on_panel, frame))
        return False

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _start(
        self, rid: str, kind: _Kind, work: Callable[[_Request], Coroutine[Any, Any, None]]
    ) -> None:
        """Handles a request in a task of its own, known by ``rid`` until it ends."""
        request = _Request(rid, kind)
        self._requests[rid] = request
        request.task = self._spawn(self._serve(request, work))

        def done(_: asyncio.Task[None]) -> None:
            request.finish()
            if self._requests.get(rid) is request:
                del self._requests[rid]

        request.task.add_done_callback(done)

    async def _serve(
        self, request: _Request, work: Callable[[_Request], Coroutine[Any, Any, None]]
    ) -> None:
        # (The coroutine is made here, so that none is left unawaited when
        # a cancel comes before the task has started.)
        _current.set(request)  # this task's context, copied into worker threads
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

    # --- the kinds of work ------------------------------------------------------------

    async def _call_tool(self, request: _Request, frame: ep.ToolCall) -> None:
        tool = self._tools.get(frame.name)
        if tool is None:
            reply = results.tool_frame(frame.id, results.tool_error(f"no tool {frame.name!r}"))
        else:
            try:
                args, kwargs = tool.signature.arguments(bytes(frame.args))
                value = await self._call(tool.handler, *args, **kwargs)
                reply = results.tool_frame(frame.id, value)
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

    async def _invoke(self, request: _Request, frame: ep.CommandInvoked) -> None:
        command = self._commands.get(frame.name)
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

    async def _intercept(self, request: _Request, frame: ep.EventIntercept, line: bytes) -> None:
        guard = self._guards.get(frame.event)
        reply = results.intercept_frame(frame.id, None)
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
                reply = results.intercept_frame(frame.id, verdict, frame.event)
            except Exception:
                # A broken guard allows, as the host would.
                self._report(f"the {frame.event} guard")
        self._answer(request, reply, lambda why: results.intercept_frame(frame.id, None))

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
                self._report(f"the panel_{_PANEL_EVENTS[type(frame)]} handler")
                return
            if isinstance(value, results.Panel) and not isinstance(frame, ep.PanelClose):
                self._send(results.render_frame(value))

    # --- progress -------------------------------------------------------------------------

    def _queue_progress(self, request: _Request, frame: ep.ToolProgress) -> None:
        """On the loop: sends ``frame`` now, or as the latest when the interval is up."""
        if request.finished:
            return
        request.progress = frame
        if request.timer is not None:
            return  # a send is due; it will take this one
        assert self._loop is not None
        wait = request.next_progress - self._loop.time()
        if wait <= 0:
            self._flush_progress(request)
        else:
            request.timer = self._loop.call_later(wait, self._flush_progress, request)

    def _flush_progress(self, request: _Request) -> None:
        assert self._loop is not None
        request.timer = None
        frame, request.progress = request.progress, None
        if frame is None or request.finished:
            return
        request.next_progress = self._loop.time() + PROGRESS_INTERVAL
        self._send(frame)

    # --- writing --------------------------------------------------------------------------

    def _send(self, frame: msgspec.Struct) -> None:
        # Only ever called on the event loop's thread: one frame, one write
        # loop, never interleaved with another.
        try:
            line = _encoder.encode(frame) + b"\n"
        except Exception:  # a notify() with text that is not valid Unicode, say
            self._report("encoding a frame")
            return
        self._write(line)

    def _answer(
        self,
        request: _Request,
        frame: msgspec.Struct,
        instead: Callable[[str], msgspec.Struct],
    ) -> None:
        """Sends the reply to ``request``, unless the host has cancelled it
        (it would drop the reply, and count it)."""
        if request.cancelled:
            return
        if request.progress is not None:  # merged, not sent yet: it goes first
            self._send(request.progress)
        request.finish()
        self._reply(frame, instead)

    def _reply(self, frame: msgspec.Struct, instead: Callable[[str], msgspec.Struct]) -> None:
        # A reply is owed: if the handler's answer cannot be encoded (a str
        # with lone surrogates, from a file name, say), say so instead.
        try:
            line = _encoder.encode(frame) + b"\n"
        except Exception as exc:
            self._report("encoding a reply")
            line = _encoder.encode(instead(_describe(exc))) + b"\n"
        self._write(line)

    def _write(self, line: bytes) -> None:
        data = memoryview(line)
        while data:
            data = data[os.write(self._out_fd, data) :]

    def _soon(self, what: str, do: Callable[..., None], *args: Any) -> None:
        """Runs ``do(*args)`` on the event loop: now if called there, else soon."""
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"{what}() works once run() has started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            do(*args)
            return
        try:
            loop.call_soon_threadsafe(do, *args)
        except RuntimeError:
            pass  # the loop is closed: the extension is leaving

    def _report(self, what: str) -> None:
        self.log(f"{what} failed:")
        traceback.print_exc(file=sys.stderr)

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


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
