"""What an agent sees of a hosted MCP server, for the end-to-end tests: the
kitchen server started as a global extension, and waits on what zotd pushes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from tests.conftest import FAST, StartDaemon
from tests.e2e.frame_log import WAIT
from zotd.client import Client
from zotd.model.config import Config
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol.extension import TextBlock

from . import add_mcp_server

NAME = "kitchen"


def texts(result: ap.CallData) -> list[str]:
    return [b.text for b in result.content if isinstance(b, TextBlock)]


def raw(value: object) -> Any:
    """A ``msgspec.Raw`` (or a plain value) as JSON data."""
    if isinstance(value, msgspec.Raw):
        return json.loads(bytes(value))
    return value


async def wait_until(check: Any) -> None:
    """Polls a cheap, local condition (a file a server writes) within WAIT."""
    with trio.fail_after(WAIT):
        while not check():
            await trio.sleep(0.02)


async def kitchen(
    start_daemon: StartDaemon, paths: Paths, project: Path, config: Config = FAST
) -> tuple[Path, Path]:
    """Starts a daemon hosting the kitchen server; returns its events file and dir."""
    events = paths.home / "kitchen.events"
    directory = add_mcp_server(paths.extensions_dir, NAME, env={"KITCHEN_EVENTS": str(events)})
    await start_daemon(config)
    return events, directory


async def state_push(
    zot: Client, check: Callable[[ap.ExtensionStatePush], bool]
) -> ap.ExtensionStatePush:
    """The first ``extension_state`` push of the kitchen that passes ``check``."""
    with trio.fail_after(WAIT):
        async for frame in zot.notifications():
            if (
                isinstance(frame, ap.ExtensionStatePush)
                and frame.extension == NAME
                and check(frame)
            ):
                return frame
    raise AssertionError("the connection closed")


async def ready_tools(zot: Client) -> dict[str, ap.ToolInfo]:
    """The workspace's tools, once the kitchen's are there (it starts in the background)."""
    with trio.fail_after(WAIT):
        while True:
            tools = {t.name: t for t in await zot.list_tools()}
            if "echo" in tools:
                return tools
            await trio.sleep(0.05)
