"""What handlers call to talk to the user, the agent and the host.

:class:`Actions` is the half of :class:`~zotd.sdk.Extension` that works once
``run()`` has started: notes (``notify``, ``clear_notes``), a tool call's
``progress`` and ``cancelled``, panels (``open_panel``, ``render_panel``,
``close_panel``), prompts handed to the agent (``submit``,
``submit_slash``) and tool calls through the host (``call_tool``). All but
``call_tool`` are one-way frames, safe from any thread.

Imported before the handshake (see :mod:`zotd.sdk.extension`): the runtime
these act through, and asyncio, are loaded by ``run()``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.ext_base import CALL_TOOL
from ..protocol.ext_frames import ClearNotes, Notify, Submit, SubmitSlash, ToolProgress
from . import results
from .panels import LivePanel
from .requests import current

if TYPE_CHECKING:
    from ..protocol.host_frames import HelloAck
    from .runtime import Runtime


class Actions:
    """What an extension does while it runs (mixed into ``Extension``)."""

    name: str
    host: HelloAck | None
    _runtime: Runtime | None

    def log(self, *parts: Any) -> None:
        """Writes a line to the extension's log (its stderr)."""
        print(f"[{self.name}]", *parts, file=sys.stderr, flush=True)

    def notify(self, message: str, level: str = "info") -> None:
        """Shows the user a note (``info``, ``success``, ``warn`` or ``error``);
        safe from any thread."""
        self._push("notify", Notify(message=message, level=level))

    def clear_notes(self) -> None:
        """Withdraws every note this extension put up (``notify``); other
        extensions' notes stay. Safe from any thread."""
        self._push("clear_notes", ClearNotes())

    def submit(self, text: str) -> None:
        """Hands ``text`` to the agent as the user's next prompt (run now if
        it is idle, else queued like typed input). Safe from any thread.

        Raises:
            ValueError: ``text`` is empty or only white space (the agent
                would ignore it).
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("submit() needs some text")
        self._push("submit", Submit(text=text))

    def submit_slash(self, text: str) -> None:
        """Runs the slash command ``text`` (``"/name args"``) in the agent,
        as though the user typed it. Safe from any thread.

        Raises:
            ValueError: ``text`` does not start with ``/``.
        """
        if not isinstance(text, str) or not text.strip().startswith("/"):
            raise ValueError(f"submit_slash() runs a slash command: {text!r} does not start with /")
        self._push("submit_slash", SubmitSlash(text=text))

    def progress(
        self, message: str = "", progress: float | None = None, total: float | None = None
    ) -> None:
        """Tells the agent how far the running tool call has got, from inside
        its handler (its thread, its task, or tasks it starts): a ``message``,
        and optionally ``progress`` out of ``total``.

        Updates closer together than ``PROGRESS_INTERVAL`` are merged:
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
        frame = ToolProgress(id=request.id, message=str(message), progress=progress, total=total)
        runtime = self._started("progress")
        runtime.soon("progress", runtime.queue_progress, request, frame)

    def cancelled(self) -> bool:
        """Whether the host has given up on the request being handled (a tool
        call, a command, an intercept): its reply would be dropped, so a
        long-running plain-function handler may stop early. ``False``
        outside a request. (An ``async def`` handler is cancelled outright.)"""
        request = current.get()
        return request is not None and request.cancelled

    # --- panels -----------------------------------------------------------------------

    def open_panel(
        self, panel_id: str, *, title: str = "", lines: Sequence[str] | str = (), footer: str = ""
    ) -> LivePanel:
        """Opens a panel now, from any handler (an interactive tool's, say),
        and returns it: await its keys with ``await panel.key()`` or ``async
        for key in panel`` (in an ``async def`` handler), redraw it with
        ``panel.render()``, close it with ``panel.close()`` (or use it as
        ``async with``). Opened from a request the host cancels, it is
        closed with it. Safe from any thread."""
        runtime = self._started("open_panel")
        panel = runtime.live_panel(panel_id)
        spec = results.panel_spec(results.Panel(panel_id, title, lines, footer))
        runtime.soon("open_panel", runtime.open_live, panel, spec, current.get())
        return panel

    def render_panel(
        self, panel_id: str, *, title: str = "", lines: Sequence[str] | str = (), footer: str = ""
    ) -> None:
        """Redraws an open panel whole (what is left out is blank; ``lines``
        may be one ``str``, split at its newlines); safe from any thread."""
        self._push(
            "render_panel", results.render_frame(results.Panel(panel_id, title, lines, footer))
        )

    def close_panel(self, panel_id: str) -> None:
        """Closes a panel; safe from any thread."""
        runtime = self._started("close_panel")
        runtime.soon("close_panel", runtime.close_panel, panel_id)

    # --- tool calls through the host -----------------------------------------------------

    async def call_tool(
        self, name: str, args: Mapping[str, Any] | msgspec.Struct | None = None
    ) -> results.CallResult:
        """Calls the tool ``name`` (another extension's, or one of the
        agent's) through the host, and returns its result: a tool that fails
        gives a result with ``is_error``, as it would give the model.

        In an ``async def`` handler (on the SDK's event loop). Made from a
        tool handler, the call says which call it serves (``parent_id``), so
        the host can tell the chain; cancelling the task that awaits it
        (``asyncio.timeout``, the host cancelling the handler) tells the
        host to stop it.

        Raises:
            CallToolError: the host does not offer ``call_tool`` (nothing is
                sent), or it has gone.
            TypeError: ``args`` is not a JSON object.
            RuntimeError: not on the SDK's event loop, or before ``run()``.
        """
        runtime = self._started("call_tool")
        if not runtime.on_loop():
            raise RuntimeError("call_tool() works in async def handlers, on the SDK's event loop")
        if self.host is None or CALL_TOOL not in self.host.capabilities:
            raise results.CallToolError(
                "the host does not offer call_tool (its hello_ack does not list it)"
            )
        if not isinstance(name, str) or not name:
            raise ValueError("call_tool() needs the name of a tool")
        value = {} if args is None else dict(args) if isinstance(args, Mapping) else args
        raw = msgspec.json.encode(value)
        if not raw.startswith(b"{"):
            raise TypeError(f"call_tool() takes the arguments as a JSON object, not {type(args)}")
        request = current.get()
        parent = request.id if request is not None and request.kind == "tool" else None
        return results.call_result(await runtime.calls.call(name, raw, parent))

    # --- helpers ------------------------------------------------------------------------

    def _push(self, what: str, frame: msgspec.Struct) -> None:
        runtime = self._started(what)
        runtime.soon(what, runtime.send, frame)

    def _started(self, what: str) -> Runtime:
        """The runtime, once ``run()`` has started it."""
        if self._runtime is None or self._runtime.loop is None:
            raise RuntimeError(f"{what}() works once run() has started")
        return self._runtime
