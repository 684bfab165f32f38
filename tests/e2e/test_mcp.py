"""``zot mcp`` end to end: the mcp package's own client, over stdio, against a real daemon."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mt
from mcp.shared.exceptions import MCPError

from tests.conftest import StartDaemon, add_extension, add_newer_zot, pid_alive
from zotd.client import connect
from zotd.model.paths import Paths

ZOT = Path(sys.executable).parent / "zot"


def params(paths: Paths, project: Path, *, autostart: bool = False) -> StdioServerParameters:
    env = {
        "ZOT_HOME": str(paths.home),
        "ZOTD_SOCKET": str(paths.socket),
        "ZOTD_CONFIG": str(paths.config_file),
    }
    if not autostart:
        env["ZOTD_NO_AUTOSTART"] = "1"
    return StdioServerParameters(
        command=str(ZOT), args=["mcp", "--cwd", str(project)], env=env, cwd=str(project)
    )


@asynccontextmanager
async def mcp_session(
    paths: Paths, project: Path, *, autostart: bool = False, handler: Any = None
) -> AsyncIterator[ClientSession]:
    """``zot mcp`` as a subprocess, with an initialized client session over its stdio."""
    with (paths.home.parent / "mcp-stderr.log").open("a") as errlog:
        async with (
            stdio_client(params(paths, project, autostart=autostart), errlog=errlog) as (
                read,
                write,
            ),
            ClientSession(read, write, message_handler=handler) as session,
        ):
            with trio.fail_after(30):
                await session.initialize()
            yield session


async def test_tools_list_and_call(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "alpha", "--tools", "echo,fail,image,crash")
    await start_daemon()
    async with mcp_session(paths, project) as session:
        with trio.fail_after(20):
            init = session.initialize_result
            assert init is not None
            assert init.capabilities.tools is not None
            assert init.capabilities.tools.list_changed is True
            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert sorted(tools) == ["crash", "echo", "fail", "image"]
            assert tools["echo"].description == "the echo tool"
            assert tools["echo"].input_schema == {
                "type": "object",
                "properties": {"text": {"type": "string"}},
            }

            ok = await session.call_tool("echo", {"text": "hi"})
            assert not ok.is_error
            assert [c.text for c in ok.content if isinstance(c, mt.TextContent)] == [
                '{"text": "hi"}'
            ]

            failed = await session.call_tool("fail", {})
            assert failed.is_error
            assert isinstance(failed.content[0], mt.TextContent)
            assert failed.content[0].text == "no luck"

            picture = await session.call_tool("image", {})
            assert not picture.is_error
            text, image = picture.content
            assert isinstance(text, mt.TextContent) and text.text == "a picture"
            assert isinstance(image, mt.ImageContent)
            assert image.mime_type == "image/png"
            assert image.data  # base64, passed through

            # zotd's own failure (the extension died mid-call) is an error result too.
            crashed = await session.call_tool("crash", {})
            assert crashed.is_error
            assert isinstance(crashed.content[0], mt.TextContent)
            assert crashed.content[0].text


async def test_commands_are_prompts(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "alpha", "--commands", "hello,show,oops")
    await start_daemon()
    async with mcp_session(paths, project) as session:
        with trio.fail_after(20):
            listed = await session.list_prompts()
            prompts = {p.name: p for p in listed.prompts}
            assert sorted(prompts) == ["hello", "oops", "show"]
            assert prompts["hello"].description == "the hello command"
            assert [a.name for a in prompts["hello"].arguments or []] == ["args"]

            prompt = await session.get_prompt("hello", {"args": "a b"})
            assert [m.role for m in prompt.messages] == ["user"]
            content = prompt.messages[0].content
            assert isinstance(content, mt.TextContent)
            assert content.text == "ran /hello with 'a b'"

            shown = await session.get_prompt("show", {"args": "x"})
            assert len(shown.messages) == 1
            content = shown.messages[0].content
            assert isinstance(content, mt.TextContent)
            assert content.text == "shown: x"
            assert shown.messages[0].role == "assistant"

            with pytest.raises(MCPError, match="it broke"):
                await session.get_prompt("oops")
            with pytest.raises(MCPError):
                await session.get_prompt("nosuch")


async def test_tools_list_changed_is_sent(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    add_extension(paths.extensions_dir, "alpha", "--tools", "echo")
    await start_daemon()
    changed = trio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            changed.set()

    async with mcp_session(paths, project, handler=handler) as session:
        with trio.fail_after(20):
            assert [t.name for t in (await session.list_tools()).tools] == ["echo"]
            source = add_extension(short_tmp / "src", "beta", "--tools", "second")
            async with connect(paths.socket, cwd=project) as zot:
                await zot.ext_install(str(source))
            await changed.wait()
            names = sorted(t.name for t in (await session.list_tools()).tools)
            assert names == ["echo", "second"]


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


async def test_starts_the_daemon_when_none_runs(paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "alpha", "--tools", "echo")
    pid = None
    try:
        async with mcp_session(paths, project, autostart=True) as session:
            with trio.fail_after(30):
                assert [t.name for t in (await session.list_tools()).tools] == ["echo"]
                async with connect(paths.socket, cwd=project, start=False) as zot:
                    pid = (await zot.status()).pid
        assert pid is not None and pid != os.getpid()
        assert pid_alive(pid)
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            _wait_gone(pid)


async def test_no_daemon_and_no_autostart_fails(paths: Paths, project: Path) -> None:
    with trio.fail_after(30):
        done = await trio.run_process(
            [str(ZOT), "mcp", "--cwd", str(project)],
            env=dict(params(paths, project).env or {}, PATH=os.environ["PATH"]),
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 1
    assert done.stdout == b""
    assert b"zotd is not running" in done.stderr


async def test_tool_progress_becomes_mcp_progress(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    frames = paths.home / "nz.frames"
    add_newer_zot(paths.extensions_dir, "nz", frames)
    await start_daemon()
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with mcp_session(paths, project) as session:
        with trio.fail_after(20):
            result = await session.call_tool("nz-count", {"n": 3}, progress_callback=on_progress)
            plain = await session.call_tool("nz-count", {"n": 2})  # no token: no progress
    assert not result.is_error
    assert result.content == [mt.TextContent(type="text", text="counted to 3")]
    assert not plain.is_error
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_a_cancelled_mcp_call_cancels_the_extensions_work(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    frames = paths.home / "nz.frames"
    add_newer_zot(paths.extensions_dir, "nz", frames)
    await start_daemon()
    async with mcp_session(paths, project) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "nz-hang", {})
            with trio.fail_after(30):  # a hang guard: until the extension has the call
                while '"nz-hang"' not in (frames.read_text() if frames.exists() else ""):
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()  # the host gives up on the call
        with trio.fail_after(30):
            while '"type":"cancel"' not in (frames.read_text() if frames.exists() else ""):
                await trio.sleep(0.05)
        assert (await session.call_tool("nz-count", {"n": 1})).is_error is False
