"""The extension object: decorators to register handlers, and ``run()``.

``run()`` speaks the protocol on the process's real stdout and stdin with
asyncio (no trio, no daemon code): it sends ``hello``, the registrations,
``subscribe`` and ``ready``; answers every frame in a task of its own (plain
functions run in a worker thread), so a slow tool never holds up another
call, a guard or ``shutdown``; writes each reply whole, from the event loop
only; answers ``shutdown`` with ``shutdown_ack`` and exits.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

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

_encoder = msgspec.json.Encoder()


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
        self._guard: Callable[..., Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out_fd = 1
        self._tasks: set[asyncio.Task[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._in: Any = sys.stdin

    # --- registering ----------------------------------------------------------------

    def command(self, name: str, description: str = "") -> Callable[[F], F]:
        """Registers ``/name``; the handler gets the text after the command.

        It returns :func:`~zotd.sdk.prompt`, :func:`~zotd.sdk.insert`,
        :func:`~zotd.sdk.display`, :func:`~zotd.sdk.noop` or
        :func:`~zotd.sdk.error` (a string is displayed).
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
        tool_args)`` returns :func:`~zotd.sdk.block` to refuse it."""
        self._guard = handler
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
        self._send_soon(ep.Notify(message=message, level=level))

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

    def _opening(self) -> list[msgspec.Struct]:
        frames: list[msgspec.Struct] = [ep.Hello(name=self.name, version=self.version)]
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
        if self._observers or self._guard:
            frames.append(
                ep.Subscribe(
                    events=sorted(self._observers),
                    intercept=["tool_call"] if self._guard else [],
                )
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
            self._spawn(self._call_tool(frame))
        elif isinstance(frame, ep.CommandInvoked):
            self._spawn(self._invoke(frame))
        elif isinstance(frame, ep.EventIntercept):
            self._spawn(self._intercept(frame))
        elif isinstance(frame, ep.LifecycleEvent):
            for handler in self._observers.get(frame.event, ()):
                self._spawn(self._observe(handler, line))
        return False

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the four kinds of work -----------------------------------------------------

    async def _call_tool(self, frame: ep.ToolCall) -> None:
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
        self._reply(
            reply,
            lambda why: results.tool_frame(
                frame.id, results.tool_error(f"the tool's result cannot be sent: {why}")
            ),
        )

    async def _invoke(self, frame: ep.CommandInvoked) -> None:
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
        self._reply(
            reply,
            lambda why: ep.CommandResponse(
                id=frame.id, error=f"the command's answer cannot be sent: {why}"
            ),
        )

    async def _intercept(self, frame: ep.EventIntercept) -> None:
        verdict: Any = None
        if self._guard is not None and frame.event == "tool_call":
            try:
                args = frame.tool_args if isinstance(frame.tool_args, dict) else {}
                verdict = await self._call(self._guard, frame.tool_name or "", args)
            except Exception:
                self._report("the tool-call guard")  # a broken guard allows, as the host would
        self._send(results.intercept_frame(frame.id, verdict))

    async def _observe(self, handler: Callable[..., Any], line: bytes) -> None:
        try:
            event = msgspec.json.decode(line)
            event.pop("type", None)
            await self._call(handler, event)
        except Exception:
            self._report(f"the {getattr(handler, '__name__', 'event')} observer")

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

    def _send_soon(self, frame: msgspec.Struct) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("notify() works once run() has started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._send(frame)
        else:
            loop.call_soon_threadsafe(self._send, frame)

    def _report(self, what: str) -> None:
        self.log(f"{what} failed:")
        traceback.print_exc(file=sys.stderr)

    async def _call(self, handler: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Awaits an ``async def`` handler; runs a plain one in a worker thread."""
        if inspect.iscoroutinefunction(handler):
            return await handler(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(handler, *args, **kwargs)
        )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
