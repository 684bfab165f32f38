"""``zot mcp`` serving a hosted MCP server: an MCP host (the mcp package's own
client, over ``zot mcp``'s stdio) sees the kitchen server's tools with their
output schemas, titles and annotations, gets structured content, its calls
go through zot's guards, its prompts keep their arguments, and a
``list_changed`` from the server reaches it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from mcp import types as mt

from tests.conftest import StartDaemon, add_newer_zot
from tests.e2e.frame_log import WAIT, frames
from tests.e2e.test_mcp import mcp_session
from tests.mcp_servers.agent import kitchen, wait_until
from zotd.model.paths import Paths


def texts(result: mt.CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, mt.TextContent)]


async def host_tools(session: Any) -> dict[str, mt.Tool]:
    """The tools the host is shown, once the kitchen's are there (it starts in the background)."""
    with trio.fail_after(WAIT):
        while True:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            if "echo" in tools:
                return tools
            await trio.sleep(0.05)


async def test_the_host_sees_output_schemas_annotations_and_structured_content(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with mcp_session(paths, project) as session:
        tools = await host_tools(session)
        with trio.fail_after(WAIT):
            weather = await session.call_tool("weather", {"city": "Rome"})
            picture = await session.call_tool("picture", {})
            broken = await session.call_tool("broken", {})
    echo = tools["echo"]
    assert (echo.title, echo.description) == ("Echo", "Say the text back")
    assert echo.annotations == mt.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    assert tools["crash"].annotations == mt.ToolAnnotations(destructive_hint=True)
    assert tools["weather"].output_schema == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
    }
    assert tools["picture"].output_schema is None and tools["picture"].annotations is None
    assert weather.structured_content == {"city": "Rome", "celsius": 21.5}
    assert not weather.is_error
    assert isinstance(picture.content[1], mt.ImageContent)
    assert (texts(broken), broken.is_error) == (["the kitchen is closed"], True)


async def test_the_hosts_calls_go_through_zots_guards(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    guard_log = paths.home / "guard.frames"
    add_newer_zot(
        paths.extensions_dir,
        "guard",
        guard_log,
        "--intercept",
        "tool_call",
        "--block-if",
        "Mordor",
        "--set",
        'text="said by the guard"',
    )
    await kitchen(start_daemon, paths, project)
    async with mcp_session(paths, project) as session:
        await host_tools(session)
        with trio.fail_after(WAIT):
            blocked = await session.call_tool("echo", {"text": "to Mordor"})
            rewritten = await session.call_tool("echo", {"text": "hello"})
    assert blocked.is_error
    assert texts(blocked) == ["blocked by guard: guard: no 'Mordor'"]
    assert (texts(rewritten), rewritten.is_error) == (["said by the guard"], False)
    assert [f["tool_args"] for f in frames(guard_log, "event_intercept")] == [
        {"text": "to Mordor"},
        {"text": "hello"},
    ]


async def test_the_servers_prompts_keep_their_arguments(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with mcp_session(paths, project) as session:
        await host_tools(session)
        with trio.fail_after(WAIT):
            prompts = {p.name: p for p in (await session.list_prompts()).prompts}
            recipe = await session.get_prompt("recipe", {"dish": "pea soup", "diet": "vegan"})
            greet = await session.get_prompt("greet", {"name": "Ada Lovelace"})
    assert [(a.name, a.required) for a in prompts["recipe"].arguments or []] == [
        ("dish", True),
        ("diet", False),
    ]
    assert prompts["recipe"].description == "A recipe"
    assert [a.name for a in prompts["greet"].arguments or []] == ["name"]
    content = recipe.messages[0].content
    assert isinstance(content, mt.TextContent)
    assert (recipe.messages[0].role, content.text) == (
        "user",
        "Write a recipe for pea soup (vegan)",
    )
    content = greet.messages[0].content
    assert isinstance(content, mt.TextContent) and content.text == "Greet Ada Lovelace warmly"


async def test_a_servers_list_changed_reaches_the_host(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    announced: dict[type[Any], trio.Event] = {
        mt.ToolListChangedNotification: trio.Event(),
        mt.PromptListChangedNotification: trio.Event(),
    }

    async def handler(message: Any) -> None:
        if type(message) in announced:
            announced[type(message)].set()

    async def announced_with(kind: type[Any], listed: Any, name: str) -> None:
        """Waits for an announcement of ``kind`` after which ``listed()`` names ``name``
        (an announcement of the kitchen's own start may come first)."""
        while True:
            await announced[kind].wait()
            announced[kind] = trio.Event()
            if name in await listed():
                return

    async with mcp_session(paths, project, handler=handler) as session:

        async def tool_names() -> set[str]:
            return {t.name for t in (await session.list_tools()).tools}

        async def prompt_names() -> set[str]:
            return {p.name for p in (await session.list_prompts()).prompts}

        await host_tools(session)
        with trio.fail_after(WAIT):
            assert "extra" not in await tool_names()
            await session.call_tool("grow", {})
            await announced_with(mt.ToolListChangedNotification, tool_names, "extra")
            assert texts(await session.call_tool("extra", {})) == ["extra works"]

            assert "later" not in await prompt_names()
            await session.call_tool("grow_prompts", {})
            await announced_with(mt.PromptListChangedNotification, prompt_names, "later")


async def test_progress_reaches_the_host_and_its_cancel_reaches_the_server(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    events, _ = await kitchen(start_daemon, paths, project)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    def noted() -> list[str]:
        return events.read_text().splitlines() if events.exists() else []

    async with mcp_session(paths, project) as session:
        await host_tools(session)
        with trio.fail_after(WAIT):
            steps = await session.call_tool("steps", {}, progress_callback=on_progress)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "slow", {})
            await wait_until(lambda: "started slow" in noted())
            nursery.cancel_scope.cancel()  # the host gives the call up
        await wait_until(lambda: "cancelled slow" in noted())
    assert texts(steps) == ["done in 3 steps"]
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
