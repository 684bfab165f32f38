"""``zot mcp`` at the newest revision the ``mcp`` package speaks, through the
package's own client over stdio, against a real daemon and a real extension
(tests/extensions/mcp_current.py): the 2026-07-28 revision (``server/discover``
and per-request envelopes) and the newest handshake one (``initialize``,
2025-11-25), and an older host's handshake revision."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import ClientSession, stdio_client
from mcp import types as mt
from mcp.client.subscriptions import PromptsListChanged, ToolsListChanged, listen
from mcp.types.version import LATEST_HANDSHAKE_VERSION, LATEST_PROTOCOL_VERSION

from tests.conftest import StartDaemon, add_extension
from tests.e2e.frame_log import WAIT
from tests.e2e.test_mcp import ZOT, params
from zotd.client import connect
from zotd.model.paths import Paths

SCRIPT = Path(__file__).parent.parent / "extensions" / "mcp_current.py"
ERAS = ["handshake", "current"]


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def workspace(start_daemon: StartDaemon, paths: Paths) -> Path:
    """The extension ``x`` in a running daemon; the file of what it read and noted."""
    log = paths.home / "x.frames"
    add_extension(paths.extensions_dir, "x", "--log", str(log), script=SCRIPT)
    await start_daemon()
    return log


@asynccontextmanager
async def session(
    paths: Paths, project: Path, era: str, handler: Any = None
) -> AsyncIterator[ClientSession]:
    """``zot mcp`` with a client connected by ``initialize`` (``handshake``),
    ``server/discover`` (``current``), or not yet (any other ``era``)."""
    with (paths.home.parent / "mcp-stderr.log").open("a") as errlog:
        async with (
            stdio_client(params(paths, project), errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=handler) as client,
        ):
            with trio.fail_after(WAIT):
                if era == "handshake":
                    await client.initialize()
                elif era == "current":
                    await client.discover()
            yield client


async def test_the_newest_revision_is_negotiated(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await workspace(start_daemon, paths)
    async with session(paths, project, "current") as client:
        found = client.discover_result
        assert found is not None
        assert client.protocol_version == LATEST_PROTOCOL_VERSION
        assert LATEST_PROTOCOL_VERSION in found.supported_versions
        tools, prompts = found.capabilities.tools, found.capabilities.prompts
        # At 2026-07-28 changes come on subscriptions/listen streams, which zot mcp serves.
        assert tools is not None and tools.list_changed is True
        assert prompts is not None and prompts.list_changed is True
        assert client.server_info is not None and client.server_info.name == "zot"
    async with session(paths, project, "handshake") as client:
        assert client.protocol_version == LATEST_HANDSHAKE_VERSION
        init = client.initialize_result
        assert init is not None and init.capabilities.tools is not None
        assert init.capabilities.tools.list_changed is True


@pytest.mark.parametrize("asked", ["2025-03-26", "2026-07-28"])
async def test_an_initialize_gets_the_hosts_revision_or_the_newest_handshake_one(
    start_daemon: StartDaemon, paths: Paths, project: Path, asked: str
) -> None:
    """An older host keeps its revision (and is served); a host asking
    ``initialize`` for 2026-07-28 (reached by ``server/discover`` only) is
    offered 2025-11-25."""
    await workspace(start_daemon, paths)
    async with session(paths, project, "none") as client:
        with trio.fail_after(WAIT):
            result = await client.send_request(
                mt.InitializeRequest(
                    params=mt.InitializeRequestParams(
                        protocol_version=asked,
                        capabilities=mt.ClientCapabilities(),
                        client_info=mt.Implementation(name="old-host", version="1"),
                    )
                ),
                mt.InitializeResult,
            )
            client.adopt(result)
            await client.send_notification(mt.InitializedNotification())
            called = await client.call_tool("x-forecast", {"city": "Oslo"})
    expected = asked if asked != LATEST_PROTOCOL_VERSION else LATEST_HANDSHAKE_VERSION
    assert result.protocol_version == expected
    assert [c.text for c in called.content if isinstance(c, mt.TextContent)] == ["Oslo: 21.5 C"]


@pytest.mark.parametrize("era", ERAS)
async def test_output_schema_annotations_structured_content_and_images(
    start_daemon: StartDaemon, paths: Paths, project: Path, era: str
) -> None:
    await workspace(start_daemon, paths)
    async with session(paths, project, era) as client:
        with trio.fail_after(WAIT):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            forecast = await client.call_tool("x-forecast", {"city": "Rome"})
            snapshot = await client.call_tool("x-snapshot", {})
    shown = tools["x-forecast"]
    assert (shown.title, shown.description) == ("Forecast", "The weather in a city")
    assert shown.output_schema == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
    }
    assert shown.annotations == mt.ToolAnnotations(
        read_only_hint=True, idempotent_hint=True, open_world_hint=False
    )
    assert tools["x-snapshot"].output_schema is None and tools["x-snapshot"].annotations is None
    assert not forecast.is_error
    assert forecast.structured_content == {"city": "Rome", "celsius": 21.5}
    assert forecast.content == [mt.TextContent(type="text", text="Rome: 21.5 C")]
    text, image = snapshot.content
    assert text == mt.TextContent(type="text", text="a snapshot")
    assert isinstance(image, mt.ImageContent) and image.mime_type == "image/png"
    assert image.data.startswith("iVBORw0KGgo")


@pytest.mark.parametrize("era", ERAS)
async def test_progress_from_tool_progress(
    start_daemon: StartDaemon, paths: Paths, project: Path, era: str
) -> None:
    await workspace(start_daemon, paths)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with session(paths, project, era) as client:
        with trio.fail_after(WAIT):
            done = await client.call_tool("x-steps", {"n": 3}, progress_callback=on_progress)
    assert done.content == [mt.TextContent(type="text", text="3 steps")]
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("era", ERAS)
async def test_a_cancelled_call_is_a_tool_cancel_and_serving_goes_on(
    start_daemon: StartDaemon, paths: Paths, project: Path, era: str
) -> None:
    log = await workspace(start_daemon, paths)

    def noted() -> list[str]:
        return [f["noted"] for f in logged(log) if "noted" in f]

    async with session(paths, project, era) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.call_tool, "x-wait", {})
            with trio.fail_after(WAIT):  # a hang guard: until the extension has the call
                while "started wait" not in noted():
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()  # the host gives up: notifications/cancelled
        with trio.fail_after(WAIT):
            while "cancelled wait" not in noted():
                await trio.sleep(0.05)
            again = await client.call_tool("x-forecast", {"city": "Lima"})
    call_id = next(f["id"] for f in logged(log) if f.get("name") == "x-wait")
    assert {"type": "tool_cancel", "id": call_id} in logged(log)
    assert again.structured_content == {"city": "Lima", "celsius": 21.5}


async def test_list_changed_on_the_session_at_the_handshake_revision(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await workspace(start_daemon, paths)
    seen: dict[type[Any], trio.Event] = {
        mt.ToolListChangedNotification: trio.Event(),
        mt.PromptListChangedNotification: trio.Event(),
    }

    async def handler(message: Any) -> None:
        if type(message) in seen:
            seen[type(message)].set()

    async def both() -> None:
        for kind in seen:
            await seen[kind].wait()
            seen[kind] = trio.Event()

    async with session(paths, project, "handshake", handler) as client:
        with trio.fail_after(WAIT):
            assert "x-wait" in {t.name for t in (await client.list_tools()).tools}
            async with connect(paths.socket, cwd=project) as zot:
                await zot.ext_disable("x")
                await both()
                assert (await client.list_tools()).tools == []
                assert (await client.list_prompts()).prompts == []
                await zot.ext_enable("x")
                await both()
                assert "x-wait" in {t.name for t in (await client.list_tools()).tools}
                assert [p.name for p in (await client.list_prompts()).prompts] == ["x-note"]


async def test_list_changed_on_a_listen_stream_at_the_current_revision(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await workspace(start_daemon, paths)
    async with session(paths, project, "current") as client:
        with trio.fail_after(WAIT):
            assert "x-wait" in {t.name for t in (await client.list_tools()).tools}
            async with (
                listen(client, tools_list_changed=True, prompts_list_changed=True) as events,
                connect(paths.socket, cwd=project) as zot,
            ):
                await zot.ext_disable("x")
                got = {type(await events.__anext__()), type(await events.__anext__())}
                assert got == {ToolsListChanged, PromptsListChanged}
                assert (await client.list_tools()).tools == []
                await zot.ext_enable("x")
                got = {type(await events.__anext__()), type(await events.__anext__())}
                assert got == {ToolsListChanged, PromptsListChanged}
                assert "x-wait" in {t.name for t in (await client.list_tools()).tools}
                assert [p.name for p in (await client.list_prompts()).prompts] == ["x-note"]


async def test_a_listen_stream_is_ended_at_the_end_of_input(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    """A 2026-07-28 host that closes stdin with a listen stream open gets its
    stream's final result (a graceful end), and ``zot mcp`` exits 0."""
    await workspace(start_daemon, paths)
    meta = {
        mt.PROTOCOL_VERSION_META_KEY: LATEST_PROTOCOL_VERSION,
        mt.CLIENT_INFO_META_KEY: {"name": "piped-host", "version": "1"},
        mt.CLIENT_CAPABILITIES_META_KEY: {},
    }
    request = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
    }
    with trio.fail_after(2 * WAIT):  # a hang guard
        done = await trio.run_process(
            [str(ZOT), "mcp", "--cwd", str(project)],
            env=dict(params(paths, project).env or {}, PATH=os.environ["PATH"]),
            stdin=(json.dumps(request) + "\n").encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert frames[0]["method"] == "notifications/subscriptions/acknowledged"
    assert frames[-1]["id"] == "listen-1" and "result" in frames[-1], frames
