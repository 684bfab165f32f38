"""A workspace's registry of slash commands and tools.

First come, first served (reference, "Registration"): a name already held by
a built-in or by an extension that registered it earlier stays with its
holder, and the later registration is refused with a reason that ends up in
the loser's log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from .protocol.agent import CommandInfo, ToolInfo
from .protocol.jsonschema import Validator


@dataclass(slots=True)
class Command:
    """A registered slash command."""

    name: str
    description: str
    extension: str


@dataclass(slots=True)
class Tool:
    """A registered tool; ``schema`` is its JSON Schema, untouched."""

    name: str
    description: str
    schema: msgspec.Raw
    extension: str
    _validator: Validator | None = field(default=None, repr=False)

    def check_args(self, args: msgspec.Raw) -> str | None:
        """Why ``args`` (a JSON object) do not fit the schema, or ``None`` if they do.

        The schema is compiled on first use (only rewritten arguments are
        checked: zotd passes a model's arguments on untouched, as the
        reference says the extension validates them).
        """
        try:
            if self._validator is None:
                self._validator = Validator(msgspec.json.decode(self.schema))
            return self._validator.check(msgspec.json.decode(args))
        except (msgspec.DecodeError, RecursionError):
            return None  # JSON nested past what can be read: not ours to refuse


class Registry:
    """Commands and tools by name, each owned by one extension."""

    def __init__(self, *, reserved_commands: Iterable[str], builtin_tools: Iterable[str]) -> None:
        self.reserved_commands = frozenset(reserved_commands)
        self.builtin_tools = frozenset(builtin_tools)
        self.commands: dict[str, Command] = {}
        self.tools: dict[str, Tool] = {}

    def add_command(self, extension: str, name: str, description: str) -> str | None:
        """Registers a command. Returns ``None``, or why it was shadowed."""
        if name in self.reserved_commands:
            return f"command /{name} is shadowed by zot's built-in /{name}"
        held = self.commands.get(name)
        if held is not None and held.extension != extension:
            return f"command /{name} is shadowed by extension {held.extension!r}, which registered it first"
        self.commands[name] = Command(name, description, extension)
        return None

    def add_tool(
        self, extension: str, name: str, description: str, schema: msgspec.Raw
    ) -> str | None:
        """Registers a tool. Returns ``None``, or why it was shadowed."""
        if name in self.builtin_tools:
            return f"tool {name!r} is shadowed by zot's built-in tool {name!r}"
        held = self.tools.get(name)
        if held is not None and held.extension != extension:
            return f"tool {name!r} is shadowed by extension {held.extension!r}, which registered it first"
        self.tools[name] = Tool(name, description, schema, extension)
        return None

    def remove(self, extension: str) -> bool:
        """Drops everything ``extension`` registered. Returns whether anything went."""
        before = len(self.commands) + len(self.tools)
        self.commands = {k: v for k, v in self.commands.items() if v.extension != extension}
        self.tools = {k: v for k, v in self.tools.items() if v.extension != extension}
        return before != len(self.commands) + len(self.tools)

    def commands_of(self, extension: str) -> list[CommandInfo]:
        """The commands ``extension`` holds, as wire Structs."""
        return [
            CommandInfo(c.name, c.description, c.extension)
            for c in self.commands.values()
            if c.extension == extension
        ]

    def tools_of(self, extension: str) -> list[ToolInfo]:
        """The tools ``extension`` holds, as wire Structs."""
        return [
            ToolInfo(t.name, t.description, t.schema, t.extension)
            for t in self.tools.values()
            if t.extension == extension
        ]

    def command_infos(self) -> list[CommandInfo]:
        """Every command, in registration order."""
        return [CommandInfo(c.name, c.description, c.extension) for c in self.commands.values()]

    def tool_infos(self) -> list[ToolInfo]:
        """Every tool, in registration order."""
        return [ToolInfo(t.name, t.description, t.schema, t.extension) for t in self.tools.values()]
