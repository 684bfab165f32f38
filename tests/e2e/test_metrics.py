"""Metrics per extension, end to end: a real daemon, real extension processes
(tests/extensions/fake.py, the kitchen MCP server), an agent on the socket,
and ``zot ext list --json`` and ``zotd status --json`` as a user runs them.

Nothing here depends on the machine's speed: latencies and CPU are only
checked to be there, memory to be more than nothing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import StartDaemon, add_extension, pid_alive
from tests.e2e.frame_log import WAIT
from tests.mcp_servers.agent import NAME as KITCHEN
from tests.mcp_servers.agent import kitchen, ready_tools
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap

BIN = Path(sys.executable).parent
CALLS = 5


def env_of(paths: Paths) -> dict[str, str]:
    """What ``zot`` and ``zotd`` need to find this test's daemon."""
    return {
        **os.environ,
        "ZOT_HOME": str(paths.home),
        "ZOTD_SOCKET": str(paths.socket),
        "ZOTD_CONFIG": str(paths.config_file),
        "ZOTD_NO_AUTOSTART": "1",
    }


async def run_json(paths: Paths, project: Path, *argv: str) -> Any:
    """Runs a CLI (``zot ...`` or ``zotd ...``) and returns its stdout's JSON."""
    with trio.fail_after(WAIT):
        done = await trio.run_process(
            [str(BIN / argv[0]), *argv[1:]],
            env=env_of(paths),
            cwd=project,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def info_of(zot: Client, name: str) -> ap.ExtensionInfo:
    return {e.name: e for e in await zot.list_extensions()}[name]


async def ready(zot: Client, name: str) -> ap.ExtensionInfo:
    """``name``'s entry once it is ready (polled within WAIT)."""
    with trio.fail_after(WAIT):
        while (info := await info_of(zot, name)).state != "ready":
            await trio.sleep(0.05)
    return info


async def test_calls_errors_latency_and_the_process_are_shown(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "m", "--tools", "echo,fail,crash", "--commands", "oops")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        before = (await ready(zot, "m")).metrics
        assert (before.calls, before.p50_ms, before.p95_ms) == (0, None, None)
        with trio.fail_after(WAIT):
            for i in range(CALLS):
                await zot.call_tool("echo", {"n": i})
            assert (await zot.call_tool("fail", {})).is_error
            assert (await zot.invoke_command("oops")).error == "it broke"
        info = await info_of(zot, "m")
        m = info.metrics
        assert (m.calls, m.errors, m.timeouts, m.cancels) == (CALLS + 2, 2, 0, 0)
        assert m.p50_ms is not None and m.p95_ms is not None
        assert m.p50_ms <= m.p95_ms
        assert m.rss_bytes is not None and m.rss_bytes > 0
        assert m.cpu_s is not None and m.cpu_percent is not None
        assert m.intercepts == {}

        with pytest.raises(ZotdError) as err, trio.fail_after(WAIT):
            await zot.call_tool("crash", {})  # it exits: the call fails
        assert err.value.code == "extension_failed"
        assert info.pid is not None
        with trio.fail_after(WAIT):
            while pid_alive(info.pid):
                await trio.sleep(0.02)
        gone = await info_of(zot, "m")
    assert gone.state in ("exited", "failed")
    assert (gone.metrics.calls, gone.metrics.errors) == (CALLS + 3, 3)
    assert (gone.metrics.rss_bytes, gone.metrics.cpu_percent, gone.metrics.cpu_s) == (
        None,
        None,
        None,
    )


async def test_an_mcp_servers_calls_are_counted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            for i in range(CALLS):
                await zot.call_tool("echo", {"text": f"hi {i}"})
            await zot.invoke_command("greet", "Ada")
        info = await info_of(zot, KITCHEN)
    assert info.kind == "mcp"
    m = info.metrics
    assert (m.calls, m.errors, m.timeouts, m.cancels) == (CALLS + 1, 0, 0, 0)
    assert m.p50_ms is not None and m.p95_ms is not None
    assert m.rss_bytes is not None and m.rss_bytes > 0


async def test_zot_ext_list_json_and_zotd_status_json_carry_the_metrics(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "m", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await ready(zot, "m")
        with trio.fail_after(WAIT):
            for i in range(CALLS):
                await zot.call_tool("echo", {"n": i})
        listed = await run_json(paths, project, "zot", "ext", "list", "--json")
        status = await run_json(paths, project, "zotd", "status", "--json")
    (entry,) = [e for e in listed if e["name"] == "m"]
    assert entry["metrics"]["calls"] == CALLS
    assert entry["metrics"]["p50_ms"] is not None
    assert entry["metrics"]["rss_bytes"] > 0
    (ws,) = [w for w in status["workspaces"] if w["path"] == str(project)]
    assert ws["metrics"]["m"]["calls"] == CALLS
    assert ws["metrics"]["m"]["rss_bytes"] > 0
