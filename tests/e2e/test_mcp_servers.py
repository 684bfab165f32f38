"""MCP servers as extensions, end to end: the kitchen server (tests/mcp_servers)
as a global ``kind: mcp`` extension of a real daemon, used by an agent
through ``zotd.client``: tools and their metadata, every kind of result,
progress, cancellation, prompts as slash commands, live list changes, logs
and guards. Crashes, restarts and ``zot ext`` are in test_mcp_servers_life.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import trio

from tests.conftest import StartDaemon, add_newer_zot
from tests.e2e.frame_log import WAIT, frames
from tests.e2e.test_mcp import ZOT, params
from tests.mcp_servers import LOG_LINE
from tests.mcp_servers.agent import NAME, kitchen, raw, ready_tools, state_push, texts, wait_until
from zotd.client import ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol.extension import ImageBlock, TextBlock


def zot_env(paths: Paths) -> dict[str, str]:
    """What ``zot`` needs to find this test's daemon."""
    return dict(params(paths, paths.home).env or {})


async def test_tools_are_listed_with_their_schemas_and_annotations(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        tools = await ready_tools(zot)
        info = {e.name: e for e in await zot.list_extensions()}[NAME]
    assert {
        "echo", "weather", "picture", "media", "steps", "slow", "broken", "crash",
        "grow", "grow_prompts", "chatter",
    } <= set(tools)  # fmt: skip
    assert {t.extension for t in tools.values()} == {NAME}
    echo = tools["echo"]
    assert echo.description == "Say the text back"
    assert echo.title == "Echo"
    assert raw(echo.schema) == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    assert raw(echo.annotations) == {"readOnlyHint": True, "openWorldHint": False}
    assert raw(tools["crash"].annotations) == {"destructiveHint": True}
    assert raw(tools["weather"].output_schema)["required"] == ["city", "celsius"]
    assert tools["weather"].annotations is msgspec.UNSET or tools["weather"].annotations is None
    assert info.state == "ready"
    assert sorted(info.commands) == ["greet", "recipe"]


async def test_results_text_structured_image_placeholders_and_errors(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            echo = await zot.call_tool("echo", {"text": "hi there"})
            weather = await zot.call_tool("weather", {"city": "Rome"})
            picture = await zot.call_tool("picture", {})
            media = await zot.call_tool("media", {})
            broken = await zot.call_tool("broken", {})
    assert (texts(echo), echo.is_error, echo.extension) == (["hi there"], False, NAME)
    assert raw(weather.structured_content) == {"city": "Rome", "celsius": 21.5}
    assert json.loads(texts(weather)[0]) == {"city": "Rome", "celsius": 21.5}
    text, image = picture.content
    assert isinstance(text, TextBlock) and text.text == "a picture"
    assert isinstance(image, ImageBlock) and image.mime_type == "image/png" and image.data
    audio, link = texts(media)
    assert audio.startswith("[audio content: audio/wav")
    assert link == "[resource link: menu <file:///kitchen/menu.txt>]"
    assert (texts(broken), broken.is_error) == (["the kitchen is closed"], True)


async def test_progress_becomes_tool_progress(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    seen: list[ap.ToolProgressPush] = []
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            result = await zot.call_tool("steps", {}, on_progress=seen.append)
    assert texts(result) == ["done in 3 steps"]
    assert [(p.progress, p.total, p.message) for p in seen] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]
    assert {(p.extension, p.tool) for p in seen} == {(NAME, "steps")}


async def test_a_cancelled_call_reaches_the_server_as_cancelled(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    events, _ = await kitchen(start_daemon, paths, project)

    def noted() -> list[str]:
        return events.read_text().splitlines() if events.exists() else []

    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(zot.call_tool, "slow", {})
            await wait_until(lambda: "started slow" in noted())
            nursery.cancel_scope.cancel()  # the agent gives the call up
        await wait_until(lambda: "cancelled slow" in noted())
        # The server goes on serving.
        with trio.fail_after(WAIT):
            assert texts(await zot.call_tool("echo", {"text": "still here"})) == ["still here"]


async def test_prompts_are_slash_commands(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            commands = {c.name: c for c in await zot.list_commands()}
            both = await zot.invoke_command("recipe", "dish=soup diet=vegan")
            loose = await zot.invoke_command("/recipe", 'stew "no salt"')
            one = await zot.invoke_command("greet", "Ada Lovelace")
            missing = await zot.invoke_command("recipe", "")
    assert "recipe" in commands["recipe"].description.lower()
    assert "dish=..." in commands["recipe"].description
    assert (both.action, both.prompt, both.extension) == (
        "prompt",
        "Write a recipe for soup (vegan)",
        NAME,
    )
    assert loose.prompt == "Write a recipe for stew (no salt)"
    assert (one.action, one.prompt) == ("prompt", "Greet Ada Lovelace warmly")
    assert missing.error == "/recipe needs dish: /recipe dish=... [diet=...]"


async def test_list_changed_updates_the_registry_live(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        await zot.subscribe()
        with trio.fail_after(WAIT):
            await zot.call_tool("grow", {})
            await state_push(zot, lambda f: "extra" in {t.name for t in f.tools})
            assert "extra" in {t.name for t in await zot.list_tools()}
            assert texts(await zot.call_tool("extra", {})) == ["extra works"]

            await zot.call_tool("grow_prompts", {})
            await state_push(zot, lambda f: "later" in {c.name for c in f.commands})
            assert "later" in {c.name for c in await zot.list_commands()}
            assert (await zot.invoke_command("later")).prompt == "a prompt added later"


async def test_log_notifications_go_to_the_extensions_log(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            assert texts(await zot.call_tool("chatter", {})) == ["said it"]
            while not any(LOG_LINE in line for line in (await zot.ext_logs(NAME)).lines):
                await trio.sleep(0.05)
        lines = [line for line in (await zot.ext_logs(NAME)).lines if LOG_LINE in line]
    assert "info" in lines[0] and "kitchen" in lines[0]


async def test_guards_block_and_rewrite_mcp_tool_calls(
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
        'text="rewritten by the guard"',
    )
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            blocked = await zot.intercept("echo", {"text": "to Mordor"})
            allowed = await zot.intercept("echo", {"text": "hello"})
            assert allowed.args is not None
            result = await zot.call_tool("echo", allowed.args)
    assert blocked.block and blocked.extension == "guard"
    assert "Mordor" in blocked.reason
    assert not allowed.block and allowed.rewritten_by == ["guard"]
    assert texts(result) == ["rewritten by the guard"]
    asked = frames(guard_log, "event_intercept")
    assert [f["tool_name"] for f in asked] == ["echo", "echo"]


async def test_a_rewrite_that_breaks_the_mcp_tools_schema_is_refused(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_newer_zot(
        paths.extensions_dir, "guard", paths.home / "guard.frames", "--intercept", "tool_call",
        "--bad-rewrite", '{"text": 5}',
    )  # fmt: skip
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            reply = await zot.intercept("echo", {"text": "hello"})
    assert (reply.block, reply.extension) == (True, "guard")
    assert reply.reason.startswith(
        "the arguments of tool 'echo' as rewritten by 'guard' do not fit its schema"
    ), reply.reason


async def test_a_calls_deadline_cancels_it_on_the_server(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    events, _ = await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            try:  # slow never answers: its deadline is the only way out
                result = await zot.call_tool("slow", {}, timeout_s=0.5)
            except ZotdError as exc:
                message = exc.message
            else:
                assert result.is_error
                message = " ".join(texts(result))
    assert message == "tool 'slow' (kitchen) did not answer within 0.5 s"
    await wait_until(lambda: "cancelled slow" in events.read_text().splitlines())


async def test_zot_ext_logs_shows_the_servers_log_messages(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await kitchen(start_daemon, paths, project)
    async with connect(paths.socket, cwd=project) as zot:
        await ready_tools(zot)
        with trio.fail_after(WAIT):
            await zot.call_tool("chatter", {})
            while not any(LOG_LINE in line for line in (await zot.ext_logs(NAME)).lines):
                await trio.sleep(0.05)
    with trio.fail_after(WAIT):
        done = await trio.run_process(
            [str(ZOT), "ext", "logs", NAME],
            env={**os.environ, **zot_env(paths)},
            cwd=project,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert f"[info kitchen] {LOG_LINE}" in done.stdout.decode()
