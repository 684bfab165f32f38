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
(:meth:`Served.end`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .panels import Subscriber

log = logging.getLogger(__name__)

#: The capability an agent's ``hello`` lists when it can show UI.
INTERACTIVE = "interactive"
#: The capability an agent's ``hello`` lists when it answers ``host_tool_call``.
HOST_TOOLS = "host_tools"


@dataclass(slots=True, eq=False)
class Caller:
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


@dataclass(slots=True, eq=False)
class Served:
    """A tool call an extension is serving now: its tool and caller, and
    what is to end with it (nested calls it made)."""

    tool: str
    caller: Caller
    on_end: list[Callable[[], None]] = field(default_factory=list)

    def end(self) -> None:
        """Ends what it started (each callback once); never raises."""
        callbacks, self.on_end = self.on_end, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one bad callback must not keep the others
                log.exception("ending a nested call failed")
