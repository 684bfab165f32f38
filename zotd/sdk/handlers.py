"""What an extension registered, and the opening frames that announce it.

:class:`Handlers` holds the commands, tools, observers, guards and panel
handlers the decorators of :class:`~zotd.sdk.Extension` register; the runtime
(:mod:`zotd.sdk.runtime`) reads it to dispatch the host's frames, and
:meth:`Handlers.opening` gives the frames that go out first: ``hello``, the
registrations, ``subscribe`` and ``ready``. Plain data: no I/O, no event loop
(imported before the handshake: see :mod:`zotd.sdk.extension`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ..protocol.ext_base import CALL_TOOL, TOOL_CANCEL
from ..protocol.ext_frames import Hello, Ready, RegisterCommand, RegisterTool, Subscribe
from .schema import Signature

_encoder = msgspec.json.Encoder()


class Command(msgspec.Struct):
    """A slash command: ``/name``, its handler gets the text after it."""

    name: str
    description: str
    handler: Callable[..., Any]


class ToolMeta(msgspec.Struct, frozen=True):
    """A tool's metadata beyond its schema (current zot's ``register_tool``
    fields; see ``Extension.tool``). Empty strings are left to the host's
    defaults."""

    output_schema: dict[str, Any] | None = None
    namespace: str = ""
    namespace_description: str = ""
    namespace_instructions: str = ""
    exposure: str = ""
    deferred: bool = False
    interactive: bool = False
    replay: str = ""


class Tool(msgspec.Struct):
    """A tool the model can call, with its schema and argument checks."""

    name: str
    description: str
    handler: Callable[..., Any]
    signature: Signature
    meta: ToolMeta = msgspec.field(default_factory=ToolMeta)

    def registration(self) -> RegisterTool:
        """Its ``register_tool`` frame."""
        meta = self.meta
        frame = RegisterTool(
            name=self.name,
            description=self.description,
            schema=msgspec.Raw(_encoder.encode(self.signature.schema)),
            namespace=meta.namespace,
            namespace_description=meta.namespace_description,
            namespace_instructions=meta.namespace_instructions,
            exposure=meta.exposure,
            deferred=meta.deferred,
            interactive=meta.interactive,
            replay=meta.replay,
        )
        if meta.output_schema is not None:
            frame.output_schema = msgspec.Raw(_encoder.encode(meta.output_schema))
        return frame


class Guard(msgspec.Struct):
    """The guard asked before an event goes ahead."""

    handler: Callable[..., Any]
    #: ``handler(tool_name, tool_args)`` (``intercept_tool_call``) rather
    #: than ``handler(event)``.
    spread: bool = False


class Handlers(msgspec.Struct):
    """Everything an extension registered, by what it handles."""

    commands: dict[str, Command] = msgspec.field(default_factory=dict)
    tools: dict[str, Tool] = msgspec.field(default_factory=dict)
    #: Observers of each lifecycle event, in the order registered.
    observers: dict[str, list[Callable[..., Any]]] = msgspec.field(default_factory=dict)
    #: One guard per interceptable event; the last registered wins.
    guards: dict[str, Guard] = msgspec.field(default_factory=dict)
    #: ``key``, ``resize`` and ``close``: what handles a panel's events.
    panel: dict[str, Callable[..., Any]] = msgspec.field(default_factory=dict)

    def capabilities(self) -> list[str]:
        """What ``hello`` says the extension does: informational for the host,
        but for ``tool_cancel`` (send it ``tool_cancel`` rather than
        ``cancel`` for tool calls) and ``call_tool`` (it may call tools),
        which current zot's hosts act on, as its SDK always lists them."""
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
        return [*found, "cancel", TOOL_CANCEL, CALL_TOOL]

    def opening(self, name: str, version: str) -> list[msgspec.Struct]:
        """The frames sent before any other: ``hello``, the registrations,
        ``subscribe`` (if anything is observed or guarded) and ``ready``."""
        frames: list[msgspec.Struct] = [
            Hello(name=name, version=version, capabilities=self.capabilities())
        ]
        frames += [
            RegisterCommand(name=c.name, description=c.description) for c in self.commands.values()
        ]
        frames += [t.registration() for t in self.tools.values()]
        if self.observers or self.guards:
            frames.append(Subscribe(events=sorted(self.observers), intercept=sorted(self.guards)))
        frames.append(Ready())
        return frames
