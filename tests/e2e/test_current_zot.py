"""Extensions written on current zot's SDK, run unchanged under a real daemon.

The fixture, ``tests/extensions/zot_sdk.py``, behaves on the wire exactly
like zot's Go SDK (``packages/agent/ext``): it reads ``hello_ack`` before
anything else, registers after it (tools with current zot's metadata, one
``subscribe``), sends ``ready``, ignores the frames it does not know and
answers ``tool_cancel`` by sending nothing. It offers zot's ``todo``
example: ``/todo`` opens its panel with ``"action": "open_panel"``. Each
test drives it through ``zotd.client`` and looks at what the agent gets
and at what the extension was sent (its ``--log`` of frames) and wrote
(its log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, StartDaemon, add_extension
from tests.e2e.frame_log import WAIT, frames, wait_for
from tests.e2e.test_examples import run_zot, user_env
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep

ZOT_SDK = EXTENSIONS / "zot_sdk.py"


#: What zot's Go SDK lists in its hello.
SDK_CAPABILITIES = ["commands", "tools", "events", "panels", "tool_cancel", "call_tool"]

#: The tools of the fixture, without --bare.
TODO_TOOLS = {
    "todo_archive",
    "todo_ask",
    "todo_manage",
    "todo_render",
    "todo_search",
    "todo_stats",
    "todo_wait",
}


def install(paths: Paths, name: str, *options: str) -> Path:
    """Installs the fixture as extension ``name``; returns the log of frames it reads."""
    log = paths.home / f"{name}.frames"
    add_extension(paths.extensions_dir, name, "--log", str(log), *options, script=ZOT_SDK)
    return log


def command(name: str, **reply: Any) -> tuple[str, str]:
    """The fixture's options registering ``/name``, answered with ``reply``."""
    return ("--command", f"{name}={json.dumps(reply)}")


async def wait_in_log(path: Path, text: str) -> None:
    with trio.fail_after(WAIT):
        while not path.exists() or text not in path.read_text():
            await trio.sleep(0.01)


async def next_render(zot: Client) -> ap.PanelRenderPush:
    with trio.fail_after(WAIT):
        async for frame in zot.notifications():
            assert isinstance(frame, ap.PanelRenderPush), frame
            return frame
    raise AssertionError("the connection closed")


def text_of(block: ep.Block) -> str:
    assert isinstance(block, ep.TextBlock), block
    return block.text


# --- the fixture is zot's SDK ---------------------------------------------------------


def test_the_fixture_exits_unless_the_first_host_line_is_hello_ack(tmp_path: Path) -> None:
    # What zot's SDK does, and what makes zotd's order matter: a host that
    # sends anything before hello_ack loses the extension.
    log = tmp_path / "frames"
    run = subprocess.run(
        [sys.executable, str(ZOT_SDK), "--name", "t", "--log", str(log)],
        input='{"type":"cancel","id":"1"}\n',
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert run.returncode == 1
    assert 'first host frame must be hello_ack (got "cancel")' in run.stderr
    (hello,) = [json.loads(line) for line in run.stdout.splitlines()]
    assert hello == {"type": "hello", "name": "t", "version": "0.3.0",
                     "capabilities": SDK_CAPABILITIES}  # fmt: skip


async def test_an_extension_on_current_zots_sdk_runs_with_no_error(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        (info,) = await zot.list_extensions()
        tools = await zot.list_tools_data()
        commands = await zot.list_commands_data()
        opened = await zot.invoke_command("todo")
        stats = await zot.call_tool("todo_stats")
    assert (info.name, info.state, info.last_error, info.warnings) == (
        "todo-panel",
        "ready",
        "",
        [],
    )
    assert info.capabilities == SDK_CAPABILITIES
    assert info.shadowed == []
    assert info.commands == ["todo"]
    assert set(info.tools) == TODO_TOOLS
    assert info.events == ["session_start", "tool_result"]
    assert {t.name for t in tools.tools} == TODO_TOOLS
    assert tools.shadowed == commands.shadowed == []
    assert (opened.action, opened.error) == ("open_panel", "")
    assert not stats.is_error
    # The very first line it read was hello_ack (it exits otherwise).
    assert frames(log)[0]["type"] == "hello_ack"
    text = paths.extension_log("todo-panel").read_text()
    for trouble in ("unknown action", "refused", "shadowed", "protocol error", "skipped"):
        assert trouble not in text


# --- command_response actions (current zot) --------------------------------------------


async def test_zots_todo_panel_command_opens_its_panel(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        opened = await zot.invoke_command("/todo")
        assert (opened.extension, opened.action, opened.error) == ("todo-panel", "open_panel", "")
        assert opened.tool_name is msgspec.UNSET and opened.tool_args is msgspec.UNSET
        assert opened.open_panel == ep.PanelSpec(
            id="todos-main",
            title="Todos (0/1 done)",
            lines=["> □ Build something fun"],
            footer="↑/↓ navigate - x toggle - a add - d delete - esc close",
        )
        # The panel is this connection's: its keys go to the extension and
        # its redraws come back here.
        await zot.panel_key("todos-main", "rune", text="x")
        render = await next_render(zot)
        assert (render.extension, render.panel_id) == ("todo-panel", "todos-main")
        assert (render.title, render.lines) == (
            "Todos (1/1 done)",
            ["> ✓ Build something fun  (done)"],
        )
        await zot.panel_key("todos-main", "rune", text="a")
        await next_render(zot)
        for char in "hi":
            await zot.panel_key("todos-main", "rune", text=char)
            await next_render(zot)
        await zot.panel_key("todos-main", "enter")
        render = await next_render(zot)
        assert render.lines == ["  ✓ Build something fun  (done)", "> □ hi"]
        # Its companion tool redraws the open panel too.
        added = await zot.call_tool("todo_manage", {"action": "add", "title": "ship"})
        assert text_of(added.content[0]) == "ok"
        render = await next_render(zot)
        assert render.title == "Todos (1/3 done)"
    keys = [(f["key"], f.get("text", "")) for f in frames(log, "panel_key")]
    assert keys == [("rune", "x"), ("rune", "a"), ("rune", "h"), ("rune", "i"), ("enter", "")]


async def test_tool_prompt_reaches_the_agent(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(
        paths,
        "review",
        "--bare",
        *command(
            "review",
            action="tool_prompt",
            prompt="Review the diff.",
            tool_name="git_diff",
            tool_args={"staged": True, "paths": ["a.py"]},
        ),
        *command("review-all", action="tool_prompt", prompt="All of it.", tool_name="git_diff"),
    )
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.invoke_command("review")
        no_args = await zot.invoke_command("review-all")
        raw = await zot.request("invoke_command", name="review")
    assert (reply.action, reply.prompt, reply.error) == ("tool_prompt", "Review the diff.", "")
    assert (reply.tool_name, reply.tool_args) == ("git_diff", {"staged": True, "paths": ["a.py"]})
    assert (no_args.action, no_args.tool_name, no_args.tool_args) == ("tool_prompt", "git_diff", {})
    assert json.dumps(raw).count("tool_args") == 1  # sent as given, once


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            {"action": "tool_prompt", "prompt": "p", "tool_args": {}},
            "/odd (odd) answered with action 'tool_prompt' but no `tool_name`",
        ),
        (
            {"action": "tool_prompt", "prompt": "p", "tool_name": "t", "tool_args": [1, 2]},
            "/odd (odd) answered with action 'tool_prompt' whose `tool_args` for 't' "
            "are not a JSON object",
        ),
        (
            {"action": "tool_prompt", "tool_name": "t", "tool_args": None},
            "/odd (odd) answered with action 'tool_prompt' whose `tool_args` for 't' "
            "are not a JSON object",
        ),
        (
            {"action": "open_panel"},
            "/odd (odd) answered with action 'open_panel' but no `open_panel` panel",
        ),
        ({"action": "explode"}, "/odd (odd) answered with unknown action 'explode'"),
        ({"action": "explode", "error": "its own words"}, "its own words"),
    ],
)
async def test_a_reply_that_cannot_be_carried_out_is_a_clear_error(
    start_daemon: StartDaemon, paths: Paths, project: Path, reply: dict[str, Any], error: str
) -> None:
    install(paths, "odd", "--bare", *command("odd", **reply))
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        data = await zot.invoke_command("odd")
        (info,) = await zot.list_extensions()
    assert (data.action, data.error) == ("noop", error)
    assert data.tool_name is msgspec.UNSET and data.tool_args is msgspec.UNSET
    assert data.open_panel is None
    assert info.state == "ready"


# --- command names ignore case, as zot matches them -------------------------------------


async def test_a_command_is_found_whatever_its_case(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "ops", "--bare", *command("Deploy", action="display", display="done"))
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        replies = [await zot.invoke_command(name) for name in ("deploy", "/DEPLOY", "Deploy")]
        (listed,) = await zot.list_commands()
        with pytest.raises(ZotdError) as err:
            await zot.invoke_command("DEPLOYS")
    assert [(r.action, r.display, r.error) for r in replies] == [("display", "done", "")] * 3
    # The SDK looks its handler up by the exact name: zotd sends the spelling it registered.
    assert [f["name"] for f in frames(log, "command_invoked")] == ["Deploy"] * 3
    assert (listed.name, listed.extension) == ("Deploy", "ops")
    assert err.value.code == "not_found"
    assert "did you mean /Deploy?" in err.value.message


async def test_commands_differing_only_by_case_conflict_and_the_first_wins(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    log_a = install(paths, "a", "--bare", *command("todo", action="display", display="a's"))
    log_b = paths.home / "b.frames"
    b = add_extension(short_tmp / "src", "b", "--log", str(log_b), "--bare",
                      *command("TODO", action="display", display="b's"), script=ZOT_SDK)  # fmt: skip
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.ext_install(str(b))  # after "a": "a" holds /todo
        data = await zot.list_commands_data()
        reply = await zot.invoke_command("Todo")
        infos = {i.name: i for i in await zot.list_extensions()}
    assert [(c.name, c.extension) for c in data.commands] == [("todo", "a")]
    (shadow,) = data.shadowed
    assert (shadow.name, shadow.extension, shadow.held_by) == ("TODO", "b", "a")
    assert shadow.reason == "extension 'a' registered /todo first (command names ignore case)"
    assert (reply.extension, reply.display) == ("a", "a's")
    assert infos["b"].commands == []
    assert [(s.name, s.held_by) for s in infos["b"].shadowed] == [("/TODO", "a")]
    assert "command /TODO is shadowed by /todo" in paths.extension_log("b").read_text()
    assert frames(log_b, "command_invoked") == []
    assert [f["name"] for f in frames(log_a, "command_invoked")] == ["todo"]


async def test_zots_own_commands_are_reserved_whatever_their_case(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "rude", "--bare", *command("Help", action="noop"))
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        data = await zot.list_commands_data()
        with pytest.raises(ZotdError) as err:
            await zot.invoke_command("HELP")
    assert data.commands == []
    assert [(s.name, s.held_by) for s in data.shadowed] == [("Help", "zot")]
    assert err.value.code == "not_found"
    assert err.value.message == "/HELP is one of zot's built-in commands, not an extension's"


# --- tool metadata (current zot) --------------------------------------------------------


async def test_tool_metadata_is_kept_and_listed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        raw = await zot.request("list_tools")
    listed = {t["name"]: t for t in raw["tools"]}
    assert listed["todo_stats"]["output_schema"] == {
        "type": "object",
        "properties": {"open": {"type": "integer"}, "done": {"type": "integer"}},
    }
    search = listed["todo_search"]
    assert {k: search[k] for k in search if k.startswith("namespace") or k == "exposure"} == {
        "namespace": "todos",
        "namespace_description": "the todo list",
        "namespace_instructions": "search before you archive",
        "exposure": "direct",
    }
    assert listed["todo_archive"]["deferred"] is True
    assert (listed["todo_ask"]["interactive"], listed["todo_ask"]["replay"]) == (True, "safe")
    # What a tool did not say is left out.
    assert set(listed["todo_render"]) == {"name", "description", "schema", "extension"}
    # `zot tools` says what the model sees of each.
    ran = await run_zot(["tools"], cwd=project, env=user_env(paths))
    rows = {line.split()[0]: line for line in ran.out.splitlines()}
    assert (ran.code, ran.err) == (0, "")
    assert rows["todo_archive"].endswith("(todo-panel; deferred)")
    assert rows["todo_ask"].endswith("(todo-panel; interactive)")
    assert rows["todo_render"].endswith("(todo-panel)")


async def test_unknown_exposure_skips_the_tool_and_unknown_replay_is_never(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "odd", "--bare", "--odd-tools")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        tools = {t.name: t for t in await zot.list_tools()}
        (info,) = await zot.list_extensions()
        with pytest.raises(ZotdError) as err:
            await zot.call_tool("odd_exposure")
        result = await zot.call_tool("odd_replay")
    assert set(tools) == {"odd_replay"}
    assert tools["odd_replay"].replay == "never"
    assert (info.state, info.tools) == ("ready", ["odd_replay"])
    assert err.value.code == "not_found"
    assert not result.is_error
    text = paths.extension_log("odd").read_text()
    assert "tool 'odd_exposure': unknown exposure 'eager'" in text
    assert "skipped" in text
    assert "tool 'odd_replay': unknown replay 'always', taken as 'never'" in text


# --- tool results (current zot) ---------------------------------------------------------


async def test_structured_content_and_activate_tools_reach_the_caller(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        stats = await zot.call_tool("todo_stats")
        search = await zot.call_tool("todo_search")
        archived = await zot.call_tool("todo_archive")
        raw = await zot.request("call_tool", name="todo_render", args={})
    assert isinstance(stats.structured_content, msgspec.Raw)
    assert msgspec.json.decode(stats.structured_content) == {"open": 1, "done": 0}
    assert text_of(stats.content[0]) == "1 open, 0 done"
    assert stats.activate_tools is msgspec.UNSET
    assert search.activate_tools == ["todo_archive"]
    assert search.structured_content is msgspec.UNSET
    assert text_of(archived.content[0]) == "archived 0"
    assert "structured_content" not in raw and "activate_tools" not in raw


async def test_markdown_format_and_unknown_blocks_reach_the_caller(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await zot.call_tool("todo_render")
        raw = await zot.request("call_tool", name="todo_render", args={})
    assert not result.is_error
    markdown, placeholder = result.content
    assert markdown == ep.TextBlock("# Todos\n\n- [ ] Build something fun", format="markdown")
    assert placeholder == ep.TextBlock('[unknown block type "resource" from extension todo-panel]')
    assert raw["content"][0]["format"] == "markdown"
    assert "format" not in raw["content"][1]


# --- the frames zot's SDK does not know, and the ones it does ------------------------


async def test_tool_cancel_stops_the_handler_and_no_result_is_sent(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as err:
            await zot.call_tool("todo_wait", timeout_s=0.5)  # it never answers by itself
        (cancel,) = await wait_for(log, "tool_cancel")
        (call,) = frames(log, "tool_call")
        await wait_in_log(paths.extension_log("todo-panel"), f"stopped {call['id']} on tool_cancel")
        after = await zot.call_tool("todo_stats")  # still serving
        (info,) = await zot.list_extensions()
    assert err.value.code == "timeout"
    assert cancel == {"type": "tool_cancel", "id": call["id"]}
    assert frames(log, "cancel") == []
    assert not after.is_error
    assert (info.state, info.late_replies, info.last_error) == ("ready", 0, "")


async def test_frames_it_does_not_know_are_ignored_and_shutdown_is_acknowledged(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "todo-panel")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.invoke_command("todo")
        await zot.panel_resize("todos-main", 40, 10)  # zotd's own frame
        await wait_for(log, "panel_resize")
        ext_log = paths.extension_log("todo-panel")
        await wait_in_log(ext_log, 'unknown frame type "panel_resize"')
        (info,) = await zot.list_extensions()
        assert (info.state, info.last_error) == ("ready", "")
        (reloaded,) = await zot.ext_reload("todo-panel")  # shutdown, then a new process
    assert reloaded.state == "ready"
    assert len(frames(log, "shutdown")) == 1
    assert len(frames(log, "hello_ack")) == 2
    assert "did not exit after shutdown" not in ext_log.read_text()
