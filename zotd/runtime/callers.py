"""Who a tool call is for, and the tool calls an extension is serving.

An agent's ``call_tool`` and an extension's own ``call_tool`` (current
zot's ext -> host call) run the same way; :class:`Caller` says which it is:
the agent connection at the root of it (its panels, its ``host_tool_call``
pushes), whether that agent can show UI (interactive tools), and, for an
extension's call, which extension made it and the chain of tools above it.

Each :class:`~.extension.Extension` keeps the calls it is serving
(:class:`Served`, by request id): a spontaneous ``open_panel`` goes to the
agent of one of them, a nested ``call_tool`` names one as its
``parent_id``, and what a served call started ends with it
(:meth:`Served.end`). A workspace's tool call is a :class:`ServedCall`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep
from .panels import Subscriber

if TYPE_CHECKING:
    from .extension import Extension

log = logging.getLogger(__name__)

#: The capability an agent's ``hello`` lists when it can show UI.
INTERACTIVE = "interactive"
#: The capability an agent's ``hello`` lists when it answers ``host_tool_call``.
HOST_TOOLS = "host_tools"


class Caller(msgspec.Struct, eq=False):
    """Who a tool call is for.

    Attributes:
        client: the agent connection at the root of the call (``None``: none,
            e.g. an extension's call made from a command).
        interactive: the agent can show UI (its ``hello`` listed ``interactive``),
            and the call is its own (not an extension's).
        origin: the extension whose ``call_tool`` this is ("" for an agent's).
        chain: the tools of the calls above this one, outermost first.
        request_id: the agent's ``call_tool`` request id at the root of the
            call, if there is one.
    """

    client: Subscriber | None = None
    interactive: bool = False
    origin: str = ""
    chain: tuple[str, ...] = ()
    request_id: str | int | None = None


class Served:
    """A tool call an extension is serving now: its tool and caller, and
    what is to end with it (nested calls it made).

    A plain class (compared by identity), not a Struct: :class:`ServedCall`
    adds slots and an ``__init__`` of its own, which a Struct may not.
    """

    __slots__ = ("caller", "on_end", "tool")

    def __init__(
        self, tool: str, caller: Caller, on_end: list[Callable[[], None]] | None = None
    ) -> None:
        self.tool = tool
        self.caller = caller
        self.on_end = [] if on_end is None else on_end

    def __repr__(self) -> str:
        return (
            f"{type(self).__qualname__}(tool={self.tool!r}, caller={self.caller!r}, "
            f"on_end={self.on_end!r})"
        )

    def end(self) -> None:
        """Ends what it started (each callback once); never raises."""
        callbacks, self.on_end = self.on_end, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one bad callback must not keep the others
                log.exception("ending a nested call failed")


class ServedCall(Served):
    """A tool call started by ``Workspace.start_call``, served by its
    extension (its entry in ``Extension.serving``): its frame, what the
    reply (or error) becomes for ``done``, its withdrawal. One object, not
    a closure each: this is the path of every call."""

    __slots__ = ("args", "done", "ext", "progress", "rid", "timeout")

    def __init__(
        self,
        ext: Extension,
        name: str,
        args: msgspec.Raw,
        timeout: float | None,
        done: Callable[[ap.CallData | RequestError], None],
        caller: Caller,
        progress: Callable[[str, ep.ToolProgress], None] | None,
    ) -> None:
        self.tool = name
        self.caller = caller
        self.on_end = []
        self.ext = ext
        self.args = args
        self.timeout = timeout
        self.done = done
        self.progress = progress
        self.rid = ""

    def frame(self, rid: str) -> bytes:
        """Its ``tool_call`` frame, under the request id ``rid``."""
        return ep.encode(ep.ToolCall(rid, self.tool, self.args))

    def on_progress(self, frame: ep.ToolProgress) -> None:
        """A ``tool_progress`` frame of the call, for whoever asked for them."""
        if self.progress is not None:
            self.progress(self.ext.name, frame)

    def on_reply(self, outcome: ep.ToolResult | RequestError) -> None:
        """The extension's reply (or the error): ``done`` gets the ``call_tool`` data."""
        # Served no more (once: whichever of this and `withdraw` comes first).
        if self.ext.serving.pop(self.rid, None) is not None and self.on_end:
            self.end()
        if not isinstance(outcome, RequestError):  # the `call_tool` reply for a `tool_result`
            o = outcome
            data = ap.CallData(self.ext.name, o.content, o.is_error, o.structured_content)
            if o.activate_tools:
                data.activate_tools = o.activate_tools
            self.done(data)
        elif outcome.code == ap.ErrorCode.TIMEOUT:
            msg = f"tool {self.tool!r} ({self.ext.name}) did not answer within {self.timeout:g} s"
            self.done(RequestError(ap.ErrorCode.TIMEOUT, msg))
        else:
            self.done(outcome)

    def withdraw(self) -> None:
        """The call is not wanted any more: its extension is told (see ``Extension.withdraw``)."""
        if self.ext.serving.pop(self.rid, None) is not None and self.on_end:
            self.end()
        self.ext.withdraw(self.rid)
