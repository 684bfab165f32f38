"""Guards never fail open on size.

A guard drops a line longer than the frame limit unread (zot's SDKs do), so
an ``event_intercept`` frame past ``max_frame_bytes`` would reach no guard,
and a guard that does not answer counts as allowing. zotd measures the frame
it would forward (longer than the agent's request: it adds ``type``, ``id``
and ``event``) and refuses the intercept with ``frame_too_large`` instead,
also when it is a guard's rewrite that makes the next frame too long.

The guards here (``tests/extensions/strict_guard.py``) read their stdin with
the daemon's limit, as an SDK would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from tests.e2e.test_socket_protocol import raw
from zotd.client import ZotdError, connect
from zotd.model.paths import Paths

LIMIT = 4096
CONFIG = msgspec.structs.replace(FAST, max_frame_bytes=LIMIT)
STRICT_GUARD = EXTENSIONS / "strict_guard.py"

#: What the refusal says, whatever the exact size.
TOO_LARGE = re.compile(
    rf"would take (\d+) bytes, over the {LIMIT}-byte frame limit \(max_frame_bytes\); "
    "a guard would drop it unread"
)


def add_guard(paths: Paths, name: str, *options: str, priority: int = 0) -> Path:
    """A strict guard named ``name``; returns the file it logs its questions to."""
    log = paths.home / f"{name}.questions"
    add_extension(
        paths.extensions_dir,
        name,
        "--log",
        str(log),
        "--max-line",
        str(LIMIT),
        *options,
        manifest={"priority": priority},
        script=STRICT_GUARD,
    )
    return log


def questions(log: Path) -> list[dict[str, int | str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def request_of_size(size: int) -> bytes:
    """An ``intercept`` request line (without the newline) of exactly ``size``
    bytes, leaving ``event`` out (the daemon adds it for the guards)."""
    frame = {"id": 7, "type": "intercept", "tool_name": "bash", "tool_args": {"pad": ""}}
    empty = len(json.dumps(frame, separators=(",", ":")))
    frame["tool_args"] = {"pad": "x" * (size - empty)}
    line = json.dumps(frame, separators=(",", ":")).encode()
    assert len(line) == size
    return line


async def test_an_intercept_too_big_to_forward_is_refused_not_allowed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = add_guard(paths, "wall", "--block-if", "")
    await start_daemon(CONFIG)
    async with raw(paths) as conn:
        await conn.hello(project)
        # The guard is there, and blocks what it can read.
        small = {"id": 1, "type": "intercept", "tool_name": "bash", "tool_args": {}}
        reply = await conn.request(small)
        assert reply["data"]["block"] is True, reply
        assert reply["data"]["reason"] == "blocked by wall"
        # A request within the limit whose forwarded frame is not.
        await conn.send(request_of_size(LIMIT) + b"\n")
        reply = await conn.recv()
    assert (reply["id"], reply["success"]) == (7, False), reply
    assert reply["error"]["code"] == "frame_too_large"
    message = reply["error"]["message"]
    assert message.startswith("intercept refused: the event_intercept frame for its guards")
    found = TOO_LARGE.search(message)
    assert found and int(found[1]) > LIMIT, message
    # Nothing was sent that the guard would have dropped.
    assert questions(log) == [{"asked": "1"}]


async def test_a_rewrite_that_makes_the_next_frame_too_big_is_refused_not_allowed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # "grow" answers first and rewrites the arguments into some 3,900 bytes
    # (its answer fits in the limit); "wall" would block those, but the
    # frame asking it about them, with the agent's other fields, does not fit.
    grow = add_guard(paths, "grow", "--pad", "3900", priority=-1)
    wall = add_guard(paths, "wall", "--block-if", "xxxx")
    await start_daemon(CONFIG)
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as caught:
            await zot.intercept_event(
                "tool_call", tool_id="t1", tool_name="bash", tool_args={}, note="n" * 300
            )
    assert caught.value.code == "frame_too_large"
    message = caught.value.message
    assert message.startswith(
        "intercept refused: as rewritten by 'grow', the event_intercept frame for the guards "
        "after them"
    ), message
    found = TOO_LARGE.search(message)
    assert found and int(found[1]) > LIMIT, message
    assert questions(grow) == [{"asked": "1"}]
    # "wall" was asked about the agent's arguments only, never sent the rewrite.
    assert questions(wall) == [{"asked": "1"}]
    assert "rewrite refused: intercept refused" in paths.extension_log("grow").read_text()
