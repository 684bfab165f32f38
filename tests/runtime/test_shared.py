"""Shared extensions in process, in virtual time: one fake process for every
workspace of a hub (see zotd.runtime.shared)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import trio
import trio.testing

from tests.conftest import add_extension
from tests.fakes import Behaviour, FakeIO, FakeSpawner
from zotd.model.config import Config, ExtensionSettings, RestartPolicy
from zotd.model.paths import Paths
from zotd.protocol import extension as ep
from zotd.runtime.hub import Hub
from zotd.runtime.workspace import Context, Workspace

CONFIG = Config(idle_timeout=5.0, restart=RestartPolicy(backoff_initial=1.0))


def recording(name: str, seen: list[ep.HostFrame]) -> Behaviour:
    """Registers ``echo`` and subscribes to ``turn_start``; records every frame."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, tools=["echo"], events=["turn_start"])
        async for frame in io.frames():
            seen.append(frame)
            if isinstance(frame, ep.ToolCall):
                text = [{"type": "text", "text": "ok"}]
                await io.send(type="tool_result", id=frame.id, content=text)
            elif isinstance(frame, ep.Shutdown):
                return

    return behaviour


async def open_hub(nursery: trio.Nursery, paths: Paths, spawner: FakeSpawner, **c: object) -> Hub:
    config = msgspec.structs.replace(CONFIG, **c)
    ctx = Context(config=config, paths=paths, explicit=[], spawner=spawner, env={})
    hub = Hub(ctx, cwd=paths.home)
    await nursery.start(hub.run)
    return hub


async def join(hub: Hub, root: Path) -> Workspace:
    root.mkdir(exist_ok=True)
    ws = hub.join_workspace(root, provider="p", model="m")
    await ws.started.wait()
    await ws.wait_settled()
    return ws


async def test_one_process_serves_every_workspace(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[ep.HostFrame] = []
    add_extension(paths.extensions_dir, "one", manifest={"scope": "shared"})
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"one": recording("one", seen)})
        hub = await open_hub(nursery, paths, spawner)
        a = await join(hub, short_tmp / "a")
        b = await join(hub, short_tmp / "b")
        assert [n for n, _ in spawner.spawns] == ["one"]
        assert a.extensions["one"] is b.extensions["one"]
        assert [t.name for t in b.registry.tool_infos()] == ["echo"]  # replayed
        assert b.list_extensions().extensions[0].workspaces == 2
        await a.call_tool("echo", msgspec.Raw(b"{}"), None)
        await b.call_tool("echo", msgspec.Raw(b"{}"), None)
        a.emit_event("turn_start", {"event": msgspec.Raw(b'"turn_start"')})
        b.emit_event("turn_start", {"event": msgspec.Raw(b'"turn_start"')})
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    calls = [f for f in seen if isinstance(f, ep.ToolCall)]
    assert len({f.id for f in calls}) == 2  # one pending table: distinct ids
    events = [f for f in seen if isinstance(f, ep.LifecycleEvent)]
    cwds = [json.loads(msgspec.json.encode(f))["cwd"] for f in events]
    assert cwds == [str(short_tmp / "a"), str(short_tmp / "b")]
    ack = next(f for f in seen if isinstance(f, ep.HelloAck))
    assert ack.cwd == str(paths.extensions_dir / "one")  # no single project


async def test_the_scope_setting_overrides_the_manifest(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    add_extension(paths.extensions_dir, "one")  # a zot extension: workspace by default
    seen: list[ep.HostFrame] = []
    settings = {"one": ExtensionSettings(scope="shared")}
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"one": recording("one", seen)})
        hub = await open_hub(nursery, paths, spawner, extensions=settings)
        a = await join(hub, short_tmp / "a")
        await join(hub, short_tmp / "b")
        assert len(spawner.spawns) == 1
        assert a.list_extensions().extensions[0].sharing == "shared"
        nursery.cancel_scope.cancel()


async def test_a_workspace_that_stops_detaches_and_the_last_stops_it(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[ep.HostFrame] = []
    add_extension(paths.extensions_dir, "one", manifest={"scope": "shared"})
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"one": recording("one", seen)})
        hub = await open_hub(nursery, paths, spawner)
        a = await join(hub, short_tmp / "a")
        b = await join(hub, short_tmp / "b")
        ext = a.extensions["one"]
        b.release()
        await trio.sleep(CONFIG.idle_timeout + 1)
        assert b.root not in hub.workspaces
        assert ext.workspaces == 1 and ext.state == "ready"
        (entry,) = hub.shared.entries.values()
        assert list(entry.attached) == [a]  # nothing of b's workspace is kept
        assert not any(isinstance(f, ep.Shutdown) for f in seen)
        a.release()
        await trio.sleep(CONFIG.idle_timeout + 1)
        assert not hub.workspaces and not hub.shared.entries
        assert ext.state == "exited"
        assert any(isinstance(f, ep.Shutdown) for f in seen)  # gracefully
        nursery.cancel_scope.cancel()


async def test_a_crash_is_restarted_once_for_every_workspace(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[ep.HostFrame] = []
    add_extension(paths.extensions_dir, "one", manifest={"scope": "shared"})
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"one": recording("one", seen)})
        hub = await open_hub(nursery, paths, spawner)
        a = await join(hub, short_tmp / "a")
        b = await join(hub, short_tmp / "b")
        spawner.processes["one"].exit(1)
        await trio.sleep(1.5)  # the backoff (1 s) and its ready_idle
        await b.wait_settled()
        assert len(spawner.spawns) == 2  # the policy counted once, not per workspace
        assert a.extensions["one"] is b.extensions["one"]
        assert a.extensions["one"].restarts == 1
        assert [t.name for t in a.registry.tool_infos()] == ["echo"]
        assert [t.name for t in b.registry.tool_infos()] == ["echo"]
        nursery.cancel_scope.cancel()


async def test_a_workspace_extension_still_runs_per_workspace(
    paths: Paths, short_tmp: Path
) -> None:
    seen: list[ep.HostFrame] = []
    add_extension(paths.extensions_dir, "own")
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"own": recording("own", seen)})
        hub = await open_hub(nursery, paths, spawner)
        a = await join(hub, short_tmp / "a")
        b = await join(hub, short_tmp / "b")
        assert len(spawner.spawns) == 2
        assert a.extensions["own"] is not b.extensions["own"]
        ack = next(f for f in seen if isinstance(f, ep.HelloAck))
        assert ack.cwd == str(short_tmp / "a")
        nursery.cancel_scope.cancel()
