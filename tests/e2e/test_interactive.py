"""Current zot's interactive tools, and ``tool_cancel``, through a real daemon.

The fixture, ``tests/extensions/interactive.py``, has an "ask the user" tool
registered with ``interactive: true``: it opens a panel with a spontaneous
``open_panel`` frame and answers only when a key comes for it. An agent
whose ``hello`` lists ``interactive`` gets no reply deadline for it (the
daemon's ``tool_timeout`` here is 1 s); its cancel, its disconnect and the
daemon's shutdown still end the call. Each test looks at what the agent gets
and at what the extension read (its ``--log`` of frames).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from tests.e2e.frame_log import WAIT, frames, wait_for
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep

INTERACTIVE = EXTENSIONS / "interactive.py"
#: Short, so that a deadline applied by mistake would end the call long
#: before the test answers it.
CONFIG = msgspec.structs.replace(FAST, tool_timeout=1.0)


def install(paths: Paths, name: str, *options: str) -> Path:
    """Installs the fixture as extension ``name``; returns the log of frames it reads."""
    log = paths.home / f"{name}.frames"
    add_extension(paths.extensions_dir, name, "--log", str(log), *options, script=INTERACTIVE)
    return log


async def next_push(zot: Client, kind: type[Any]) -> Any:
    """The next push frame of type ``kind`` (others are skipped)."""
    with trio.fail_after(WAIT):
        async for frame in zot.notifications():
            if isinstance(frame, kind):
                return frame
    raise AssertionError("the connection closed")


def texts(result: ap.CallData) -> list[str]:
    return [b.text if isinstance(b, ep.TextBlock) else repr(b) for b in result.content]


@asynccontextmanager
async def asking(
    zot: Client, tool: str = "ix-ask"
) -> AsyncIterator[tuple[list[ap.CallData | ZotdError], trio.CancelScope, trio.Event]]:
    """Calls ``tool`` in a task: (its outcome once done, the call's cancel
    scope, set when it is done)."""
    outcome: list[ap.CallData | ZotdError] = []
    done = trio.Event()
    scope = trio.CancelScope()

    async def call() -> None:
        with scope:
            try:
                outcome.append(await zot.call_tool(tool, {"question": "proceed?"}))
            except ZotdError as exc:
                outcome.append(exc)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        yield outcome, scope, done
        with trio.fail_after(WAIT):
            await done.wait()


# --- no deadline for an agent that can show UI --------------------------------------


async def test_an_interactive_call_outlives_the_tool_timeout(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "ix")
    await start_daemon(CONFIG)
    async with connect(paths.socket, cwd=project, capabilities=["interactive"]) as zot:
        async with asking(zot) as (outcome, _, _):
            opened = await next_push(zot, ap.OpenPanelPush)
            assert (opened.extension, opened.panel.lines) == ("ix", ["proceed?"])
            # A call started later, with the deadline every tool call has,
            # times out first: past this, a deadline on the question would
            # have ended it too.
            with pytest.raises(ZotdError) as hung:
                await zot.call_tool("ix-hang", {})
            assert hung.value.code == "timeout"
            assert outcome == []
            await zot.panel_key(opened.panel.id, "enter", text="yes")
        closed = await next_push(zot, ap.PanelClosePush)
    (result,) = outcome
    assert isinstance(result, ap.CallData)
    assert (result.is_error, result.extension) == (False, "ix")
    assert texts(result) == ["the user said: yes"]
    assert (closed.panel_id, closed.reason) == (opened.panel.id, "extension")
    (ask,) = [f for f in frames(log, "tool_call") if f["name"] == "ix-ask"]
    cancels = [f["id"] for f in frames(log) if f["type"] in ("cancel", "tool_cancel")]
    assert ask["id"] not in cancels


async def test_an_agent_without_ui_gets_a_tool_error_at_once(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "ix")
    await start_daemon(CONFIG)
    async with connect(paths.socket, cwd=project) as zot:
        with trio.fail_after(WAIT):
            result = await zot.call_tool("ix-ask", {"question": "proceed?"})
        await zot.call_tool("ix-emit", {"frames": []})  # the extension has read all by now
    assert result.is_error
    (block,) = result.content
    assert isinstance(block, ep.TextBlock)
    assert "'ix-ask' is interactive" in block.text
    assert "`interactive` capability" in block.text
    assert [f["name"] for f in frames(log, "tool_call")] == ["ix-emit"]


async def test_the_user_closing_the_panel_answers_the_call(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths, "ix")
    await start_daemon(CONFIG)
    async with (
        connect(paths.socket, cwd=project, capabilities=["interactive"]) as zot,
        asking(zot) as (outcome, _, _),
    ):
        opened = await next_push(zot, ap.OpenPanelPush)
        await zot.panel_close(opened.panel.id)
    (result,) = outcome
    assert isinstance(result, ap.CallData) and result.is_error
    assert texts(result) == ["the user closed the question"]


# --- what still ends it ------------------------------------------------------------------


async def test_the_agents_cancel_ends_it_with_tool_cancel(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "ix")
    await start_daemon(CONFIG)
    async with connect(paths.socket, cwd=project, capabilities=["interactive"]) as zot:
        async with asking(zot) as (outcome, scope, _):
            opened = await next_push(zot, ap.OpenPanelPush)
            scope.cancel()
        closed = await next_push(zot, ap.PanelClosePush)  # the extension closed it
    assert outcome == []  # cancelled
    (ask,) = frames(log, "tool_call")
    (cancel,) = await wait_for(log, "tool_cancel")
    assert cancel["id"] == ask["id"]
    assert frames(log, "cancel") == []
    assert (closed.panel_id, closed.reason) == (opened.panel.id, "extension")


async def test_the_agent_leaving_ends_it(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "ix")
    await start_daemon(CONFIG)
    async with connect(paths.socket, cwd=project) as watcher:  # keeps the workspace
        # By hand, so that nothing but the hangup tells the daemon (a
        # client's call given up in its body would send `cancel` first).
        with trio.fail_after(WAIT):
            async with await trio.open_unix_socket(str(paths.socket)) as sock:
                hello = {
                    "type": "hello",
                    "id": 1,
                    "cwd": str(project),
                    "capabilities": ["interactive"],
                }
                call = {"type": "call_tool", "id": 2, "name": "ix-ask", "args": {"question": "?"}}
                await sock.send_all(b"".join(json.dumps(f).encode() + b"\n" for f in (hello, call)))
                opened = await read_until(sock, "open_panel")
        (ask,) = frames(log, "tool_call")
        (cancel,) = await wait_for(log, "tool_cancel")
        assert cancel["id"] == ask["id"]
        (close,) = await wait_for(log, "panel_close")  # the panel went with the agent
        assert close["panel_id"] == opened["panel"]["id"]
        assert await watcher.ping()


async def read_until(sock: trio.SocketStream, kind: str) -> dict[str, Any]:
    """Reads lines from a raw agent socket until a frame of ``type`` ``kind``."""
    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            frame = json.loads(line)
            if frame.get("type") == kind:
                return frame  # type: ignore[no-any-return]
        chunk = await sock.receive_some()
        if not chunk:
            raise AssertionError(f"the socket closed before a {kind!r} frame")
        buffer += chunk


async def test_the_daemons_shutdown_ends_it(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths, "ix")
    daemon = await start_daemon(CONFIG)
    async with (
        connect(paths.socket, cwd=project, capabilities=["interactive"]) as zot,
        asking(zot) as (outcome, _, _),
    ):
        await next_push(zot, ap.OpenPanelPush)
        daemon.request_shutdown()
    (error,) = outcome
    assert isinstance(error, ZotdError) and error.code == "shutting_down"
    assert frames(log, "shutdown")


# --- tool_cancel for tool calls only, and only to extensions that list it ---------------


async def test_abandoned_tool_calls_get_tool_cancel_if_the_hello_lists_it(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    new = install(paths, "new", "--guard")
    old = install(paths, "old", "--no-tool-cancel")
    await start_daemon(CONFIG)
    async with connect(paths.socket, cwd=project) as zot:
        for name, log in (("new", new), ("old", old)):
            # The agent's cancel.
            with trio.move_on_after(WAIT) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(zot.call_tool, f"{name}-hang", {})
                    await wait_for(log, "tool_call")
                    nursery.cancel_scope.cancel()
            assert not scope.cancelled_caught
            # The reply deadline.
            with pytest.raises(ZotdError) as timed_out:
                await zot.call_tool(f"{name}-hang", {}, timeout_s=0.2)
            assert timed_out.value.code == "timeout"
        # A command given up, and a guard's deadline, are sent `cancel` even so.
        with trio.move_on_after(WAIT) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(zot.invoke_command, "new-wait")
                await wait_for(new, "command_invoked")
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
        verdict = await zot.intercept("bash", {"command": "ls"})
        assert not verdict.block  # silence is allow
        await wait_for(new, "cancel", 2)
        await wait_for(old, "cancel", 2)

    def ids(log: Path, *kinds: str) -> list[str]:
        return [f["id"] for f in frames(log) if f["type"] in kinds]

    assert ids(new, "tool_cancel") == ids(new, "tool_call")
    assert ids(new, "cancel") == ids(new, "command_invoked") + ids(new, "event_intercept")
    assert ids(old, "cancel") == ids(old, "tool_call")
    assert ids(old, "tool_cancel") == []
