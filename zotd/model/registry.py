"""A workspace's registry of slash commands and tools.

First come, first served (reference, "Registration"): a name already held by
a built-in or by an extension that registered it earlier stays with its
holder, and the later registration is refused with a reason that ends up in
the loser's log. The refused registrations are kept too (:class:`Shadow`),
so that ``list_commands``, ``list_tools`` and ``list_extensions`` can show
them.

Command names are matched case-insensitively, as current zot matches them
(its command index is keyed by the lower-case name): ``/TODO`` runs the
command registered as ``todo``, which keeps the spelling its extension
gave it (the ``command_invoked`` it is sent names it so), and two
registrations that differ only by case conflict like any others. Tool
names are exact.

Tools carry current zot's metadata (the ``register_tool`` frame, shown in
``list_tools``); as zot does, a tool with an unknown ``exposure`` is
skipped, and an unknown ``replay`` counts as ``never``.

The registry also remembers, per extension, the names its latest process
held (:meth:`Registry.begin` starts a new process's list, replaced at its
first registration), also once it has stopped: so that a call to one of
them can say that its extension is not running instead of that nobody
offers it (see :mod:`zotd.model.hints`).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ..protocol.agent import CommandInfo, Shadowed, ShadowedInfo, ToolInfo
from ..protocol.extension import EXPOSURES, REPLAYS, RegisterTool
from .args import ArgsSchema
from .config import DEFAULT_RESERVED_COMMANDS


def command_key(name: str) -> str:
    """What a command name is matched by: its lower case (current zot's rule)."""
    return name.lower()


class Command(msgspec.Struct):
    """A registered slash command; ``name`` as its extension spelled it."""

    name: str
    description: str
    extension: str


class Tool(msgspec.Struct):
    """A registered tool; ``schema`` is its JSON Schema, untouched;
    ``meta`` the ``register_tool`` frame (current zot's metadata)."""

    name: str
    description: str
    schema: msgspec.Raw
    extension: str
    meta: RegisterTool | None = None
    _validator: ArgsSchema | None = None  # (compiled on first use; not in its repr)

    def __repr__(self) -> str:
        return (
            f"Tool(name={self.name!r}, description={self.description!r}, "
            f"schema={self.schema!r}, extension={self.extension!r}, meta={self.meta!r})"
        )

    @property
    def interactive(self) -> bool:
        """Whether it waits for the user (no reply deadline for an agent with UI)."""
        return self.meta is not None and self.meta.interactive

    def check_args(self, args: msgspec.Raw) -> str | None:
        """Why ``args`` (a JSON object) do not fit the schema, or ``None`` if they do.

        The schema is compiled on first use (only rewritten arguments are
        checked: zotd passes a model's arguments on untouched, as the
        reference says the extension validates them). Plain and possibly
        slow (see :mod:`zotd.model.args`): the runtime runs it bounded.
        """
        try:
            if self._validator is None:
                self._validator = ArgsSchema(msgspec.json.decode(self.schema))
            return self._validator.check(msgspec.json.decode(args))
        except (msgspec.DecodeError, RecursionError):
            return None  # JSON nested past what can be read: not ours to refuse


class Shadow(msgspec.Struct):
    """A registration refused because the name was taken: by ``held_by``
    (an extension, or ``zot`` for a built-in or reserved name)."""

    kind: str  # "command" or "tool"
    name: str
    description: str
    extension: str
    held_by: str
    reason: str


#: Who holds the names zot keeps for itself, in a :class:`Shadow`.
ZOT = "zot"

#: zot's built-in commands, by :func:`command_key`.
ZOT_COMMANDS = frozenset(command_key(n) for n in DEFAULT_RESERVED_COMMANDS)


class Registry:
    """Commands and tools by name, each owned by one extension."""

    def __init__(self, *, reserved_commands: Iterable[str], builtin_tools: Iterable[str]) -> None:
        #: Lower case: a command is reserved whatever its case.
        self.reserved_commands = frozenset(command_key(n) for n in reserved_commands)
        self.builtin_tools = frozenset(builtin_tools)
        #: By :func:`command_key`.
        self.commands: dict[str, Command] = {}
        self.tools: dict[str, Tool] = {}
        #: Refused registrations by (kind, name, extension), in arrival order.
        self.shadows: dict[tuple[str, str, str], Shadow] = {}
        #: Per extension, the (kind, name) pairs its latest process held.
        self.held: dict[str, set[tuple[str, str]]] = {}
        self._fresh: set[str] = set()

    def command(self, name: str) -> Command | None:
        """The command ``name`` matches, whatever its case."""
        return self.commands.get(command_key(name))

    def add_command(self, extension: str, name: str, description: str) -> str | None:
        """Registers a command. Returns ``None``, or why it was shadowed."""
        key = command_key(name)
        if key in self.reserved_commands:
            why = (
                "zot's built-in command"
                if key in ZOT_COMMANDS
                else "reserved (`reserved_commands` in zotd.toml)"
            )
            self._shadow("command", name, description, extension, ZOT, why)
            return f"command /{name} is shadowed by zot's built-in /{key}"
        held = self.commands.get(key)
        if held is not None and held.name != name:
            by = "it" if held.extension == extension else f"extension {held.extension!r}"
            why = f"{by} registered /{held.name} first (command names ignore case)"
            self._shadow("command", name, description, extension, held.extension, why)
            return f"command /{name} is shadowed by /{held.name}, which {why}"
        if held is not None and held.extension != extension:
            self._shadow("command", name, description, extension, held.extension, "")
            return f"command /{name} is shadowed by extension {held.extension!r}, which registered it first"
        self.commands[key] = Command(name, description, extension)
        self._hold(extension, "command", name)
        return None

    def add_tool(
        self,
        extension: str,
        name: str,
        description: str,
        schema: msgspec.Raw,
        meta: RegisterTool | None = None,
    ) -> str | None:
        """Registers a tool. Returns ``None``, or a note for the extension's
        log: why it was shadowed or skipped (an unknown ``exposure``), or
        that its unknown ``replay`` counts as ``never`` (it is registered)."""
        note = None
        if meta is not None and meta.exposure and meta.exposure not in EXPOSURES:
            known = ", ".join(sorted(EXPOSURES))
            return f"tool {name!r}: unknown exposure {meta.exposure!r} (not {known}): skipped"
        if meta is not None and meta.replay and meta.replay not in REPLAYS:
            note = f"tool {name!r}: unknown replay {meta.replay!r}, taken as 'never'"
            meta = msgspec.structs.replace(meta, replay="never")
        if name in self.builtin_tools:
            self._shadow("tool", name, description, extension, ZOT, "zot's built-in tool")
            return f"tool {name!r} is shadowed by zot's built-in tool {name!r}"
        held = self.tools.get(name)
        if held is not None and held.extension != extension:
            self._shadow("tool", name, description, extension, held.extension, "")
            return f"tool {name!r} is shadowed by extension {held.extension!r}, which registered it first"
        self.tools[name] = Tool(name, description, schema, extension, meta)
        self._hold(extension, "tool", name)
        return note

    def _shadow(
        self, kind: str, name: str, description: str, extension: str, held_by: str, why: str
    ) -> None:
        reason = why or f"{held_by} registered it first"
        self.shadows[(kind, name, extension)] = Shadow(
            kind, name, description, extension, held_by, reason
        )

    def _hold(self, extension: str, kind: str, name: str) -> None:
        self.shadows.pop((kind, name, extension), None)
        if extension in self._fresh or extension not in self.held:
            self._fresh.discard(extension)
            self.held[extension] = set()
        self.held[extension].add((kind, name))

    def remove(self, extension: str) -> bool:
        """Drops everything ``extension`` registered (the names it held are
        still remembered). Returns whether anything went."""
        before = len(self.commands) + len(self.tools)
        self.commands = {k: v for k, v in self.commands.items() if v.extension != extension}
        self.tools = {k: v for k, v in self.tools.items() if v.extension != extension}
        self.shadows = {k: v for k, v in self.shadows.items() if v.extension != extension}
        return before != len(self.commands) + len(self.tools)

    def begin(self, extension: str) -> None:
        """A new process of ``extension`` starts: its first registration
        replaces the names remembered from the one before."""
        self._fresh.add(extension)

    def forget(self, extension: str) -> None:
        """``extension`` is gone from the workspace: forget what it held."""
        self.remove(extension)
        self.held.pop(extension, None)
        self._fresh.discard(extension)

    def holds(self, kind: str, name: str) -> str | None:
        """The extension holding command or tool ``name`` now, if any."""
        entry = self.command(name) if kind == "command" else self.tools.get(name)
        return entry.extension if entry is not None else None

    def last_held_by(self, kind: str, name: str) -> list[str]:
        """The extensions whose latest process held ``name`` (a command in
        any case), by name."""
        if kind != "command":
            return sorted(e for e, held in self.held.items() if (kind, name) in held)
        key = command_key(name)
        return sorted(
            e
            for e, held in self.held.items()
            if any(k == kind and command_key(n) == key for k, n in held)
        )

    def names(self, kind: str) -> set[str]:
        """Every name of ``kind`` held now or remembered."""
        now = self.commands if kind == "command" else self.tools
        return set(now) | {n for held in self.held.values() for k, n in held if k == kind}

    def is_builtin(self, kind: str, name: str) -> bool:
        """Whether zot keeps ``name`` (a command in any case) for itself."""
        if kind == "command":
            return command_key(name) in self.reserved_commands
        return name in self.builtin_tools

    def commands_of(self, extension: str) -> list[CommandInfo]:
        """The commands ``extension`` holds, as wire Structs, by name."""
        return [c for c in self.command_infos() if c.extension == extension]

    def tools_of(self, extension: str) -> list[ToolInfo]:
        """The tools ``extension`` holds, as wire Structs, by name."""
        return [t for t in self.tool_infos() if t.extension == extension]

    def command_infos(self) -> list[CommandInfo]:
        """Every command, by name."""
        return [
            CommandInfo(c.name, c.description, c.extension)
            for _, c in sorted(self.commands.items())
        ]

    def tool_infos(self) -> list[ToolInfo]:
        """Every tool, by name."""
        return [_tool_info(t) for _, t in sorted(self.tools.items())]

    def shadowed(self, kind: str) -> list[ShadowedInfo]:
        """The refused registrations of ``kind``, by name, then extension."""
        return [
            ShadowedInfo(s.name, s.description, s.extension, s.held_by, self._reason(s))
            for s in sorted(self.shadows.values(), key=lambda s: (s.name, s.extension))
            if s.kind == kind
        ]

    def shadowed_of(self, extension: str) -> list[Shadowed]:
        """What ``extension`` registered and does not hold (``/cmd`` or ``tool``), by name."""
        return [
            Shadowed(f"/{s.name}" if s.kind == "command" else s.name, s.held_by, self._reason(s))
            for s in sorted(self.shadows.values(), key=lambda s: (s.kind, s.name))
            if s.extension == extension
        ]

    def _reason(self, shadow: Shadow) -> str:
        if shadow.held_by == ZOT or self.holds(shadow.kind, shadow.name) is not None:
            return shadow.reason
        return f"{shadow.reason}; nobody holds it now: `zot ext reload {shadow.extension}` would take it"


def _tool_info(tool: Tool) -> ToolInfo:
    """``tool`` as ``list_tools`` shows it, with the metadata it registered."""
    info = ToolInfo(tool.name, tool.description, tool.schema, tool.extension)
    meta = tool.meta
    if meta is None:
        return info
    info.output_schema = meta.output_schema
    info.namespace = meta.namespace
    info.namespace_description = meta.namespace_description
    info.namespace_instructions = meta.namespace_instructions
    info.exposure = meta.exposure
    info.deferred = meta.deferred
    info.interactive = meta.interactive
    info.replay = meta.replay
    info.title = meta.title
    info.annotations = meta.annotations
    return info
