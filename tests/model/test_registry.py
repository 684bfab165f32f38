"""A workspace's registry of commands and tools (zotd/registry.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from zotd.model.config import BUILTIN_TOOLS, DEFAULT_RESERVED_COMMANDS
from zotd.model.registry import Command, Registry, Tool
from zotd.protocol.agent import CommandInfo, ToolInfo
from zotd.protocol.extension import RegisterTool

SCHEMA = msgspec.Raw(b'{"type":"object","properties":{"city":{"type":"string"}}}')


def registry() -> Registry:
    return Registry(reserved_commands=DEFAULT_RESERVED_COMMANDS, builtin_tools=BUILTIN_TOOLS)


def test_new_registry_is_empty() -> None:
    reg = registry()
    assert reg.commands == {}
    assert reg.tools == {}
    assert reg.command_infos() == []
    assert reg.tool_infos() == []


def test_reserved_and_builtin_names_are_frozen_sets() -> None:
    reg = Registry(reserved_commands=["help", "help"], builtin_tools=iter(["read"]))
    assert reg.reserved_commands == frozenset({"help"})
    assert reg.builtin_tools == frozenset({"read"})


# --- commands -----------------------------------------------------------------


def test_add_command() -> None:
    reg = registry()
    assert reg.add_command("weather", "weather", "current weather") is None
    assert reg.commands == {"weather": Command("weather", "current weather", "weather")}


def test_command_first_come_first_served() -> None:
    reg = registry()
    assert reg.add_command("first", "hi", "one") is None
    reason = reg.add_command("second", "hi", "two")
    assert reason == "command /hi is shadowed by extension 'first', which registered it first"
    assert reg.commands["hi"] == Command("hi", "one", "first")


def test_every_reserved_command_is_shadowed_by_zot() -> None:
    reg = registry()
    for name in DEFAULT_RESERVED_COMMANDS:
        reason = reg.add_command("ext", name, "mine")
        assert reason == f"command /{name} is shadowed by zot's built-in /{name}"
    assert reg.commands == {}


def test_reserved_commands_come_from_the_constructor() -> None:
    reg = Registry(reserved_commands=["weather"], builtin_tools=[])
    assert reg.add_command("e", "weather", "") == (
        "command /weather is shadowed by zot's built-in /weather"
    )
    assert reg.add_command("e", "help", "") is None


def test_reserved_command_names_ignore_case() -> None:
    reg = registry()
    assert reg.add_command("e", "Help", "") == "command /Help is shadowed by zot's built-in /help"
    assert reg.commands == {}
    assert reg.is_builtin("command", "HELP")
    (shadow,) = reg.shadowed("command")
    assert (shadow.name, shadow.held_by, shadow.reason) == ("Help", "zot", "zot's built-in command")


def test_configured_reserved_commands_ignore_case() -> None:
    reg = Registry(reserved_commands=["Deploy"], builtin_tools=[])
    assert reg.add_command("e", "deploy", "") == (
        "command /deploy is shadowed by zot's built-in /deploy"
    )
    (shadow,) = reg.shadowed("command")
    assert shadow.reason == "reserved (`reserved_commands` in zotd.toml)"


# --- command names ignore case (current zot) ----------------------------------


def test_a_command_is_found_whatever_its_case_and_keeps_its_spelling() -> None:
    reg = registry()
    assert reg.add_command("todo-panel", "ToDo", "a panel") is None
    for asked in ("todo", "TODO", "ToDo"):
        assert reg.command(asked) == Command("ToDo", "a panel", "todo-panel")
        assert reg.holds("command", asked) == "todo-panel"
    assert reg.command_infos() == [CommandInfo("ToDo", "a panel", "todo-panel")]
    assert reg.command("todos") is None


def test_commands_differing_only_by_case_conflict_first_wins() -> None:
    reg = registry()
    assert reg.add_command("a", "todo", "one") is None
    reason = reg.add_command("b", "TODO", "two")
    assert reason == (
        "command /TODO is shadowed by /todo, which extension 'a' registered "
        "/todo first (command names ignore case)"
    )
    assert reg.command("Todo") == Command("todo", "one", "a")
    (shadow,) = reg.shadowed("command")
    assert (shadow.name, shadow.extension, shadow.held_by) == ("TODO", "b", "a")
    assert shadow.reason == "extension 'a' registered /todo first (command names ignore case)"
    assert reg.shadowed_of("b")[0].name == "/TODO"


def test_one_extension_registering_two_cases_keeps_the_first() -> None:
    reg = registry()
    assert reg.add_command("e", "todo", "one") is None
    assert reg.add_command("e", "Todo", "two") == (
        "command /Todo is shadowed by /todo, which it registered /todo first "
        "(command names ignore case)"
    )
    assert reg.command_infos() == [CommandInfo("todo", "one", "e")]


def test_the_loser_of_a_case_conflict_takes_the_name_once_free() -> None:
    reg = registry()
    reg.add_command("a", "todo", "")
    reg.add_command("b", "TODO", "")
    reg.remove("a")
    assert "nobody holds it now" in reg.shadowed("command")[0].reason
    assert reg.add_command("b", "TODO", "") is None
    assert reg.shadowed("command") == []
    assert reg.command("todo") == Command("TODO", "", "b")


def test_remembered_commands_are_found_whatever_their_case() -> None:
    reg = registry()
    reg.add_command("e", "Todo", "")
    reg.remove("e")
    assert reg.last_held_by("command", "TODO") == ["e"]
    assert reg.last_held_by("command", "todos") == []
    assert reg.names("command") == {"Todo"}


def test_tool_names_stay_exact() -> None:
    reg = registry()
    assert reg.add_tool("a", "weather", "", SCHEMA) is None
    assert reg.add_tool("b", "Weather", "", SCHEMA) is None
    assert reg.holds("tool", "WEATHER") is None
    assert reg.last_held_by("tool", "Weather") == ["b"]
    assert not reg.is_builtin("tool", "Read")


def test_same_extension_re_registering_a_command_updates_it() -> None:
    reg = registry()
    reg.add_command("e", "hi", "old")
    assert reg.add_command("e", "hi", "new") is None
    assert reg.commands["hi"] == Command("hi", "new", "e")
    assert len(reg.commands) == 1


def test_re_registering_keeps_the_registration_order() -> None:
    reg = registry()
    reg.add_command("e", "a", "")
    reg.add_command("e", "b", "")
    reg.add_command("e", "a", "updated")
    assert [c.name for c in reg.command_infos()] == ["a", "b"]


# --- tools --------------------------------------------------------------------


def test_add_tool() -> None:
    reg = registry()
    assert reg.add_tool("weather", "weather", "Get the weather.", SCHEMA) is None
    assert reg.tools == {"weather": Tool("weather", "Get the weather.", SCHEMA, "weather")}


def test_tool_schema_is_kept_untouched() -> None:
    reg = registry()
    raw = msgspec.Raw(b'{ "type" : "object" }')
    reg.add_tool("e", "t", "", raw)
    assert bytes(reg.tools["t"].schema) == b'{ "type" : "object" }'


def test_tool_first_come_first_served() -> None:
    reg = registry()
    assert reg.add_tool("first", "weather", "one", SCHEMA) is None
    reason = reg.add_tool("second", "weather", "two", SCHEMA)
    assert reason == "tool 'weather' is shadowed by extension 'first', which registered it first"
    assert reg.tools["weather"].extension == "first"
    assert reg.tools["weather"].description == "one"


def test_every_builtin_tool_is_shadowed_by_zot() -> None:
    reg = registry()
    for name in ("read", "write", "edit", "bash", "skill"):
        reason = reg.add_tool("ext", name, "mine", SCHEMA)
        assert reason == f"tool {name!r} is shadowed by zot's built-in tool {name!r}"
    assert reg.tools == {}


def test_same_extension_re_registering_a_tool_updates_it() -> None:
    reg = registry()
    reg.add_tool("e", "t", "old", msgspec.Raw(b"{}"))
    assert reg.add_tool("e", "t", "new", SCHEMA) is None
    assert reg.tools["t"] == Tool("t", "new", SCHEMA, "e")
    assert len(reg.tools) == 1


# --- tool metadata (current zot) ----------------------------------------------


def meta(**fields: Any) -> RegisterTool:
    return RegisterTool(name="t", **fields)


def test_tool_metadata_is_kept_and_listed() -> None:
    reg = registry()
    frame = meta(
        output_schema=msgspec.Raw(b'{"type":"object"}'),
        namespace="todos",
        namespace_description="the todo list",
        namespace_instructions="list before you add",
        exposure="codemode",
        deferred=True,
        interactive=True,
        replay="idempotent",
    )
    assert reg.add_tool("e", "t", "d", SCHEMA, frame) is None
    assert reg.tools["t"].meta == frame
    assert reg.tools["t"].interactive
    (info,) = reg.tool_infos()
    assert msgspec.json.decode(msgspec.json.encode(info)) == {
        "name": "t",
        "description": "d",
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "extension": "e",
        "output_schema": {"type": "object"},
        "namespace": "todos",
        "namespace_description": "the todo list",
        "namespace_instructions": "list before you add",
        "exposure": "codemode",
        "deferred": True,
        "interactive": True,
        "replay": "idempotent",
    }


def test_a_tool_without_metadata_lists_none() -> None:
    reg = registry()
    reg.add_tool("e", "t", "d", SCHEMA, meta())
    encoded = msgspec.json.decode(msgspec.json.encode(reg.tool_infos()))
    assert encoded == [{"name": "t", "description": "d", "schema": msgspec.json.decode(SCHEMA),
                        "extension": "e"}]  # fmt: skip


@pytest.mark.parametrize("exposure", ["direct", "codemode", "deferred", "model-only"])
def test_every_known_exposure_is_accepted(exposure: str) -> None:
    reg = registry()
    assert reg.add_tool("e", "t", "", SCHEMA, meta(exposure=exposure)) is None
    assert reg.tool_infos()[0].exposure == exposure


def test_a_tool_with_an_unknown_exposure_is_skipped() -> None:
    reg = registry()
    note = reg.add_tool("e", "t", "", SCHEMA, meta(exposure="eager"))
    assert note is not None
    assert "unknown exposure 'eager'" in note
    assert note.endswith("skipped")
    assert reg.tools == {}
    assert reg.shadowed("tool") == []
    assert reg.held == {}


@pytest.mark.parametrize("replay", ["never", "safe", "idempotent", "reconcile"])
def test_every_known_replay_is_kept(replay: str) -> None:
    reg = registry()
    assert reg.add_tool("e", "t", "", SCHEMA, meta(replay=replay)) is None
    assert reg.tool_infos()[0].replay == replay


def test_an_unknown_replay_is_taken_as_never() -> None:
    reg = registry()
    note = reg.add_tool("e", "t", "", SCHEMA, meta(replay="always", deferred=True))
    assert note == "tool 't': unknown replay 'always', taken as 'never'"
    (info,) = reg.tool_infos()
    assert (info.replay, info.deferred) == ("never", True)


def test_commands_and_tools_are_separate_namespaces() -> None:
    reg = registry()
    assert reg.add_command("a", "weather", "") is None
    assert reg.add_tool("b", "weather", "", SCHEMA) is None
    # "bash" is a built-in tool, not a reserved command.
    assert reg.add_command("a", "bash", "") is None
    # "help" is a reserved command, not a built-in tool.
    assert reg.add_tool("a", "help", "", SCHEMA) is None


# --- remove -------------------------------------------------------------------


def populated() -> Registry:
    reg = registry()
    reg.add_command("a", "a1", "")
    reg.add_command("b", "b1", "")
    reg.add_command("a", "a2", "")
    reg.add_tool("a", "ta", "", SCHEMA)
    reg.add_tool("b", "tb", "", SCHEMA)
    return reg


def test_remove_drops_only_that_extensions_entries() -> None:
    reg = populated()
    assert reg.remove("a") is True
    assert list(reg.commands) == ["b1"]
    assert list(reg.tools) == ["tb"]


def test_remove_unknown_extension_returns_false() -> None:
    reg = populated()
    assert reg.remove("nobody") is False
    assert len(reg.commands) == 3
    assert len(reg.tools) == 2


def test_remove_twice_returns_false_the_second_time() -> None:
    reg = populated()
    assert reg.remove("b") is True
    assert reg.remove("b") is False


def test_remove_with_only_tools() -> None:
    reg = registry()
    reg.add_tool("t", "x", "", SCHEMA)
    assert reg.remove("t") is True
    assert reg.tools == {}


def test_remove_frees_the_names_for_others() -> None:
    reg = registry()
    reg.add_command("a", "hi", "")
    reg.add_tool("a", "weather", "", SCHEMA)
    reg.remove("a")
    assert reg.add_command("b", "hi", "") is None
    assert reg.add_tool("b", "weather", "", SCHEMA) is None
    assert reg.commands["hi"].extension == "b"
    assert reg.tools["weather"].extension == "b"


def test_shadowed_registration_is_not_removed_with_the_loser() -> None:
    reg = registry()
    reg.add_command("a", "hi", "")
    reg.add_command("b", "hi", "")  # shadowed
    assert reg.remove("b") is False
    assert reg.commands["hi"].extension == "a"


# --- infos --------------------------------------------------------------------


def test_commands_of() -> None:
    reg = populated()
    assert reg.commands_of("a") == [CommandInfo("a1", "", "a"), CommandInfo("a2", "", "a")]
    assert reg.commands_of("b") == [CommandInfo("b1", "", "b")]
    assert reg.commands_of("nobody") == []


def test_tools_of() -> None:
    reg = populated()
    assert reg.tools_of("a") == [ToolInfo("ta", "", SCHEMA, "a")]
    assert reg.tools_of("b") == [ToolInfo("tb", "", SCHEMA, "b")]
    assert reg.tools_of("nobody") == []


def test_command_infos_by_name() -> None:
    reg = registry()
    reg.add_command("w", "weather", "current weather")
    reg.add_command("c", "clock", "the time")
    assert reg.command_infos() == [
        CommandInfo(name="clock", description="the time", extension="c"),
        CommandInfo(name="weather", description="current weather", extension="w"),
    ]


def test_tool_infos_by_name() -> None:
    reg = registry()
    reg.add_tool("w", "weather", "Get the weather.", SCHEMA)
    reg.add_tool("c", "clock", "Tell the time.", msgspec.Raw(b"{}"))
    assert reg.tool_infos() == [
        ToolInfo("clock", "Tell the time.", msgspec.Raw(b"{}"), "c"),
        ToolInfo("weather", "Get the weather.", SCHEMA, "w"),
    ]


def test_tool_infos_encode_the_schema_verbatim() -> None:
    reg = registry()
    reg.add_tool("w", "weather", "d", SCHEMA)
    encoded = msgspec.json.encode(reg.tool_infos())
    assert encoded == (
        b'[{"name":"weather","description":"d","schema":' + bytes(SCHEMA) + b',"extension":"w"}]'
    )


def test_infos_are_snapshots() -> None:
    reg = registry()
    reg.add_command("a", "hi", "")
    infos = reg.command_infos()
    reg.remove("a")
    assert infos == [CommandInfo("hi", "", "a")]
    assert reg.command_infos() == []
