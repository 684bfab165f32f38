"""The MCP project's own test server, ``@modelcontextprotocol/server-everything``
(run with ``npx -y`` as an MCP host would), as a global ``kind: mcp``
extension of a real daemon: its tools with their annotations and output
schema, plain and structured results, an image, progress from its
long-running operation, a cancelled operation, its prompts as slash
commands; and its tools, structured output and prompts through ``zot mcp``.
Skipped when ``npx`` is missing, or when the package cannot be fetched (no
network)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import trio
from mcp import types as mt

from tests.conftest import StartDaemon
from tests.e2e.frame_log import WAIT
from tests.e2e.test_mcp import mcp_session
from tests.mcp_servers import add_mcp_server
from tests.mcp_servers.agent import raw, texts
from zotd.client import Client, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol.extension import ImageBlock

PACKAGE = "@modelcontextprotocol/server-everything"
NAME = "everything"
#: The first ``npx -y`` downloads the package (and node starts slowly on a busy core).
FETCH_TIMEOUT = 600.0
#: Its start once fetched: npx still asks the registry whether a newer one exists.
START = 120.0


@pytest.fixture(scope="session")
def npx() -> str:
    """``npx``, once it has the package in its cache (so no call's deadline pays the download)."""
    found = shutil.which("npx")
    if found is None:
        pytest.skip(f"npx is not installed: {PACKAGE} (an npm package) cannot run")
    try:
        # With stdin at its end, the server starts and exits at once.
        done = subprocess.run(
            [found, "-y", PACKAGE, "stdio"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=FETCH_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npx -y {PACKAGE} did not finish within {FETCH_TIMEOUT:g} s")
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        pytest.skip(f"npx could not fetch {PACKAGE}: {' / '.join(tail)}")
    return found


async def everything(start_daemon: StartDaemon, paths: Paths, npx: str) -> None:
    add_mcp_server(
        paths.extensions_dir,
        NAME,
        manifest={"exec": "npx", "args": ["-y", PACKAGE, "stdio"]},
    )
    await start_daemon()


async def ready_tools(zot: Client) -> dict[str, ap.ToolInfo]:
    with trio.fail_after(START):
        while True:
            tools = {t.name: t for t in await zot.list_tools()}
            if "echo" in tools:
                return tools
            await trio.sleep(0.1)


async def test_tools_results_and_structured_output(
    start_daemon: StartDaemon, paths: Paths, project: Path, npx: str
) -> None:
    await everything(start_daemon, paths, npx)
    async with connect(paths.socket, cwd=project) as zot:
        tools = await ready_tools(zot)
        with trio.fail_after(WAIT):
            echo = await zot.call_tool("echo", {"message": "hello everything"})
            total = await zot.call_tool("get-sum", {"a": 2, "b": 40})
            weather = await zot.call_tool("get-structured-content", {"location": "Chicago"})
            image = await zot.call_tool("get-tiny-image", {})
    assert {"echo", "get-sum", "get-structured-content", "trigger-long-running-operation"} <= set(
        tools
    )
    assert {t.extension for t in tools.values()} == {NAME}
    assert raw(tools["echo"].schema)["required"] == ["message"]
    assert raw(tools["echo"].annotations)["readOnlyHint"] is True
    assert raw(tools["get-structured-content"].output_schema)["type"] == "object"
    assert texts(echo) == ["Echo: hello everything"]
    assert not echo.is_error
    assert "42" in " ".join(texts(total))
    structured = raw(weather.structured_content)
    assert isinstance(structured, dict) and structured  # the weather in Chicago, as an object
    assert any(isinstance(b, ImageBlock) and b.mime_type == "image/png" for b in image.content)


async def test_progress_and_cancel_of_the_long_running_operation(
    start_daemon: StartDaemon, paths: Paths, project: Path, npx: str
) -> None:
    await everything(start_daemon, paths, npx)
    seen: list[ap.ToolProgressPush] = []
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            done = await zot.call_tool(
                "trigger-long-running-operation",
                {"duration": 0.3, "steps": 3},
                on_progress=seen.append,
            )
        assert [(p.progress, p.total) for p in seen] == [(1, 3), (2, 3), (3, 3)]
        assert "completed" in " ".join(texts(done))

        # An operation of ten minutes, given up after its first step.
        first = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: zot.call_tool(
                    "trigger-long-running-operation",
                    {"duration": 600, "steps": 600},
                    on_progress=lambda _: first.set(),
                )
            )
            with trio.fail_after(WAIT):
                await first.wait()
            nursery.cancel_scope.cancel()
        with trio.fail_after(WAIT):
            again = await zot.call_tool("echo", {"message": "after the cancel"})
            info = {e.name: e for e in await zot.list_extensions()}[NAME]
    assert texts(again) == ["Echo: after the cancel"]
    assert (info.state, info.restarts) == ("ready", 0)


async def test_prompts_are_slash_commands(
    start_daemon: StartDaemon, paths: Paths, project: Path, npx: str
) -> None:
    await everything(start_daemon, paths, npx)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            commands = {c.name for c in await zot.list_commands()}
            simple = await zot.invoke_command("simple-prompt")
            both = await zot.invoke_command("args-prompt", "city=Lyon state=Rhône")
            loose = await zot.invoke_command("args-prompt", "Paris")
            missing = await zot.invoke_command("args-prompt")
    assert {"simple-prompt", "args-prompt"} <= commands
    assert (simple.action, simple.extension) == ("prompt", NAME)
    assert simple.prompt
    assert both.action == "prompt" and "Lyon" in both.prompt and "Rhône" in both.prompt
    assert "Paris" in loose.prompt
    assert "needs city" in missing.error


async def test_through_zot_mcp(
    start_daemon: StartDaemon, paths: Paths, project: Path, npx: str
) -> None:
    """An MCP host on ``zot mcp`` sees the server's tools as the server gave them,
    its structured output, and its prompts with their arguments."""
    await everything(start_daemon, paths, npx)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
    async with mcp_session(paths, project) as session:
        with trio.fail_after(WAIT):
            tools = {t.name: t for t in (await session.list_tools()).tools}
            weather = await session.call_tool("get-structured-content", {"location": "New York"})
            prompts = {p.name: p for p in (await session.list_prompts()).prompts}
            prompt = await session.get_prompt("args-prompt", {"city": "Lyon", "state": "Rhône"})
    structured = tools["get-structured-content"]
    assert structured.output_schema is not None and structured.output_schema["type"] == "object"
    assert structured.annotations is not None and structured.annotations.read_only_hint is True
    assert tools["echo"].input_schema["required"] == ["message"]
    assert not weather.is_error
    assert isinstance(weather.structured_content, dict) and weather.structured_content
    assert [(a.name, a.required) for a in prompts["args-prompt"].arguments or []] == [
        ("city", True),
        ("state", False),
    ]
    content = prompt.messages[0].content
    assert isinstance(content, mt.TextContent)
    assert "Lyon" in content.text and "Rhône" in content.text
