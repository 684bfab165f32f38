"""Lazy start and idle sleep (zotd/runtime/waking.py, dozing.py and the
supervisor's sleep loop), in a workspace of in-memory fake extensions, in
virtual time: ``MockClock(autojump_threshold=0)``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.conftest import add_extension
from tests.fakes import Behaviour, FakeIO, FakeSpawner
from zotd.model.config import Config
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep
from zotd.runtime.workspace import Context, Workspace

EXACT = 1e-9


def elapsed(since: float) -> Any:
    return pytest.approx(trio.current_time() - since, abs=EXACT)


def tool_server(
    name: str,
    seen: list[ep.HostFrame],
    *,
    delay: float = 0.0,
    tools: tuple[str, ...] = ("t",),
    intercept: tuple[str, ...] = (),
    events: tuple[str, ...] = (),
    commands: tuple[str, ...] = (),
    block: bool = False,
) -> Behaviour:
    """Says hello ``delay`` s after its start, registers ``tools`` (and
    intercepts), answers every call at once, and records what it is sent."""

    async def behaviour(io: FakeIO) -> None:
        await trio.sleep(delay)
        await io.hello(
            name,
            tools=list(tools),
            intercept=list(intercept),
            events=list(events),
            commands=list(commands),
        )
        async for frame in io.frames():
            seen.append(frame)
            if isinstance(frame, ep.ToolCall):
                text = [{"type": "text", "text": f"{frame.name} done"}]
                await io.send(type="tool_result", id=frame.id, content=text)
            elif isinstance(frame, ep.CommandInvoked):
                await io.send(type="command_response", id=frame.id, action="noop")
            elif isinstance(frame, ep.EventIntercept):
                await io.send(type="event_intercept_response", id=frame.id, block=block)
            elif isinstance(frame, ep.Shutdown):
                return

    return behaviour


@asynccontextmanager
async def workspace(
    paths: Paths, project: Path, behaviours: dict[str, Behaviour], config: Config | None = None
) -> AsyncIterator[tuple[Workspace, FakeSpawner]]:
    """A running workspace of ``behaviours`` (their manifests written before);
    stopped gracefully on the way out."""
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, behaviours)
        ctx = Context(config=config or Config(), paths=paths, explicit=[], spawner=spawner, env={})
        ws = Workspace(project, ctx)
        await nursery.start(ws.run)
        await ws.wait_settled()
        yield ws, spawner
        ws.stop_soon()


def lazy(paths: Paths, name: str, **manifest: Any) -> Path:
    return add_extension(paths.extensions_dir, name, manifest={"lazy": True, **manifest})


def cache_file(paths: Paths, name: str) -> Path:
    return paths.home / "cache" / "registrations" / f"{name}.json"


async def fill_cache(paths: Paths, project: Path, name: str, seen: list[ep.HostFrame]) -> None:
    """A first run with no cache: it starts at once, and its registrations are cached."""
    async with workspace(paths, project, {name: tool_server(name, seen)}) as (ws, spawner):
        assert [n for n, _ in spawner.spawns] == [name]
        assert ws.extensions[name].state == "ready"
        await trio.testing.wait_all_tasks_blocked()
    assert cache_file(paths, name).is_file()


def event(name: str) -> dict[str, Raw]:
    return {"event": Raw(f'"{name}"'.encode())}


def log_of(paths: Paths, name: str) -> str:
    return paths.extension_log(name).read_text()


def tool_names(ws: Workspace) -> list[str]:
    return [t.name for t in ws.list_tools().tools]


async def test_no_cache_starts_at_once_and_fills_it_privately(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    file = cache_file(paths, "lz")
    assert file.stat().st_mode & 0o777 == 0o600
    data = json.loads(file.read_text())
    assert [r["name"] for r in data["registrations"]] == ["t"]
    assert data["key"].startswith("sha256:")
    assert "no cache of its registrations yet; starting it now to fill it" in log_of(paths, "lz")


async def test_a_cached_lazy_extension_lists_its_tools_and_its_first_call_wakes_it(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    seen: list[ep.HostFrame] = []
    await fill_cache(paths, project, "lz", seen)
    async with workspace(paths, project, {"lz": tool_server("lz", seen, delay=2)}) as (ws, sp):
        ext = ws.extensions["lz"]
        assert sp.spawns == []  # nothing runs
        assert tool_names(ws) == ["t"]
        info = ws.info_of(ext)
        assert (info.state, info.pid, info.tools) == ("sleeping", None, ["t"])
        start = trio.current_time()
        data = await ws.call_tool("t", Raw(b"{}"), None)
        # It waited for the process: spawned now, ready 2 s later, answered then.
        assert elapsed(start) == 2
        assert [n for n, _ in sp.spawns] == ["lz"]
        assert data.content == [ep.TextBlock("t done")]
        assert ext.state == "ready"
        assert ext.restarts == 0
        assert "woke for tool t" in log_of(paths, "lz")


async def test_sleeping_and_disabled_extensions_cost_their_workspace_no_task(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    # A workspace opens with a listing, not a supervisor per extension: one
    # asleep on its cache gets its task when first wanted, one that runs
    # nothing never does.
    names = [f"lz{i}" for i in range(3)]
    for name in names:
        lazy(paths, name)
        await fill_cache(paths, project, name, [])
    add_extension(paths.extensions_dir, "off", manifest={"enabled": False})
    behaviours = {n: tool_server(n, []) for n in names}  # (each registers `t`: lz0 holds it)
    async with workspace(paths, project, behaviours) as (ws, sp):
        assert ws._nursery is not None
        alone = {t.name for t in ws._nursery.child_tasks}
        assert not any(name.startswith("extension ") for name in alone), alone
        assert [ws.extensions[n].state for n in [*names, "off"]] == [
            *["sleeping"] * 3,
            "disabled",
        ]
        assert await ws.call_tool("t", Raw(b"{}"), None)
        started = {t.name for t in ws._nursery.child_tasks} - alone
        assert started == {"extension lz0"}
        assert [n for n, _ in sp.spawns] == ["lz0"]


async def test_a_held_call_past_its_deadline_times_out_and_is_never_sent(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    seen: list[ep.HostFrame] = []
    async with workspace(paths, project, {"lz": tool_server("lz", seen, delay=5)}) as (ws, _):
        start = trio.current_time()
        with pytest.raises(RequestError) as err:
            await ws.call_tool("t", Raw(b"{}"), 2)
        assert err.value.code == "timeout"
        assert elapsed(start) == 2
        assert "did not answer within 2 s" in err.value.message
        with trio.fail_after(10):
            while ws.extensions["lz"].state != "ready":
                await trio.sleep(0.5)
        await trio.testing.wait_all_tasks_blocked()
        assert not [f for f in seen if isinstance(f, ep.ToolCall)]


async def test_a_call_withdrawn_while_it_wakes_is_never_sent(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    seen: list[ep.HostFrame] = []
    async with workspace(paths, project, {"lz": tool_server("lz", seen, delay=1)}) as (ws, sp):
        results: list[object] = []
        withdraw = ws.start_call("t", Raw(b"{}"), None, results.append)
        await trio.sleep(0.5)  # it is starting
        assert ws.extensions["lz"].state == "starting"
        withdraw()
        await trio.sleep(5)
        assert ws.extensions["lz"].state == "ready"  # the wake went on
        assert [n for n, _ in sp.spawns] == ["lz"]
        assert results == []
        assert not [f for f in seen if isinstance(f, ep.ToolCall)]
        # A call now goes straight through, under a fresh id.
        data = await ws.call_tool("t", Raw(b"{}"), None)
        assert data.content == [ep.TextBlock("t done")]


async def test_a_wake_that_fails_fails_the_held_calls_at_once(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])

    async def crashes(io: FakeIO) -> None:
        await trio.sleep(1)
        io.crash(3)

    async with workspace(paths, project, {"lz": crashes}) as (ws, _):
        start = trio.current_time()
        with pytest.raises(RequestError) as err:
            await ws.call_tool("t", Raw(b"{}"), None)
        assert elapsed(start) == 1  # not its 60 s deadline
        assert err.value.code == "extension_failed"
        assert "did not start" in err.value.message
        assert "exited with code 3" in err.value.message


async def test_idle_stop_puts_it_to_sleep_and_the_next_call_wakes_it(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "idler", manifest={"idle_stop": 30})  # not lazy
    seen: list[ep.HostFrame] = []
    async with workspace(paths, project, {"idler": tool_server("idler", seen)}) as (ws, sp):
        ext = ws.extensions["idler"]
        assert ext.state == "ready"
        await ws.call_tool("t", Raw(b"{}"), None)
        last = trio.current_time()
        with trio.fail_after(100):
            while ext.state != "sleeping":
                await trio.sleep(1)
        assert trio.current_time() - last == pytest.approx(30, abs=1)
        await trio.testing.wait_all_tasks_blocked()
        assert not ext.alive
        assert any(isinstance(f, ep.Shutdown) for f in seen)  # a graceful stop
        assert tool_names(ws) == ["t"]  # still listed
        info = ws.info_of(ext)
        assert (info.state, info.pid, info.restarts) == ("sleeping", None, 0)
        assert "sleeping after 30 s idle" in log_of(paths, "idler")
        data = await ws.call_tool("t", Raw(b"{}"), None)
        assert data.content == [ep.TextBlock("t done")]
        assert [n for n, _ in sp.spawns] == ["idler", "idler"]
        assert ws.extensions["idler"] is ext and ext.restarts == 0
        assert "woke for tool t" in log_of(paths, "idler")


async def test_idle_is_counted_from_the_end_of_the_last_call(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "slow", manifest={"idle_stop": 10})

    async def slow(io: FakeIO) -> None:
        await io.hello("slow", tools=["t"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                await trio.sleep(25)  # longer than idle_stop: still work
                await io.send(type="tool_result", id=frame.id, content=[])

    async with workspace(paths, project, {"slow": slow}) as (ws, _):
        ext = ws.extensions["slow"]
        await ws.call_tool("t", Raw(b"{}"), None)
        end = trio.current_time()
        assert ext.state == "ready"
        with trio.fail_after(100):
            while ext.state != "sleeping":
                await trio.sleep(0.25)
        assert trio.current_time() - end == pytest.approx(10, abs=0.25)


async def test_an_intercept_wakes_a_sleeping_guard_within_its_deadline(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "guard")
    seen: list[ep.HostFrame] = []
    first = {"guard": tool_server("guard", seen, intercept=("tool_call",), block=True)}
    async with workspace(paths, project, first):
        pass
    again = {"guard": tool_server("guard", seen, delay=1, intercept=("tool_call",), block=True)}
    async with workspace(paths, project, again) as (ws, _sp):
        assert ws.extensions["guard"].state == "sleeping"
        assert ws.extensions["guard"].intercepts == {"tool_call"}
        start = trio.current_time()
        verdict = await ws.intercept("tool_call", {})
        assert (verdict.block, verdict.extension) == (True, "guard")
        assert elapsed(start) == 1
        assert "woke for intercept tool_call" in log_of(paths, "guard")


async def test_an_intercept_never_waits_past_its_deadline_for_a_waking_guard(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "guard")
    seen: list[ep.HostFrame] = []
    first = {"guard": tool_server("guard", seen, intercept=("tool_call",), block=True)}
    async with workspace(paths, project, first):
        pass
    late = {"guard": tool_server("guard", seen, delay=8, intercept=("tool_call",), block=True)}
    async with workspace(paths, project, late) as (ws, _):
        start = trio.current_time()
        verdict = await ws.intercept("tool_call", {})
        assert not verdict.block  # silence is allow
        assert elapsed(start) == 5


async def test_an_event_it_subscribed_to_wakes_it_and_is_delivered(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "ear")
    seen: list[ep.HostFrame] = []
    async with workspace(paths, project, {"ear": tool_server("ear", seen, events=("turn_end",))}):
        pass
    async with workspace(
        paths, project, {"ear": tool_server("ear", seen, delay=1, events=("turn_end",))}
    ) as (ws, sp):
        assert ws.extensions["ear"].state == "sleeping"
        # Not one of its events: nothing is held, nothing wakes.
        assert ws.emit_event("turn_start", event("turn_start")).delivered == []
        assert sp.spawns == []
        assert ws.emit_event("turn_end", event("turn_end")).delivered == ["ear"]
        await trio.sleep(2)
        assert [n for n, _ in sp.spawns] == ["ear"]
        events = [f for f in seen if isinstance(f, ep.LifecycleEvent)]
        assert len(events) == 1
        assert "woke for event turn_end" in log_of(paths, "ear")


async def test_a_command_wakes_it_within_the_command_deadline(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "cmd")
    async with workspace(paths, project, {"cmd": tool_server("cmd", [], commands=("go",))}):
        pass
    async with workspace(
        paths, project, {"cmd": tool_server("cmd", [], delay=3, commands=("go",))}
    ) as (ws, _):
        assert [c.name for c in ws.list_commands().commands] == ["go"]
        start = trio.current_time()
        data = await ws.invoke_command("go", "")
        assert (data.extension, data.action) == ("cmd", "noop")
        assert elapsed(start) == 3
        assert "woke for command /go" in log_of(paths, "cmd")


async def test_what_is_held_while_it_wakes_is_bounded_in_bytes(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    config = Config(extension_queue_bytes=200)
    async with workspace(paths, project, {"lz": tool_server("lz", [], delay=1)}, config) as (ws, _):
        results: list[ap.CallData | RequestError] = []
        ws.start_call("t", Raw(b'{"n": 1}'), None, results.append)  # held: about 60 bytes
        with pytest.raises(RequestError) as err:
            ws.start_call("t", Raw(b'{"pad": "' + b"p" * 200 + b'"}'), None, results.append)
        assert err.value.code == "busy"
        assert "is starting and holds" in err.value.message
        await trio.sleep(2)
        assert len(results) == 1 and isinstance(results[0], ap.CallData)  # the first went


async def test_a_changed_manifest_invalidates_the_cache(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    directory = lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    manifest = json.loads((directory / "extension.json").read_text())
    manifest["args"].append("--changed")
    (directory / "extension.json").write_text(json.dumps(manifest))
    async with workspace(paths, project, {"lz": tool_server("lz", [])}) as (ws, sp):
        assert [n for n, _ in sp.spawns] == ["lz"]  # at once, eager
        assert ws.extensions["lz"].state == "ready"
    assert "changed since its registrations were cached" in log_of(paths, "lz")


async def test_a_changed_script_invalidates_the_cache(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path, tmp_path: Path
) -> None:
    script = tmp_path / "server.py"
    script.write_text("# one\n")
    lazy(paths, "lz", args=[str(script), "--name", "lz"])
    await fill_cache(paths, project, "lz", [])
    async with workspace(paths, project, {"lz": tool_server("lz", [])}) as (_, sp):
        assert sp.spawns == []  # unchanged: asleep
    script.write_text("# two\n")
    async with workspace(paths, project, {"lz": tool_server("lz", [])}) as (_ws, sp):
        assert [n for n, _ in sp.spawns] == ["lz"]


async def test_a_corrupt_cache_is_no_cache(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    cache_file(paths, "lz").write_text('{"version": 1, "name": "lz", "key": 3')
    async with workspace(paths, project, {"lz": tool_server("lz", [])}) as (ws, sp):
        assert [n for n, _ in sp.spawns] == ["lz"]
        assert tool_names(ws) == ["t"]
    assert "its registrations cache is unusable" in log_of(paths, "lz")
    # ... and it was written anew.
    assert json.loads(cache_file(paths, "lz").read_text())["name"] == "lz"


async def test_extensions_starting_together_each_get_their_own_cache(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    names = ["a1", "a2", "a3"]
    for name in names:
        lazy(paths, name)
    behaviours = {n: tool_server(n, [], tools=(f"{n}_tool",)) for n in names}
    async with workspace(paths, project, behaviours) as (_, sp):
        assert sorted(n for n, _ in sp.spawns) == names  # no cache yet: all at once
        await trio.testing.wait_all_tasks_blocked()
    cache_file(paths, "a2").write_text("not json")  # (read in the same worker thread)
    async with workspace(paths, project, behaviours) as (ws, sp):
        assert [n for n, _ in sp.spawns] == ["a2"]
        assert {n: ws.extensions[n].state for n in names} == {
            "a1": "sleeping",
            "a2": "ready",
            "a3": "sleeping",
        }
        assert tool_names(ws) == ["a1_tool", "a2_tool", "a3_tool"]


async def test_a_woken_process_that_registers_less_updates_the_listing(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    async with workspace(paths, project, {"lz": tool_server("lz", [], tools=("a", "b"))}):
        pass
    async with workspace(paths, project, {"lz": tool_server("lz", [], tools=("a",))}) as (ws, _):
        assert tool_names(ws) == ["a", "b"]
        await ws.call_tool("a", Raw(b"{}"), None)
        assert tool_names(ws) == ["a"]
        assert "no longer registers b" in log_of(paths, "lz")


async def test_disable_enable_and_remove_of_a_sleeping_one(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    directory = lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    manifest_file = directory / "extension.json"
    manifest = json.loads(manifest_file.read_text())
    async with workspace(paths, project, {"lz": tool_server("lz", [])}) as (ws, sp):
        assert ws.extensions["lz"].state == "sleeping"
        manifest_file.write_text(json.dumps({**manifest, "enabled": False}))
        await ws.refresh("lz")
        assert ws.extensions["lz"].state == "disabled"
        assert tool_names(ws) == []
        manifest_file.write_text(json.dumps(manifest))
        await ws.refresh("lz")  # enabled again: its cache still holds (`enabled` is not in its key)
        assert ws.extensions["lz"].state == "sleeping"
        assert tool_names(ws) == ["t"]
        assert sp.spawns == []
        manifest_file.unlink()
        directory.rmdir()
        assert await ws.refresh("lz") is None
        assert "lz" not in ws.extensions and tool_names(ws) == []


async def test_stop_reload_and_shutdown_of_a_sleeping_or_waking_one(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    async with workspace(paths, project, {"lz": tool_server("lz", [], delay=2)}) as (ws, sp):
        # A reload of a sleeping one: a new one, asleep again (its cache is valid).
        new = await ws.refresh("lz", reload=True)
        assert new is not None and new.state == "sleeping"
        assert sp.spawns == [] and tool_names(ws) == ["t"]
        # A stop of a sleeping one: exited, and its tools leave.
        await ws.stop_extension("lz")
        assert ws.extensions["lz"].state == "exited"
        assert tool_names(ws) == []
        # A shutdown while one wakes: the held call fails with the stop's code.
        await ws.refresh("lz", reload=True)
        results: list[ap.CallData | RequestError] = []
        ws.start_call("t", Raw(b"{}"), None, results.append)
        await trio.sleep(1)
        assert ws.extensions["lz"].state == "starting"
        await ws.stop_extensions(ap.ErrorCode.SHUTTING_DOWN)
        assert len(results) == 1 and isinstance(results[0], RequestError)
        assert results[0].code == "shutting_down"
        assert not ws.extensions["lz"].alive


async def test_an_mcp_server_that_cannot_be_spoken_to_fails_lazy_or_not(
    autojump_clock: trio.testing.MockClock,
    paths: Paths,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A broken install (the MCP client cannot be imported) fails the server,
    # with what to do, whether it starts with its workspace or on first use.
    import sys

    monkeypatch.setitem(sys.modules, "zotd.runtime.mcp_link", None)  # (import fails)
    add_extension(paths.extensions_dir, "eager", manifest={"kind": "mcp"})
    lazy(paths, "lz", kind="mcp")
    async with workspace(paths, project, {}) as (ws, sp):
        for name in ("eager", "lz"):
            ext = ws.extensions[name]
            assert ext.state == "failed", name
            assert "cannot speak MCP" in ext.last_error, name
            assert "not started: cannot speak MCP" in log_of(paths, name)
        assert sp.spawns == []


async def test_a_sleeping_extensions_state_for_running_is_made_when_first_used(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    # Asleep on its cache, an extension is listed with only what a listing
    # needs; the rest is made when first read, keeping what was set before.
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    async with workspace(paths, project, {"lz": tool_server("lz", [])}) as (ws, sp):
        ext = ws.extensions["lz"]
        assert tool_names(ws) == ["t"] and ext.state == "sleeping"
        assert "_calls" not in vars(ext) and "metrics" not in vars(ext)
        ext.workspaces = 3  # (as the shared pool sets it)
        ext.restart_reason = "crashed"  # (as a restart sets it)
        assert ext.late_replies == 0  # (read: the rest is made now)
        assert "_calls" in vars(ext)
        assert (ext.workspaces, ext.restart_reason) == (3, "crashed")
        with pytest.raises(AttributeError, match="no attribute 'no_such'"):
            ext.no_such  # type: ignore[attr-defined]  # noqa: B018
        # Made late, it still holds what it is asked while asleep, and wakes.
        data = await ws.call_tool("t", Raw(b"{}"), None)
        assert data.content == [ep.TextBlock("t done")]
        assert [n for n, _ in sp.spawns] == ["lz"]
