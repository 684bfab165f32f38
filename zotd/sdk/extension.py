"""The extension object: the app API an extension author writes against.

:class:`Extension` holds the decorators that register handlers (commands,
tools, observers, guards, panel handlers, kept in a
:class:`~zotd.sdk.handlers.Handlers`), what handlers call to talk to the
user, the agent and the host (``notify``, ``progress``, ``open_panel``,
``call_tool``, ...: :class:`~zotd.sdk.actions.Actions`), and ``run()``,
which takes over the process's stdio (:mod:`zotd.sdk.stdio`), writes the
handshake, and hands the rest to the runtime (:mod:`zotd.sdk.runtime`)
until the host says ``shutdown``.

An extension is ready once it has written ``ready``, and what it imports
before that is most of what its start costs: importing ``zotd.sdk`` loads
msgspec, a part of the protocol (its frames, not its decoders) and small
plain modules. The handshake is built from what the decorators recorded and
written with a blocking write; only then does ``run()`` import the runtime,
and asyncio with it (some 25 ms: ``concurrent.futures``, ``logging``,
``ssl``, ...), while the host reads the handshake. No module imported before
that may import asyncio; ``tests/e2e/test_sdk_startup.py`` checks it.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from ..protocol.ext_base import EXPOSURES, INTERCEPTABLE, REPLAYS
from .actions import Actions
from .guards import BEFORE_AGENT_START
from .handlers import Command, Guard, Handlers, Tool, ToolMeta
from .requests import PROGRESS_INTERVAL
from .schema import Signature, schema_of
from .stdio import Stdio

if TYPE_CHECKING:
    from pathlib import Path

    from ..protocol.host_frames import HelloAck
    from .runtime import Runtime

__all__ = ["PROGRESS_INTERVAL", "Exposure", "Extension", "Replay"]

F = TypeVar("F", bound=Callable[..., Any])

#: How a tool is offered (current zot): ``direct`` (the default), ``codemode``
#: (to scripts, discoverable), ``deferred`` (discoverable, declared once
#: activated), ``model-only`` (never to scripts).
Exposure = Literal["direct", "codemode", "deferred", "model-only"]
#: What a durable host may do with a call interrupted by a crash (current
#: zot): ``never`` (the default), ``safe``, ``idempotent``, ``reconcile``.
Replay = Literal["never", "safe", "idempotent", "reconcile"]


class Extension(Actions):
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
        self.host: HelloAck | None = None
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
        output_schema: dict[str, Any] | type | None = None,
        interactive: bool = False,
        deferred: bool = False,
        exposure: Exposure | None = None,
        namespace: str = "",
        namespace_description: str = "",
        namespace_instructions: str = "",
        replay: Replay | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        description: str | None = None,
        *,
        schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | type | None = None,
        interactive: bool = False,
        deferred: bool = False,
        exposure: Exposure | None = None,
        namespace: str = "",
        namespace_description: str = "",
        namespace_instructions: str = "",
        replay: Replay | None = None,
    ) -> Any:
        """Registers a tool the model can call.

        Its JSON Schema comes from the handler's annotated parameters (or the
        one :class:`msgspec.Struct` it takes), and the model's arguments are
        checked and converted before the handler runs. With ``schema``, the
        handler gets the arguments as one ``dict`` instead. ``name`` defaults
        to the function's name, ``description`` to its docstring. Works with
        and without parentheses (``@ext.tool`` or ``@ext.tool()``).

        Current zot's options: ``output_schema`` (a JSON Schema, or a type
        to make one from) describes the structured data the tool returns
        along with its text (what it returns beyond content becomes that
        data, see :mod:`zotd.sdk.results`); ``interactive`` marks a tool
        that waits for the user (no reply deadline; it may
        ``ext.open_panel()``); ``deferred`` keeps it from the model until a
        result's ``activate_tools`` names it; ``exposure``, ``namespace``
        (with its description and instructions) and ``replay`` are passed
        on for the host to use.

        Raises:
            ValueError: an unknown ``exposure`` (the host would skip the
                tool) or ``replay``.
            TypeError: ``output_schema`` is a type msgspec has no schema for.
        """
        if callable(name):  # @ext.tool, bare
            handler, name = name, None
            return self.tool()(handler)
        for option, value, known in (
            ("exposure", exposure, EXPOSURES),
            ("replay", replay, REPLAYS),
        ):
            if value is not None and value not in known:
                raise ValueError(f"unknown {option} {value!r}: one of {', '.join(sorted(known))}")
        if output_schema is not None and not isinstance(output_schema, dict):
            output_schema = schema_of(output_schema)
        meta = ToolMeta(
            output_schema=output_schema,
            namespace=namespace,
            namespace_description=namespace_description,
            namespace_instructions=namespace_instructions,
            exposure=exposure or "",
            deferred=deferred,
            interactive=interactive,
            replay=replay or "",
        )

        def register(handler: F) -> F:
            tool_name = name or handler.__name__
            text = description if description is not None else inspect.getdoc(handler) or ""
            self._handlers.tools[tool_name] = Tool(
                tool_name, text, handler, Signature(handler, schema), meta
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
        ``turn_start``, ``assistant_message`` or ``before_agent_start``; one
        per event, the last registered wins (``intercept_tool_call`` and
        ``before_agent_start`` included).

        The handler gets the event's fields as a ``dict`` (as an observer
        does) and returns :func:`~zotd.sdk.block` to refuse it,
        :func:`~zotd.sdk.rewrite` (``tool_call``) or
        :func:`~zotd.sdk.replace_text` (``assistant_message``) to change it,
        or ``None`` to let it be; for ``before_agent_start``, see
        :meth:`before_agent_start`.
        """
        if event not in INTERCEPTABLE:
            raise ValueError(f"cannot intercept {event!r}: only {', '.join(sorted(INTERCEPTABLE))}")

        def register(handler: F) -> F:
            self._handlers.guards[event] = Guard(handler)
            return handler

        return register

    def before_agent_start(self, handler: F) -> F:
        """Registers the guard asked for the agent's system prompt before its
        first model call (current zot): ``handler(event)`` gets the event's
        fields as a ``dict``, ``system_prompt`` among them, and returns the
        new prompt (a ``str``, which replaces it whole; ``""`` deletes it)
        or ``None`` to keep it. Guards of several extensions are asked one
        after another, each seeing the prompt the one before left."""
        self._handlers.guards[BEFORE_AGENT_START] = Guard(handler)
        return handler

    def on_panel_key(self, handler: F) -> F:
        """Registers what handles a key pressed in one of the extension's
        panels: ``handler(panel_id, key, text)``, where ``key`` names it
        (``up``, ``enter``, ``a``, ...) and ``text`` is what it types, if
        anything. It may return a :class:`~zotd.sdk.Panel` to redraw. (The
        keys of a panel opened with ``ext.open_panel()`` go to it instead,
        while it is open.)"""
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
        their client went away): ``handler(panel_id)``. (A panel opened with
        ``ext.open_panel()`` is told instead: its ``key()`` returns ``None``.)"""
        self._handlers.panel["close"] = handler
        return handler

    @property
    def data_dir(self) -> Path:
        """A directory for this extension's state that survives reinstalls and
        upgrades: the ``data_dir`` of ``hello_ack`` when the host sends one,
        else ``$ZOT_HOME/data/<name>`` (without ``ZOT_HOME``, zot's default
        home), created (mode 0700) on first use."""
        # Imported here, not at start: an extension that never asks does not pay.
        from pathlib import Path

        import platformdirs

        if self.host is not None and self.host.data_dir:
            return Path(self.host.data_dir)  # the host made it
        home = os.environ.get("ZOT_HOME")
        root = Path(home) if home else platformdirs.user_state_path("zot")
        path = root / "data" / self.name
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    # --- running ------------------------------------------------------------------------

    def run(self) -> None:
        """Runs the extension until the host says ``shutdown`` or closes stdin."""
        stdio = Stdio(self.log)
        stdio.take_over()
        # The handshake first, blocking, before asyncio is imported: the host
        # reads it while the runtime loads (frames it sends meanwhile wait in
        # the pipe).
        stdio.send(self._handlers.opening(self.name, self.version))
        from .runtime import Runtime  # asyncio, threads, the decoders: see the module

        self._runtime = Runtime(self.name, self._handlers, stdio, self.log, self._on_host)
        self._runtime.run()
        sys.stderr.flush()
        # Handlers still running in threads are abandoned: the host asked us to go.
        os._exit(0)

    def _on_host(self, frame: HelloAck) -> None:
        self.host = frame
