"""An MCP server's life as an extension, end to end: a crash fails the call
waiting for it at once with the server's stderr, and the restart policy
brings it back with its tools; ``zot ext disable/enable/reload`` on it; and
the same server over streamable HTTP (a ``url`` manifest)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon, pid_alive
from tests.e2e.frame_log import WAIT
from tests.mcp_servers import CRASH_LINE, KITCHEN, add_mcp_url
from tests.mcp_servers.agent import NAME, kitchen, raw, ready_tools, state_push, texts, wait_until
from zotd.client import Client, ZotdError, connect
from zotd.model.config import RestartPolicy
from zotd.model.paths import Paths
from zotd.protocol import agent as ap

#: Restarts on, quickly; and a tool deadline far past every wait here, so a
#: crashed call that is not failed at once trips the test's hang guard.
RESTARTING = msgspec.structs.replace(
    FAST, restart=RestartPolicy(policy="on-failure", backoff_initial=0.1), tool_timeout=600.0
)


async def info_of(zot: Client) -> ap.ExtensionInfo:
    return {e.name: e for e in await zot.list_extensions()}[NAME]


async def failure_of(zot: Client, tool: str) -> str:
    """What the agent is told of a call that fails (an error reply or an error result)."""
    try:
        result = await zot.call_tool(tool, {})
    except ZotdError as exc:
        return exc.message
    assert result.is_error, result
    return "\n".join(texts(result))


async def test_a_crash_fails_the_pending_calls_at_once_with_stderr_and_the_server_comes_back(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    events, _ = await kitchen(start_daemon, paths, project, config=RESTARTING)
    failures: dict[str, str] = {}

    async def fail(tool: str) -> None:
        failures[tool] = await failure_of(zot, tool)

    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        first = (await info_of(zot)).pid
        await zot.subscribe()
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fail, "slow")  # waiting for an answer when the server dies
                await wait_until(lambda: events.exists() and "started slow" in events.read_text())
                nursery.start_soon(fail, "crash")
        await state_push(zot, lambda f: f.state == "ready" and "echo" in {t.name for t in f.tools})
        info = await info_of(zot)
        with trio.fail_after(WAIT):
            back = await zot.call_tool("echo", {"text": "back again"})
            logged = (await zot.ext_logs(NAME)).lines
    assert CRASH_LINE in failures["slow"], failures
    assert CRASH_LINE in failures["crash"], failures
    assert any(CRASH_LINE in line for line in logged)
    assert info.restarts == 1
    assert info.pid is not None and info.pid != first
    assert first is not None and not pid_alive(first)
    assert texts(back) == ["back again"]


async def test_disable_enable_and_reload(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    _, directory = await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        first = (await info_of(zot)).pid
        assert first is not None
        with trio.fail_after(WAIT):
            await zot.ext_disable(NAME)
            disabled = await info_of(zot)
            assert "echo" not in {t.name for t in await zot.list_tools()}
            assert (disabled.enabled, disabled.pid) == (False, None)
            await wait_until(lambda: not pid_alive(first))

            await zot.ext_enable(NAME)
            tools = await ready_tools(zot)
            second = (await info_of(zot)).pid
            assert raw(tools["weather"].output_schema)["required"] == ["city", "celsius"]
            assert texts(await zot.call_tool("echo", {"text": "on"})) == ["on"]

            # A reload answers once the new process is ready, or its ready grace
            # passed (on a busy machine the server may still be starting then).
            reloaded = {e.name: e for e in await zot.ext_reload(NAME)}[NAME]
            assert reloaded.state in ("starting", "ready")
            assert reloaded.pid not in (None, first, second)
            while (await info_of(zot)).state != "ready":
                await trio.sleep(0.05)
            assert texts(await zot.call_tool("echo", {"text": "reloaded"})) == ["reloaded"]
    assert json.loads((directory / "extension.json").read_text())["enabled"] is True


@pytest.fixture
async def kitchen_url(short_tmp: Path) -> AsyncIterator[str]:
    """The kitchen server over streamable HTTP, in a subprocess: its endpoint's URL."""
    port_file = short_tmp / "kitchen.port"
    process = await trio.lowlevel.open_process(
        [sys.executable, str(KITCHEN), "--http", str(port_file)], start_new_session=True
    )
    try:
        await wait_until(port_file.exists)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        if process.returncode is None:
            os.kill(process.pid, signal.SIGTERM)
            with trio.move_on_after(WAIT) as waited:
                await process.wait()
            if waited.cancelled_caught:
                os.kill(process.pid, signal.SIGKILL)
                await process.wait()


# The mcp package's streamable-HTTP client (in the in-process daemon here)
# leaves its httpx2 response streams to the garbage collector, and trio warns
# for each async generator finalized that way: not zotd's to fix.
@pytest.mark.filterwarnings("ignore:Async generator:ResourceWarning")
async def test_a_streamable_http_server(
    start_daemon: StartDaemon, paths: Paths, project: Path, kitchen_url: str
) -> None:
    add_mcp_url(paths.extensions_dir, NAME, kitchen_url)
    await start_daemon()
    seen: list[ap.ToolProgressPush] = []
    async with connect(paths.socket, cwd=project) as zot:
        tools = await ready_tools(zot)
        info = await info_of(zot)
        with trio.fail_after(WAIT):
            echo = await zot.call_tool("echo", {"text": "over http"})
            weather = await zot.call_tool("weather", {"city": "Lima"})
            steps = await zot.call_tool("steps", {}, on_progress=seen.append)
            recipe = await zot.invoke_command("recipe", "dish=ceviche")
    assert info.state == "ready" and info.pid is None  # nothing of it runs under zotd
    assert raw(tools["echo"].annotations) == {"readOnlyHint": True, "openWorldHint": False}
    assert texts(echo) == ["over http"]
    assert raw(weather.structured_content) == {"city": "Lima", "celsius": 21.5}
    assert texts(steps) == ["done in 3 steps"]
    assert [p.message for p in seen] == ["step 1", "step 2", "step 3"]
    assert recipe.prompt == "Write a recipe for ceviche"
