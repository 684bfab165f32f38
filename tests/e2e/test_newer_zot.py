"""Extensions written for newer zot, run unchanged under a real daemon.

The fixture, ``tests/extensions/newer_zot.py``, behaves like zot's own SDK:
it registers before ``hello_ack`` arrives, lists ``panels`` among its
capabilities and never sends ``ready``. Each test drives a feature beyond
the reference through ``zotd.client`` and looks at what the agent gets and
at what the extension was sent (its ``--log`` of frames).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon, add_newer_zot
from tests.e2e.frame_log import WAIT, frames, wait_for
from zotd.client import Client, ZotdError, connect
from zotd.model.config import ExtensionSettings
from zotd.model.paths import Paths
from zotd.protocol import agent as ap


def install(paths: Paths, name: str, *options: str, priority: int = 0) -> Path:
    """Installs the fixture as extension ``name``; returns the log of frames it reads."""
    log = paths.home / f"{name}.frames"
    add_newer_zot(paths.extensions_dir, name, log, *options, priority=priority)
    return log


async def next_push(zot: Client) -> ap.Push:
    with trio.fail_after(WAIT):
        async for frame in zot.notifications():
            return frame
    raise AssertionError("the connection closed")


# --- the way newer zot's SDK starts up ------------------------------------------------


async def test_registrations_before_hello_ack_without_ready(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        (info,) = await zot.list_extensions()
        tools = {t.name for t in await zot.list_tools()}
    assert info.state == "ready"
    assert info.capabilities == ["commands", "tools", "events", "panels"]
    assert {"nz-count", "nz-hang", "nz-late", "weather", "nz-remember"} <= tools
    assert info.commands == ["nz-board", "nz-wait"]
    (ack,) = frames(log, "hello_ack")
    assert ack["data_dir"] == str(paths.home / "data" / "nz")
    assert ack["extension_dir"] == str(paths.extensions_dir / "nz")
    text = paths.extension_log("nz").read_text()
    assert "no `ready` frame; ready after" in text


async def test_state_goes_to_the_data_dir(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await zot.call_tool("nz-remember", {"note": "buy milk"})
    assert not result.is_error
    assert (paths.home / "data" / "nz" / "notes.txt").read_text() == "buy milk\n"


# --- intercepting more than tool calls ------------------------------------------------


async def test_turn_start_can_be_blocked(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "budget", "--intercept", "turn_start", "--block-turn-after", "2")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        first = await zot.intercept_event("turn_start", step=1)
        third = await zot.intercept_event("turn_start", step=3)
        tool = await zot.intercept("bash", {"command": "ls"})  # not intercepted by it
    assert (first.block, third.block) == (False, True)
    assert (third.extension, third.reason) == ("budget", "budget: turn budget spent")
    assert not tool.block
    asked = frames(log, "event_intercept")
    assert [(f["event"], f["step"]) for f in asked] == [("turn_start", 1), ("turn_start", 3)]


async def test_assistant_messages_are_rewritten_in_order(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # Same priority: by name, so "a" rewrites first and "b" sees its text.
    install(paths, "a", "--intercept", "assistant_message", "--replace", "secret=[hidden]")
    log_b = install(paths, "b", "--intercept", "assistant_message", "--replace", "[hidden]=***")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("assistant_message", text="the secret is 42")
        plain = await zot.intercept_event("assistant_message", text="nothing to see")
    assert (reply.block, reply.text, reply.rewritten_by) == (False, "the *** is 42", ["a", "b"])
    assert (plain.text, plain.rewritten_by) == (None, [])
    texts = [f["text"] for f in frames(log_b, "event_intercept")]
    assert "the [hidden] is 42" in texts  # b saw a's rewrite
    assert "the secret is 42" not in texts[-2:]


async def test_priority_orders_the_chain(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # The manifest puts "b" first; zotd.toml puts "a" before it again.
    install(paths, "a", "--intercept", "assistant_message", "--replace", "secret=[hidden]")
    install(
        paths,
        "b",
        "--intercept",
        "assistant_message",
        "--replace",
        "[hidden]=***",
        priority=-5,
    )
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("assistant_message", text="the secret is 42")
    assert (reply.text, reply.rewritten_by) == ("the [hidden] is 42", ["a"])


async def test_config_priority_overrides_the_manifest(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "a", "--intercept", "assistant_message", "--replace", "secret=[hidden]")
    install(
        paths, "b", "--intercept", "assistant_message", "--replace", "[hidden]=***", priority=-5
    )
    config = msgspec.structs.replace(FAST, extensions={"b": ExtensionSettings(priority=10)})
    await start_daemon(config)
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept_event("assistant_message", text="the secret is 42")
    assert (reply.text, reply.rewritten_by) == ("the *** is 42", ["a", "b"])


# --- rewriting tool arguments ----------------------------------------------------------


async def test_modified_args_chain_and_reach_the_agent(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log_a = install(paths, "a", "--intercept", "tool_call", "--set", "timeout=30")
    log_b = install(paths, "b", "--intercept", "tool_call", "--set", 'cwd="/tmp"')
    log_c = install(paths, "c", "--intercept", "tool_call")  # only looks
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept("bash", {"command": "make"}, tool_id="t1")
        again = await zot.intercept("bash", {"command": "make test"}, tool_id="t2")
    final = {"command": "make", "timeout": 30, "cwd": "/tmp"}
    assert (reply.block, reply.args, reply.rewritten_by) == (False, final, ["a", "b"])
    assert again.args == {"command": "make test", "timeout": 30, "cwd": "/tmp"}
    # Each guard's last question about t1 carried what the guards before it made.
    last = {f["tool_id"]: f["tool_args"] for f in frames(log_a, "event_intercept")}
    assert last["t1"] == {"command": "make"}
    last = {f["tool_id"]: f["tool_args"] for f in frames(log_b, "event_intercept")}
    assert last["t1"] == {"command": "make", "timeout": 30}
    last = {f["tool_id"]: f["tool_args"] for f in frames(log_c, "event_intercept")}
    assert last["t1"] == final
    # Once zotd knows a and b rewrite, t2 takes one question per guard; the
    # first time, guards asked before a rewrite was known are asked again
    # (those that had not answered yet are sent `cancel` for the first question).
    t2 = [f for f in frames(log_c, "event_intercept") if f["tool_id"] == "t2"]
    assert len(t2) == 1
    assert len([f for f in frames(log_c, "event_intercept") if f["tool_id"] == "t1"]) >= 2


async def test_a_guard_blocks_the_rewritten_call(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "a", "--intercept", "tool_call", "--set", '"command"="rm -rf /"')
    install(paths, "b", "--intercept", "tool_call", "--block-if", "rm -rf")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept("bash", {"command": "ls"})
    assert (reply.block, reply.extension, reply.reason) == (True, "b", "b: no 'rm -rf'")
    assert reply.args is None


async def test_a_rewrite_into_a_non_object_blocks(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "bad", "--intercept", "tool_call", "--bad-rewrite", "[1, 2]")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept("bash", {"command": "ls"})
    assert (reply.block, reply.extension) == (True, "bad")
    assert reply.reason == (
        "extension 'bad' rewrote the tool's arguments into something that is not a JSON object"
    )
    assert "rewrite refused" in paths.extension_log("bad").read_text()


async def test_rewritten_args_must_fit_the_tools_schema(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")  # registers `weather`: {"city": non-empty string}, nothing else
    install(paths, "fixer", "--intercept", "tool_call", "--set", 'city="Paris"')
    install(paths, "breaker", "--intercept", "tool_call", "--set", "city=5", priority=1)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept("weather", {"city": "Berlin"})
    assert (reply.block, reply.extension) == (True, "breaker")
    assert reply.reason == (
        "the arguments of tool 'weather' as rewritten by 'fixer', 'breaker' do not fit its "
        "schema: $.city: expected a string, got an integer"
    )
    assert "rewrite refused" in paths.extension_log("breaker").read_text()


async def test_rewritten_args_that_fit_are_allowed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")
    install(paths, "fixer", "--intercept", "tool_call", "--set", 'city="Paris"')
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept("weather", {"city": "Berlin"})
        result = await zot.call_tool("weather", reply.args)
    assert (reply.block, reply.args) == (False, {"city": "Paris"})
    assert result.content[0].text == "Paris: sunny"  # type: ignore[union-attr]


# --- panels ----------------------------------------------------------------------------


async def test_a_panel_round_trip(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        opened = await zot.invoke_command("nz-board")
        assert opened.open_panel is not None
        assert (opened.open_panel.id, opened.open_panel.title) == ("board", "Board")
        assert opened.open_panel.lines[0].startswith("> alpha")

        await zot.panel_key("board", "down")
        render = await next_push(zot)
        assert isinstance(render, ap.PanelRenderPush)
        assert (render.extension, render.panel_id) == ("nz", "board")
        assert render.lines[1].startswith("> beta")

        await zot.panel_resize("board", 40, 10, extension="nz")
        render = await next_push(zot)
        assert isinstance(render, ap.PanelRenderPush)
        assert len(render.lines[0]) == 40

        await zot.panel_key("board", "q")  # the extension closes it
        closed = await next_push(zot)
        assert closed == ap.PanelClosePush("nz", "board", reason="extension")
        with pytest.raises(ZotdError) as err:
            await zot.panel_key("board", "down")
        assert err.value.code == "not_found"
        assert "no panel 'board' is open on this connection" in err.value.message
    keys = [(f["key"], f.get("text", "")) for f in frames(log, "panel_key")]
    assert keys == [("down", ""), ("q", "")]
    assert frames(log, "panel_resize") == [
        {"type": "panel_resize", "panel_id": "board", "width": 40, "height": 10}
    ]


async def test_a_panel_redrawn_at_once_reaches_its_opener(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        for _ in range(5):  # the reply and the redraw are read in one go
            await zot.invoke_command("nz-board", "redraw")
            render = await next_push(zot)
            assert isinstance(render, ap.PanelRenderPush)
            assert render.lines[2].startswith("> gamma")
    assert "dropped `panel_render`" not in paths.extension_log("nz").read_text()


async def test_only_the_opener_drives_a_panel_and_leaving_closes_it(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as other:
        async with connect(paths.socket, cwd=project) as zot:
            await zot.invoke_command("nz-board")
            with pytest.raises(ZotdError) as err:
                await other.panel_key("board", "down")
            assert err.value.code == "not_found"
            await zot.panel_close("board")
            (close,) = await wait_for(log, "panel_close")
            assert close == {"type": "panel_close", "panel_id": "board"}
            await zot.invoke_command("nz-board")  # open again, then hang up
        await wait_for(log, "panel_close", 2)
        # Its renders now go nowhere: dropped and noted, nobody disturbed.
        await other.subscribe()
        assert await other.ping()


async def test_a_panel_closes_when_its_extension_stops(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.invoke_command("nz-board")
        await zot.ext_reload("nz")
        closed = await next_push(zot)
        assert closed == ap.PanelClosePush("nz", "board", reason="stopped")


# --- progress, cancellation, late replies -----------------------------------------------


async def test_progress_reaches_the_caller(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")
    await start_daemon()
    seen: list[ap.ToolProgressPush] = []
    async with connect(paths.socket, cwd=project) as zot:
        result = await zot.call_tool("nz-count", {"n": 3}, on_progress=seen.append)
        assert result.content[0].text == "counted to 3"  # type: ignore[union-attr]
        # Without a callback they come as notifications, unsubscribed or not.
        await zot.call_tool("nz-count", {"n": 1})
        push = await next_push(zot)
    assert [(p.message, p.progress, p.total) for p in seen] == [
        ("step 1", 1, 3),
        ("step 2", 2, 3),
        ("step 3", 3, 3),
    ]
    assert {(p.extension, p.tool) for p in seen} == {("nz", "nz-count")}
    assert isinstance(push, ap.ToolProgressPush)
    assert (push.message, push.tool) == ("step 1", "nz-count")


async def test_a_timed_out_call_is_cancelled(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as err:
            await zot.call_tool("nz-hang", {}, timeout_s=0.2)
        assert err.value.code == "timeout"
        (call,) = await wait_for(log, "tool_call")  # logged by the extension, in its own time
        (cancel,) = await wait_for(log, "cancel")
        assert cancel == {"type": "cancel", "id": call["id"]}
    with trio.fail_after(WAIT):
        while "on cancel" not in paths.extension_log("nz").read_text():
            await trio.sleep(0.01)


async def test_a_call_is_cancelled_when_its_client_leaves(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot, trio.open_nursery() as nursery:
        nursery.start_soon(zot.call_tool, "nz-hang", {})
        await wait_for(log, "tool_call")
        nursery.cancel_scope.cancel()
    (cancel,) = await wait_for(log, "cancel")
    assert cancel["id"] == frames(log, "tool_call")[0]["id"]


async def test_a_late_reply_is_dropped_and_counted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError):
            await zot.call_tool("nz-late", {}, timeout_s=0.2)
        with trio.fail_after(WAIT):
            while (await zot.list_extensions())[0].late_replies == 0:
                await trio.sleep(0.05)
        (info,) = await zot.list_extensions()
        assert info.late_replies == 1
        assert info.state == "ready"
    assert "dropped `tool_result`" in paths.extension_log("nz").read_text()


async def test_an_abandoned_call_is_cancelled(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with trio.move_on_after(0.3):  # the agent gives up on it
            await zot.call_tool("nz-hang", {})
        (cancel,) = await wait_for(log, "cancel")
        assert cancel["id"] == frames(log, "tool_call")[0]["id"]
        assert await zot.ping()
        (info,) = await zot.list_extensions()
        assert info.late_replies == 0


async def test_cancel_on_the_wire(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    log = install(paths, "nz")
    await start_daemon()
    stream = await trio.open_unix_socket(str(paths.socket))
    async with stream:
        lines = b""

        async def send(**frame: Any) -> None:
            await stream.send_all(json.dumps(frame).encode() + b"\n")

        async def replies(count: int) -> list[dict[str, Any]]:
            nonlocal lines
            with trio.fail_after(WAIT):
                while lines.count(b"\n") < count:
                    lines += await stream.receive_some()
            *got, lines = lines.split(b"\n", count)
            return [json.loads(line) for line in got]

        await send(id=1, type="hello", cwd=str(project))
        await replies(1)
        await send(id="c", type="call_tool", name="nz-hang", args={})
        await wait_for(log, "tool_call")
        await send(id=2, type="cancel", request_id="c")
        await send(id=3, type="cancel", request_id="c")  # answered already
        got = await replies(3)
    assert got == [
        {
            "type": "response",
            "id": "c",
            "command": "call_tool",
            "success": False,
            "error": {"code": "cancelled", "message": "cancelled by the client"},
        },
        {
            "type": "response",
            "id": 2,
            "command": "cancel",
            "success": True,
            "data": {"cancelled": True},
        },
        {
            "type": "response",
            "id": 3,
            "command": "cancel",
            "success": True,
            "data": {"cancelled": False},
        },
    ]
    (cancel,) = await wait_for(log, "cancel")
    assert cancel["id"] == frames(log, "tool_call")[0]["id"]


async def test_an_abandoned_command_or_intercept_is_cancelled(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz", "--intercept", "tool_call", "--silent")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with trio.move_on_after(0.3):
            await zot.invoke_command("nz-wait")
        with trio.move_on_after(0.3):  # inside the 1 s intercept bound (FAST)
            await zot.intercept("bash", {"command": "ls"})
        cancels = await wait_for(log, "cancel", 2)
        (invoked,) = frames(log, "command_invoked")
        (asked,) = frames(log, "event_intercept")
        assert [c["id"] for c in cancels] == [invoked["id"], asked["id"]]
        assert await zot.ping()


async def test_cancel_of_a_command_on_the_wire(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "nz")
    await start_daemon()
    async with await trio.open_unix_socket(str(paths.socket)) as stream:
        await stream.send_all(
            json.dumps({"id": 1, "type": "hello", "cwd": str(project)}).encode() + b"\n"
        )
        await stream.send_all(b'{"id":2,"type":"invoke_command","name":"nz-wait"}\n')
        await wait_for(log, "command_invoked")
        await stream.send_all(b'{"id":3,"type":"cancel","request_id":2}\n')
        got = b""
        with trio.fail_after(WAIT):
            while got.count(b"\n") < 3:
                got += await stream.receive_some()
    # (A cancelled command's reply comes from its own task: in either order.)
    by_id = {reply["id"]: reply for reply in map(json.loads, got.splitlines())}
    hello, cancelled, answer = by_id[1], by_id[2], by_id[3]
    assert hello["success"] is True
    assert answer == {
        "type": "response",
        "id": 3,
        "command": "cancel",
        "success": True,
        "data": {"cancelled": True},
    }
    assert cancelled == {
        "type": "response",
        "id": 2,
        "command": "invoke_command",
        "success": False,
        "error": {"code": "cancelled", "message": "cancelled by the client"},
    }
