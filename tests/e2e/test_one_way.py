"""Current zot's one-way frames through a real daemon: a spontaneous
``open_panel``, ``clear_notes``, ``submit`` and ``submit_slash``.

The fixture, ``tests/extensions/interactive.py``, writes the frames it is
given: from a tool call (``ix-emit``, so it serves that agent's call while
it writes them) or from a command (``/ix-emit``, serving no tool call).
Agents are ``zotd.client`` connections; what the extension read is its
``--log`` of frames.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from tests.e2e.frame_log import WAIT, frames, wait_for
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap

INTERACTIVE = EXTENSIONS / "interactive.py"


def install(paths: Paths) -> Path:
    """Installs the fixture as extension ``ix``; returns the log of frames it reads."""
    log = paths.home / "ix.frames"
    add_extension(paths.extensions_dir, "ix", "--log", str(log), script=INTERACTIVE)
    return log


async def next_push(zot: Client) -> ap.Push:
    """The next push frame, but ``extension_state`` (the extension's start)."""
    with trio.fail_after(WAIT):
        async for frame in zot.notifications():
            if not isinstance(frame, ap.ExtensionStatePush):
                return frame
    raise AssertionError("the connection closed")


def panel(panel_id: str, *lines: str) -> dict[str, Any]:
    """A spontaneous ``open_panel`` frame."""
    spec = {"id": panel_id, "title": "T", "lines": list(lines), "footer": "f"}
    return {"type": "open_panel", "panel": spec}


def render(panel_id: str, *lines: str) -> dict[str, Any]:
    return {"type": "panel_render", "panel_id": panel_id, "lines": list(lines)}


async def from_tool(zot: Client, *out: dict[str, Any]) -> None:
    """Has the extension write ``out`` while serving a tool call of ``zot``."""
    result = await zot.call_tool("ix-emit", {"frames": list(out)})
    assert not result.is_error


async def from_command(zot: Client, *out: dict[str, Any]) -> None:
    """Has the extension write ``out`` from a command (serving no tool call)."""
    reply = await zot.invoke_command("ix-emit", json.dumps(list(out)))
    assert (reply.action, reply.error) == ("noop", "")


def opened(push: ap.Push) -> tuple[str, str, list[str]]:
    assert isinstance(push, ap.OpenPanelPush), push
    return push.extension, push.panel.id, push.panel.lines


# --- open_panel ----------------------------------------------------------------------


async def test_a_panel_opened_while_serving_a_call_goes_to_its_agent_alone(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths)
    await start_daemon(FAST)
    async with (
        connect(paths.socket, cwd=project, capabilities=["interactive"]) as caller,
        connect(paths.socket, cwd=project) as other,
    ):
        await other.subscribe()
        await from_tool(caller, panel("p", "hello"))
        assert opened(await next_push(caller)) == ("ix", "p", ["hello"])
        # Routed like a command's panel: keys back, renders to its agent alone.
        await caller.panel_key("p", "down")
        (key,) = await wait_for(log, "panel_key")
        assert (key["panel_id"], key["key"]) == ("p", "down")
        await from_command(other, render("p", "redrawn"), {"type": "clear_notes"})
        push = await next_push(caller)
        assert isinstance(push, ap.PanelRenderPush)
        assert (push.panel_id, push.lines) == ("p", ["redrawn"])
        # The other agent saw none of it: its first push is the clear_notes.
        assert isinstance(await next_push(other), ap.ClearNotesPush)
        with pytest.raises(ZotdError) as e:
            await other.panel_key("p", "down")
        assert e.value.code == "not_found"


async def test_serving_no_call_it_opens_on_every_subscriber(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths)
    await start_daemon(FAST)
    async with (
        connect(paths.socket, cwd=project) as a,
        connect(paths.socket, cwd=project) as b,
        connect(paths.socket, cwd=project) as unsubscribed,
    ):
        await a.subscribe()
        await b.subscribe()
        await from_command(unsubscribed, panel("shared", "to all"))
        assert opened(await next_push(a)) == ("ix", "shared", ["to all"])
        assert opened(await next_push(b)) == ("ix", "shared", ["to all"])
        # Either may answer; renders reach both.
        await b.panel_key("shared", "y")
        (key,) = await wait_for(log, "panel_key")
        assert (key["panel_id"], key["key"]) == ("shared", "y")
        await from_command(unsubscribed, render("shared", "again"))
        for zot in (a, b):
            push = await next_push(zot)
            assert isinstance(push, ap.PanelRenderPush) and push.lines == ["again"]
        # One closing it closes it for all: the extension is told once.
        await a.panel_close("shared")
        push = await next_push(b)
        assert isinstance(push, ap.PanelClosePush)
        assert (push.panel_id, push.reason) == ("shared", "closed")
        assert [f["panel_id"] for f in await wait_for(log, "panel_close")] == ["shared"]
        with pytest.raises(ZotdError):
            await b.panel_key("shared", "y")
        # The agent that is not subscribed had none of it: its first push
        # is the panel its own tool call opens.
        await from_tool(unsubscribed, panel("mine"))
        assert opened(await next_push(unsubscribed))[1] == "mine"


async def test_opened_again_for_another_agent_it_moves(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install(paths)
    await start_daemon(FAST)
    async with (
        connect(paths.socket, cwd=project) as a,
        connect(paths.socket, cwd=project) as b,
    ):
        await from_tool(a, panel("p", "one"))
        assert opened(await next_push(a)) == ("ix", "p", ["one"])
        await from_tool(a, panel("p", "two"))  # the same agent: redrawn there
        assert opened(await next_push(a)) == ("ix", "p", ["two"])
        await from_tool(b, panel("p", "three"))
        push = await next_push(a)
        assert isinstance(push, ap.PanelClosePush)
        assert (push.panel_id, push.reason) == ("p", "moved")
        assert opened(await next_push(b)) == ("ix", "p", ["three"])
        with pytest.raises(ZotdError) as e:
            await a.panel_key("p", "x")
        assert e.value.code == "not_found"
        await b.panel_key("p", "x")
        await wait_for(log, "panel_key")
        assert frames(log, "panel_close") == []  # it never closed: it moved


async def test_with_nobody_to_show_it_the_panel_is_dropped_and_noted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths)
    await start_daemon(FAST)
    async with connect(paths.socket, cwd=project) as zot:  # not subscribed
        await from_command(zot, panel("lost"))
        with pytest.raises(ZotdError) as e:
            await zot.panel_key("lost", "x")
        assert e.value.code == "not_found"
    text = paths.extension_log("ix").read_text()
    assert "dropped `open_panel` 'lost': no agent is there to show it" in text


# --- clear_notes, submit, submit_slash -----------------------------------------------


async def test_clear_notes_submit_and_submit_slash_reach_the_subscribers(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install(paths)
    await start_daemon(FAST)
    async with (
        connect(paths.socket, cwd=project) as zot,
        connect(paths.socket, cwd=project) as unsubscribed,
    ):
        await zot.subscribe()
        await from_command(
            zot,
            {"type": "clear_notes"},
            {"type": "submit", "text": "  run the tests \n"},
            {"type": "submit", "text": " \t "},
            {"type": "submit_slash", "text": " /compact now "},
            {"type": "submit_slash", "text": "compact"},
            {"type": "notify", "level": "info", "message": "the end"},
        )
        got = [await next_push(zot) for _ in range(4)]
        # From a tool call too, and to the subscribers, not to the caller.
        await from_tool(unsubscribed, {"type": "submit", "text": "x"}, panel("mine"))
        assert opened(await next_push(unsubscribed))[1] == "mine"
        later = await next_push(zot)
    assert got == [
        ap.ClearNotesPush("ix"),
        ap.SubmitPush("ix", "run the tests"),
        ap.SubmitSlashPush("ix", "/compact now"),
        ap.NotifyPush("ix", "info", "the end"),
    ]
    assert later == ap.SubmitPush("ix", "x")
    text = paths.extension_log("ix").read_text()
    assert "ignored `submit` without text" in text
    assert "refused `submit_slash` 'compact': its text must start with `/`" in text
