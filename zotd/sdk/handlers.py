"""What an extension registered, and the opening frames that announce it.

:class:`Handlers` holds the commands, tools, observers, guards and panel
handlers the decorators of :class:`~zotd.sdk.Extension` register; the runtime
(:mod:`zotd.sdk.runtime`) reads it to dispatch the host's frames, and
:meth:`Handlers.opening` gives the frames that go out first: ``hello``, the
registrations, ``subscribe`` and ``ready``. Plain data: no I/O, no event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..protocol import extension as ep
from .schema import Signature

_encoder = msgspec.json.Encoder()


@dataclass
class Command:
    """A slash command: ``/name``, its handler gets the text after it."""

    name: str
    description: str
    handler: Callable[..., Any]


@dataclass
class Tool:
    """A tool the model can call, with its schema and argument checks."""

    name: str
    description: str
    handler: Callable[..., Any]
    signature: Signature


@dataclass
class Guard:
    """The guard asked before an event goes ahead."""

    handler: Callable[..., Any]
    #: ``handler(tool_name, tool_args)`` (``intercept_tool_call``) rather
    #: than ``handler(event)``.
    spread: bool = False


#: The three panel events, by frame type: the key of their handler.
PANEL_EVENTS: dict[type[msgspec.Struct], str] = {
    ep.PanelKey: "key",
    ep.PanelResize: "resize",
    ep.PanelClose: "close",
}


@dataclass
class Handlers:
    """Everything an extension registered, by what it handles."""

    commands: dict[str, Command] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    #: Observers of each lifecycle event, in the order registered.
    observers: dict[str, list[Callable[..., Any]]] = field(default_factory=dict)
    #: One guard per interceptable event; the last registered wins.
    guards: dict[str, Guard] = field(default_factory=dict)
    #: ``key``, ``resize`` and ``close``: what handles a panel's events.
    panel: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def capabilities(self) -> list[str]:
        """What ``hello`` says the extension does (informational for the host)."""
        found = [
            kind
            for kind, present in (
                ("commands", self.commands),
                ("tools", self.tools),
                ("events", self.observers),
                ("intercept", self.guards),
                ("panels", self.commands or self.panel),  # a command may open one
                ("tool_progress", self.tools),
            )
            if present
        ]
        return [*found, "cancel"]

    def opening(self, name: str, version: str) -> list[msgspec.Struct]:
        """The frames sent before any other: ``hello``, the registrations,
        ``subscribe`` (if anything is observed or guarded) and ``ready``."""
        frames: list[msgspec.Struct] = [
            ep.Hello(name=name, version=version, capabilities=self.capabilities())
        ]
        frames += [
            ep.RegisterCommand(name=c.name, description=c.description)
            for c in self.commands.values()
        ]
        frames += [
            ep.RegisterTool(
                name=t.name,
                description=t.description,
                schema=msgspec.Raw(_encoder.encode(t.signature.schema)),
            )
            for t in self.tools.values()
        ]
        if self.observers or self.guards:
            frames.append(
                ep.Subscribe(events=sorted(self.observers), intercept=sorted(self.guards))
            )
        frames.append(ep.Ready())
        return frames
