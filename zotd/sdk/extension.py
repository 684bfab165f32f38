"""The extension object: the app API an extension author writes against.

:class:`Extension` holds the decorators that register handlers (commands,
tools, observers, guards, panel handlers, kept in a
:class:`~zotd.sdk.handlers.Handlers`), what handlers call to talk to the
user and the agent (``notify``, ``progress``, ``cancelled``,
``render_panel``, ...), and ``run()``, which hands the process's stdio
(:mod:`zotd.sdk.stdio`) to the runtime (:mod:`zotd.sdk.runtime`) until the
host says ``shutdown``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import platformdirs

from ..protocol import extension as ep
from . import results
from .handlers import Command, Guard, Handlers, Tool
from .requests import PROGRESS_INTERVAL, current
from .runtime import Runtime
from .schema import Signature
from .stdio import Stdio

__all__ = ["PROGRESS_INTERVAL", "Extension"]

F = TypeVar("F", bound=Callable[..., Any])


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
        self._handlers = Handlers()
        self._runtime: Runtime | None = None

    # --- registering ----------------------------------------------------------------

    def command(self, name: str, description: str = "") -> Callable[[F], F]:
        """Registers ``/name``; the handler gets the text after the command.

        It returns :func:`~zotd.sdk.prompt`, :func:`~zotd.sdk.insert`,
        :func:`~zotd.sdk.display`, :func:`~zotd.sdk.noop` or
        :func:`~zotd.sdk.error` (a string is displayed), or a
        :class:`~zotd.sdk.Panel` to open.
        """

        def register(handler: F) -> F:
            self._handlers.commands[name.removeprefix("/")] = Command(
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
            self._handlers.tools[tool_name] = Tool(
                tool_name, text, handler, Signature(handler, schema)
            )
            return handler

        return register

    def on(self, event: str) -> Callable[[F], F]:
        """Observes a lifecycle event (``session_start``, ``turn_start``,
        ``turn_end``, ``tool_call``, ``assistant_message``); the handler gets
        the event's fields as a ``dict``."""

        def register(handler: F) -> F:
            self._handlers.observers.setdefault(event, []).append(handler)
            return handler

        return register

    def intercept_tool_call(self, handler: F) -> F:
        """Registers the guard asked before every tool call: ``handler(tool_name,
        tool_args)`` returns :func:`~zotd.sdk.block` to refuse it,
        :func:`~zotd.sdk.rewrite` to change its arguments, or ``None``."""
        self._handlers.guards["tool_call"] = Guard(handler, spread=True)
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
            self._handlers.guards[event] = Guard(handler)
            return handler

        return register

    def on_panel_key(self, handler: F) -> F:
        """Registers what handles a key pressed in one of the extension's
        panels: ``handler(panel_id, key, text)``, where ``key`` names it
        (``up``, ``enter``, ``a``, ...) and ``text`` is what it types, if
        anything. It may return a :class:`~zotd.sdk.Panel` to redraw."""
        self._handlers.panel["key"] = handler
        return handler

    def on_panel_resize(self, handler: F) -> F:
        """Registers what handles a panel's new size:
        ``handler(panel_id, width, height)``, in cells. It may return a
        :class:`~zotd.sdk.Panel` to redraw."""
        self._handlers.panel["resize"] = handler
        return handler

    def on_panel_close(self, handler: F) -> F:
        """Registers what is told that a panel was closed by the user (or
        their client went away): ``handler(panel_id)``."""
        self._handlers.panel["close"] = handler
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
        runtime = self._started("notify")
        runtime.soon("notify", runtime.send, ep.Notify(message=message, level=level))

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
        request = current.get()
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
        runtime = self._started("progress")
        runtime.soon("progress", runtime.queue_progress, request, frame)

    def cancelled(self) -> bool:
        """Whether the host has given up on the request being handled (a tool
        call, a command, an intercept): its reply would be dropped, so a
        long-running plain-function handler may stop early. ``False``
        outside a request. (An ``async def`` handler is cancelled outright.)"""
        request = current.get()
        return request is not None and request.cancelled

    def render_panel(
        self, panel_id: str, *, title: str = "", lines: Sequence[str] | str = (), footer: str = ""
    ) -> None:
        """Redraws an open panel whole (what is left out is blank; ``lines``
        may be one ``str``, split at its newlines); safe from any thread."""
        runtime = self._started("render_panel")
        runtime.soon(
            "render_panel",
            runtime.send,
            results.render_frame(results.Panel(panel_id, title, lines, footer)),
        )

    def close_panel(self, panel_id: str) -> None:
        """Closes a panel; safe from any thread."""
        runtime = self._started("close_panel")
        runtime.soon("close_panel", runtime.send, ep.PanelClose(panel_id=panel_id))

    # --- running ------------------------------------------------------------------------

    def run(self) -> None:
        """Runs the extension until the host says ``shutdown`` or closes stdin."""
        stdio = Stdio(self.log)
        stdio.take_over()
        self._runtime = Runtime(
            self.name, self.version, self._handlers, stdio, self.log, self._on_host
        )
        try:
            asyncio.run(self._runtime.main())
        except KeyboardInterrupt:
            pass
        sys.stderr.flush()
        # Handlers still running in threads are abandoned: the host asked us to go.
        os._exit(0)

    def _on_host(self, frame: ep.HelloAck) -> None:
        self.host = frame

    def _started(self, what: str) -> Runtime:
        """The runtime, once ``run()`` has started it."""
        if self._runtime is None or self._runtime.loop is None:
            raise RuntimeError(f"{what}() works once run() has started")
        return self._runtime
