"""A shared extension: one process for every workspace of the daemon."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon, add_extension, pid_alive
from zotd.cli.ext_view import scope
from zotd.client import Client, ZotdError, connect
from zotd.model.config import RestartPolicy
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionInfo
from zotd.protocol.extension import TextBlock

SHARED = {"scope": "shared"}

#: Workspaces without clients stop at once; crashes are restarted at once.
QUICK = msgspec.structs.replace(
    FAST, idle_timeout=0.0, restart=RestartPolicy(policy="on-failure", backoff_initial=0.0)
)


async def info(client: Client, name: str) -> ExtensionInfo:
    return next(e for e in await client.list_extensions() if e.name == name)


async def until(client: Client, name: str, want: object, limit: float = 30) -> ExtensionInfo:
    """Polls ``name``'s listing until ``want(info)`` holds (the daemon's own
    pace, bounded)."""
    with trio.fail_after(limit):
        while True:
            got = await info(client, name)
            if want(got):  # type: ignore[operator]
                return got
            await trio.sleep(0.05)


@pytest.fixture
def other(short_tmp: Path) -> Path:
    directory = short_tmp / "other"
    directory.mkdir()
    return directory


async def test_two_workspaces_share_one_process(
    start_daemon: StartDaemon, paths: Paths, project: Path, other: Path
) -> None:
    add_extension(paths.extensions_dir, "one", "--tools", "echo", manifest=SHARED)
    add_extension(paths.extensions_dir, "own", "--tools", "mine")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as a, connect(paths.socket, cwd=other) as b:
        result_a = await a.call_tool("echo", {"from": "a"})
        result_b = await b.call_tool("echo", {"from": "b"})
        assert result_a.content == [TextBlock('{"from": "a"}')]
        assert result_b.content == [TextBlock('{"from": "b"}')]
        one_a, one_b = await info(a, "one"), await info(b, "one")
        assert one_a.pid is not None and one_a.pid == one_b.pid
        assert (one_a.sharing, one_a.workspaces, one_b.workspaces) == ("shared", 2, 2)
        assert scope(one_a) == "global, shared by 2"  # zot ext list's SCOPE cell
        # A workspace extension still runs once per workspace.
        own_a, own_b = await info(a, "own"), await info(b, "own")
        assert own_a.pid != own_b.pid
        assert (own_a.sharing, own_a.workspaces) == ("workspace", 1)
        status = await a.status()
        assert sorted(ws.processes for ws in status.workspaces) == [1, 1]  # their own
        assert [(s.name, s.state, s.pid) for s in status.shared] == [("one", "ready", one_a.pid)]
        assert status.shared[0].workspaces == sorted([str(project), str(other)])
        assert status.processes == 3  # two of their own, one shared


async def test_the_last_workspace_to_leave_stops_it(
    start_daemon: StartDaemon, paths: Paths, project: Path, other: Path
) -> None:
    add_extension(paths.extensions_dir, "one", "--tools", "echo", manifest=SHARED)
    daemon = await start_daemon(QUICK)
    async with connect(paths.socket, cwd=project) as a:
        async with connect(paths.socket, cwd=other) as b:
            pid = (await info(b, "one")).pid
            assert (await info(a, "one")).workspaces == 2
        # b's workspace goes idle (idle_timeout) and detaches: a keeps the process.
        got = await until(a, "one", lambda i: i.workspaces == 1)
        assert got.pid == pid and got.state == "ready"
        assert [t.name for t in await a.list_tools()] == ["echo"]
        assert pid is not None and pid_alive(pid)
    with trio.fail_after(30):
        while daemon.hub.shared.entries or pid_alive(pid):
            await trio.sleep(0.05)


async def test_a_crash_restarts_it_once_for_every_workspace(
    start_daemon: StartDaemon, paths: Paths, project: Path, other: Path
) -> None:
    add_extension(paths.extensions_dir, "one", "--tools", "echo,crash", manifest=SHARED)
    await start_daemon(QUICK)
    async with connect(paths.socket, cwd=project) as a, connect(paths.socket, cwd=other) as b:
        before = (await info(a, "one")).pid
        with pytest.raises(ZotdError):
            await a.call_tool("crash", {})
        got_a = await until(a, "one", lambda i: i.state == "ready" and i.pid != before)
        got_b = await until(b, "one", lambda i: i.state == "ready")
        assert got_a.pid == got_b.pid
        assert (got_a.restarts, got_b.restarts) == (1, 1)  # the policy counted once
        assert got_b.workspaces == 2
        result = await b.call_tool("echo", {"again": True})
        assert result.content == [TextBlock('{"again": true}')]


async def test_reload_restarts_it_once(
    start_daemon: StartDaemon, paths: Paths, project: Path, other: Path
) -> None:
    add_extension(paths.extensions_dir, "one", "--tools", "echo", manifest=SHARED)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as a, connect(paths.socket, cwd=other) as b:
        before = (await info(a, "one")).pid
        await a.ext_reload("one")
        got_a, got_b = await info(a, "one"), await info(b, "one")
        assert got_a.pid == got_b.pid != before
        assert (got_a.restarts, got_a.workspaces) == (1, 2)
        log = paths.extension_log("one").read_text()
        assert log.count("started pid") == 2  # the first and the reload's, not one per workspace
        await a.ext_disable("one")
        assert await b.list_tools() == []
        assert (await info(b, "one")).state == "disabled"
