"""Development mode in process (zotd.runtime.dev), in virtual time: fake
extension processes, real discovery, and a fed stream of changes in place
of the file watcher. ``zotd --watch`` restarts only the extension whose
files changed, in every workspace; ``ext_dev`` runs a directory for one
workspace while its client is connected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from tests.conftest import add_extension
from tests.fakes import Behaviour, FakeIO, FakeSpawner
from zotd.model.config import Config, RestartPolicy
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep
from zotd.runtime import dev
from zotd.runtime.hub import Hub
from zotd.runtime.watch import QUIET, Changes
from zotd.runtime.workspace import Context, Workspace

CONFIG = Config(idle_timeout=60.0, restart=RestartPolicy(policy="never"))


def registering(name: str, tools: dict[str, list[str]]) -> Behaviour:
    """Registers the tools ``tools[name]`` holds when it starts (a test
    "edits" the extension by changing them), then serves until shutdown."""

    async def behaviour(io: FakeIO) -> None:
        if tools[name] == ["crash"]:
            io.crash(3)
            return
        await io.hello(name, tools=list(tools[name]))
        async for frame in io.frames():
            if isinstance(frame, ep.Shutdown):
                return

    return behaviour


class Feeds:
    """Fake feeds: each watched directory's :class:`Changes`, to add to by hand."""

    def __init__(self) -> None:
        self.changes: dict[Path, Changes] = {}
        self.watching = trio.Event()

    async def __call__(self, directory: Path, changes: Changes, ready: Callable[[], None]) -> None:
        self.changes[directory] = changes
        self.watching.set()
        ready()
        await trio.sleep_forever()


class Client:
    """A connection for ``ext_dev``: the pushes it got, and its end."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.pushes: list[ap.ExtDevPush] = []

    def deliver(self, frame: bytes) -> None:
        push = msgspec.json.decode(frame, type=ap.Push)
        assert isinstance(push, ap.ExtDevPush)
        self.pushes.append(push)


async def open_hub(
    nursery: trio.Nursery, paths: Paths, spawner: FakeSpawner, explicit: list[Path]
) -> Hub:
    ctx = Context(config=CONFIG, paths=paths, explicit=explicit, spawner=spawner, env={})
    hub = Hub(ctx, cwd=paths.home)
    await nursery.start(hub.run)
    return hub


async def join(hub: Hub, root: Path) -> Workspace:
    root.mkdir(exist_ok=True)
    ws = hub.join_workspace(root, provider="p", model="m")
    await ws.started.wait()
    await ws.wait_settled()
    return ws


def tools_of(ws: Workspace) -> dict[str, str]:
    return {t.name: t.extension for t in ws.registry.tool_infos()}


async def test_watch_restarts_the_changed_extension_alone_in_every_workspace(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    a = add_extension(short_tmp / "src", "a")
    b = add_extension(short_tmp / "src", "b")
    tools = {"a": ["old"], "b": ["other"]}
    said: list[str] = []
    feeds = Feeds()
    async with trio.open_nursery() as nursery:
        behaviours = {n: registering(n, tools) for n in tools}
        spawner = FakeSpawner(nursery, behaviours)
        hub = await open_hub(nursery, paths, spawner, [a, b])
        nursery.start_soon(
            lambda: dev.watch_explicit(hub, dirs=[a, b], say=said.append, feed=feeds)
        )
        one = await join(hub, short_tmp / "one")
        two = await join(hub, short_tmp / "two")
        b_processes = [two.extensions["b"].pid, one.extensions["b"].pid]
        while len(feeds.changes) < 2:
            await trio.sleep(0.01)
        tools["a"] = ["new"]
        feeds.changes[a].add(["main.py"])
        while len(said) < 3:
            await trio.sleep(0.1)
        for ws in (one, two):
            assert tools_of(ws) == {"new": "a", "other": "b"}
            assert ws.extensions["a"].restarts == 1
        assert [two.extensions["b"].pid, one.extensions["b"].pid] == b_processes
        assert [n for n, _ in spawner.spawns].count("b") == 2  # never restarted
        nursery.cancel_scope.cancel()
    assert sorted(said[:2]) == [f"a: watching {a} for changes", f"b: watching {b} for changes"]
    assert said[2:] == ["a: files changed (main.py); restarted: tools new (in 2 workspaces)"]


async def test_watch_says_why_a_restart_failed_and_that_none_runs_it_yet(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    a = add_extension(short_tmp / "src", "a")
    tools = {"a": ["old"]}
    said: list[str] = []
    feeds = Feeds()
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"a": registering("a", tools)})
        hub = await open_hub(nursery, paths, spawner, [a])
        nursery.start_soon(lambda: dev.watch_explicit(hub, dirs=[a], say=said.append, feed=feeds))
        await feeds.watching.wait()
        feeds.changes[a].add(["main.py"])  # no agent yet, so no workspace
        await trio.sleep(QUIET + 1)
        assert said[-1] == (
            "a: files changed (main.py); no workspace runs it yet (it starts with the first agent)"
        )
        ws = await join(hub, short_tmp / "one")
        tools["a"] = ["crash"]
        feeds.changes[a].add(["main.py", "util.py"])
        await trio.sleep(QUIET + 5)
        assert said[-1].startswith("a: files changed (main.py, util.py); failed to start: ")
        assert "exited with code 3" in said[-1]
        tools["a"] = ["fixed"]
        feeds.changes[a].add(["main.py"])
        await trio.sleep(QUIET + 5)
        assert said[-1] == "a: files changed (main.py); restarted: tools fixed"
        assert tools_of(ws) == {"fixed": "a"}
        nursery.cancel_scope.cancel()


async def test_dev_runs_a_directory_for_one_workspace_while_its_client_stays(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    add_extension(paths.extensions_dir, "wx")
    source = add_extension(short_tmp / "src", "wx")
    tools = {"wx": ["installed_tool"]}
    feeds = Feeds()
    client = Client()
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"wx": registering("wx", tools)})
        hub = await open_hub(nursery, paths, spawner, [])
        one = await join(hub, short_tmp / "one")
        two = await join(hub, short_tmp / "two")
        tools["wx"] = ["dev_tool"]
        change = await dev.start_dev(hub, one, client, str(source), feed=feeds)
        assert (change.name, change.dir, change.scope) == ("wx", str(source), "explicit")
        assert change.extension is not None and change.extension.tools == ["dev_tool"]
        hidden = [(p.scope, p.why) for p in change.extension.passed_over]
        assert hidden == [("global", "hidden")]  # the installed copy, until the client goes
        assert tools_of(one) == {"dev_tool": "wx"}
        assert one.extensions["wx"].found.dir == source
        assert two.extensions["wx"].found.dir == paths.extensions_dir / "wx"  # untouched

        await feeds.watching.wait()
        tools["wx"] = ["dev_tool_2"]
        feeds.changes[source].add(["main.py"])
        await trio.sleep(QUIET + 2)
        assert [p.message for p in client.pushes] == [
            f"wx: watching {source} for changes (Ctrl+C to stop)",
            "wx: files changed (main.py); restarted: tools dev_tool_2",
        ]
        assert tools_of(one) == {"dev_tool_2": "wx"}

        tools["wx"] = ["installed_tool"]
        client.done.set()  # the connection ended
        await trio.sleep(5)
        assert one.dev_dirs == ()
        assert one.extensions["wx"].found.dir == paths.extensions_dir / "wx"
        assert tools_of(one) == {"installed_tool": "wx"}
        nursery.cancel_scope.cancel()


async def test_dev_of_a_name_nothing_else_has_leaves_nothing_behind(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    source = add_extension(short_tmp / "src", "solo")
    tools = {"solo": ["t"]}
    client = Client()
    async with trio.open_nursery() as nursery:
        spawner = FakeSpawner(nursery, {"solo": registering("solo", tools)})
        hub = await open_hub(nursery, paths, spawner, [])
        ws = await join(hub, short_tmp / "one")
        await dev.start_dev(hub, ws, client, str(source), feed=Feeds())
        process = spawner.processes["solo"]
        client.done.set()
        await trio.sleep(5)
        assert "solo" not in ws.extensions and tools_of(ws) == {}
        assert process.code == 0  # it got its shutdown
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda d: "relative/dir", "`dir` must be an absolute path, not 'relative/dir'"),
        (lambda d: str(d / "missing"), "{d}/missing: no such directory"),
        (lambda d: str(d / "file"), "{d}/file: not a directory"),
        (lambda d: str(d / "empty"), "no extension.json in {d}/empty"),
        (lambda d: str(d / "broken"), "{d}/broken/extension.json: invalid JSON"),
    ],
    ids=["relative", "missing", "file", "no-manifest", "broken-manifest"],
)
async def test_dev_refuses_what_is_no_extension_directory(
    paths: Paths,
    short_tmp: Path,
    autojump_clock: trio.testing.MockClock,
    make: object,
    error: str,
) -> None:
    (short_tmp / "file").write_text("")
    (short_tmp / "empty").mkdir()
    (short_tmp / "broken").mkdir()
    (short_tmp / "broken" / "extension.json").write_text("{nope")
    assert callable(make)
    async with trio.open_nursery() as nursery:
        hub = await open_hub(nursery, paths, FakeSpawner(nursery, {}), [])
        ws = await join(hub, short_tmp / "one")
        with pytest.raises(RequestError) as refused:
            await dev.start_dev(hub, ws, Client(), make(short_tmp), feed=Feeds())
        assert refused.value.code == "bad_request"
        assert refused.value.message.startswith(error.format(d=short_tmp))
        assert ws.dev_dirs == () and ws.extensions == {}
        nursery.cancel_scope.cancel()


async def test_dev_refuses_a_second_session_of_the_same_directory_or_name(
    paths: Paths, short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    source = add_extension(short_tmp / "src", "wx")
    other = add_extension(short_tmp / "copy", "wx")
    tools = {"wx": ["t"]}
    async with trio.open_nursery() as nursery:
        hub = await open_hub(
            nursery, paths, FakeSpawner(nursery, {"wx": registering("wx", tools)}), []
        )
        ws = await join(hub, short_tmp / "one")
        await dev.start_dev(hub, ws, Client(), str(source), feed=Feeds())
        with pytest.raises(RequestError) as same_dir:
            await dev.start_dev(hub, ws, Client(), str(source), feed=Feeds())
        assert same_dir.value.message == f"another `zot ext dev` runs {source} here already"
        with pytest.raises(RequestError) as same_name:
            await dev.start_dev(hub, ws, Client(), str(other), feed=Feeds())
        assert same_name.value.message == (
            f"another `zot ext dev` runs 'wx' here already, from {source}"
        )
        assert ws.dev_dirs == (source,)
        nursery.cancel_scope.cancel()
