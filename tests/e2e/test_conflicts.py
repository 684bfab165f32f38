"""Conflicts you can see, rows in one order, and what runs where: shadowed
registrations in list_commands, list_tools and list_extensions; guards'
subscriptions; every listing sorted by name; status counting each
workspace's own extension processes (through a real daemon)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import trio

from tests.conftest import StartDaemon, add_extension, pid_alive
from zotd.client import Client, connect
from zotd.model.config import DEFAULT_RESERVED_COMMANDS
from zotd.model.manifest import Scope, load
from zotd.model.paths import Paths
from zotd.model.registry import Registry
from zotd.protocol.agent import ExtensionInfo, ExtensionStatePush, Shadowed, ShadowedInfo


async def infos(zot: Client) -> dict[str, ExtensionInfo]:
    return {i.name: i for i in await zot.list_extensions()}


async def test_shadowed_registrations_are_shown(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    add_extension(paths.extensions_dir, "one", "--commands", "dup,own", "--tools", "bash,shared")
    second = add_extension(
        short_tmp / "src", "two", "--commands", "dup,help", "--tools", "shared,mine"
    )
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.ext_install(str(second))  # after `one`: `one` holds what both want
        commands = await zot.request("list_commands")
        assert [(c["name"], c["extension"]) for c in commands["commands"]] == [
            ("dup", "one"),
            ("own", "one"),
        ]
        assert commands["shadowed"] == [
            {
                "name": "dup",
                "description": "the dup command",
                "extension": "two",
                "held_by": "one",
                "reason": "one registered it first",
            },
            {
                "name": "help",
                "description": "the help command",
                "extension": "two",
                "held_by": "zot",
                "reason": "zot's built-in command",
            },
        ]
        tools = await zot.list_tools_data()
        assert [(t.name, t.extension) for t in tools.tools] == [("mine", "two"), ("shared", "one")]
        assert tools.shadowed == [
            ShadowedInfo("bash", "the bash tool", "one", "zot", "zot's built-in tool"),
            ShadowedInfo("shared", "the shared tool", "two", "one", "one registered it first"),
        ]
        listed = await infos(zot)
        assert listed["one"].shadowed == [Shadowed("bash", "zot", "zot's built-in tool")]
        assert listed["two"].shadowed == [
            Shadowed("/dup", "one", "one registered it first"),
            Shadowed("/help", "zot", "zot's built-in command"),
            Shadowed("shared", "one", "one registered it first"),
        ]
        assert (listed["one"].commands, listed["one"].tools) == (["dup", "own"], ["shared"])
        assert (listed["two"].commands, listed["two"].tools) == ([], ["mine"])

        # The holder goes: the hidden one says how to take the name.
        await zot.ext_disable("one")
        assert (await infos(zot))["two"].shadowed[0] == Shadowed(
            "/dup",
            "one",
            "one registered it first; nobody holds it now: `zot ext reload two` would take it",
        )
        await zot.ext_reload("two")
        listed = await infos(zot)
        assert listed["two"].shadowed == [Shadowed("/help", "zot", "zot's built-in command")]
        assert (listed["two"].commands, listed["two"].tools) == (["dup"], ["mine", "shared"])
        assert (await zot.list_commands_data()).shadowed == [
            ShadowedInfo("help", "the help command", "two", "zot", "zot's built-in command")
        ]


async def test_without_conflicts_the_replies_are_as_before(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "solo", "--commands", "hi", "--tools", "t")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert list(await zot.request("list_commands")) == ["commands"]
        assert list(await zot.request("list_tools")) == ["tools"]
        assert (await infos(zot))["solo"].shadowed == []


async def test_rows_are_sorted_by_name_everywhere(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "zeta", "--commands", "zz,aa", "--tools", "tz,ta")
    add_extension(paths.extensions_dir, "alpha", "--commands", "mm", "--tools", "tm")
    add_extension(paths.extensions_dir, "mid", manifest={"enabled": False})
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert [c.name for c in await zot.list_commands()] == ["aa", "mm", "zz"]
        assert [t.name for t in await zot.list_tools()] == ["ta", "tm", "tz"]
        listed = await zot.list_extensions()
        assert [i.name for i in listed] == ["alpha", "mid", "zeta"]
        assert (listed[2].commands, listed[2].tools) == (["aa", "zz"], ["ta", "tz"])
        assert [i.name for i in await zot.ext_reload()] == ["alpha", "mid", "zeta"]
        await zot.subscribe()
        await zot.ext_reload("zeta")
        ready: ExtensionStatePush | None = None
        with trio.fail_after(10):
            async for frame in zot.notifications():
                if isinstance(frame, ExtensionStatePush) and frame.state == "ready":
                    ready = frame
                    break
        assert ready is not None
        assert [c.name for c in ready.commands] == ["aa", "zz"]
        assert [t.name for t in ready.tools] == ["ta", "tz"]


async def test_guards_show_what_they_watch_and_intercept(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(
        paths.extensions_dir,
        "guard",
        "--events",
        "session_start,tool_result",
        "--intercept",
        "tool_call",
    )
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        guard = (await infos(zot))["guard"]
    assert (guard.events, guard.intercepts) == (["session_start", "tool_result"], ["tool_call"])


async def test_uptime_and_warnings(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    directory = add_extension(paths.extensions_dir, "odd", manifest={"enabeld": True})
    add_extension(paths.extensions_dir, "off", manifest={"enabled": False})
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        listed = await infos(zot)
    assert listed["odd"].uptime_s is not None and listed["odd"].uptime_s >= 0
    assert listed["off"].uptime_s is None
    # As the manifest reader words them (an unknown key, here).
    assert listed["odd"].warnings == load(directory, Scope.GLOBAL).warnings
    assert listed["odd"].warnings and listed["off"].warnings == []


async def test_status_counts_each_workspaces_processes(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    add_extension(paths.extensions_dir, "g1")
    add_extension(paths.extensions_dir, "g2")
    other = short_tmp / "other"
    other.mkdir()
    await start_daemon()
    async with connect(paths.socket, cwd=project) as a, connect(paths.socket, cwd=other) as b:
        status = await a.status()
        assert [(w.path, w.extensions, w.ready, w.processes) for w in status.workspaces] == sorted(
            [(str(project), 2, 2, 2), (str(other), 2, 2, 2)]
        )
        # Each workspace runs its own copy of a global extension.
        pids = {i.pid for zot in (a, b) for i in await zot.list_extensions()}
        assert len(pids) == 4 and all(p is not None and pid_alive(p) for p in pids)
        await a.ext_disable("g1")  # a global change reaches both
        status = await b.status()
        assert [(w.extensions, w.ready, w.processes) for w in status.workspaces] == [
            (2, 1, 1),
            (2, 1, 1),
        ]


# --- unit: what the registry keeps ----------------------------------------------


def registry() -> Registry:
    return Registry(
        reserved_commands=[*DEFAULT_RESERVED_COMMANDS, "deploy"], builtin_tools=["bash"]
    )


def test_refused_registrations_are_kept_until_their_extension_leaves() -> None:
    reg = registry()
    assert reg.add_command("a", "hi", "a's") is None
    assert reg.add_command("b", "hi", "b's") is not None
    assert reg.add_command("b", "deploy", "") is not None
    assert reg.add_tool("b", "bash", "", msgspec.Raw(b"{}")) is not None
    assert reg.shadowed("command") == [
        ShadowedInfo("deploy", "", "b", "zot", "reserved (`reserved_commands` in zotd.toml)"),
        ShadowedInfo("hi", "b's", "b", "a", "a registered it first"),
    ]
    assert reg.shadowed_of("b") == [
        Shadowed("/deploy", "zot", "reserved (`reserved_commands` in zotd.toml)"),
        Shadowed("/hi", "a", "a registered it first"),
        Shadowed("bash", "zot", "zot's built-in tool"),
    ]
    reg.remove("a")
    assert reg.shadowed_of("b")[1].reason == (
        "a registered it first; nobody holds it now: `zot ext reload b` would take it"
    )
    assert reg.add_command("b", "hi", "b's") is None  # free now: it takes it
    assert [s.name for s in reg.shadowed_of("b")] == ["/deploy", "bash"]
    reg.remove("b")
    assert reg.shadowed("command") == [] and reg.shadowed("tool") == []


def test_the_latest_process_s_names_are_remembered() -> None:
    reg = registry()
    reg.add_tool("w", "old", "", msgspec.Raw(b"{}"))
    reg.remove("w")  # it stopped: the name is remembered
    assert (reg.holds("tool", "old"), reg.last_held_by("tool", "old")) == (None, ["w"])
    reg.begin("w")  # a new process: still remembered until it registers
    assert reg.last_held_by("tool", "old") == ["w"]
    reg.add_tool("w", "new", "", msgspec.Raw(b"{}"))
    assert (reg.last_held_by("tool", "old"), reg.last_held_by("tool", "new")) == ([], ["w"])
    assert reg.names("tool") == {"new"}
    reg.forget("w")  # removed from the workspace
    assert (reg.names("tool"), reg.held) == (set(), {})
