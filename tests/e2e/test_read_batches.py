"""What one read brings, answered line by line: a real daemon, a real socket,
real extension processes.

The daemon decodes a read's worth of lines at once when every line is a
frame (an agent's requests, an extension's replies), and one line at a time
when one is not (blank, malformed, unknown, not ASCII). Whichever way, every
line gets what it would get alone. And a tool call, however it ended,
leaves nothing behind for the garbage collector.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import trio

from tests.conftest import FAST, StartDaemon, add_extension
from tests.e2e.test_socket_protocol import REPLY_TIMEOUT, Conn, error_of, ok, raw
from zotd.model.paths import Paths
from zotd.runtime.agent_calls import AgentCall
from zotd.runtime.callers import Served

BATCH_REPLIER = Path(__file__).parents[1] / "extensions" / "batch_replier.py"
FAST_ECHO = Path(__file__).parents[1] / "extensions" / "fast_echo.py"


def echo(rid: Any, **args: Any) -> dict[str, Any]:
    return {"id": rid, "type": "call_tool", "name": "echo", "args": args}


def echoed(rid: Any, text: str, extension: str = "b") -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    return ok(rid, "call_tool", {"extension": extension, "content": content, "is_error": False})


async def replies(c: Conn, n: int) -> dict[Any, dict[str, Any]]:
    """The next ``n`` replies, by id (each id once)."""
    out: dict[Any, dict[str, Any]] = {}
    for _ in range(n):
        reply = await c.recv()
        assert reply["id"] not in out, f"two replies for {reply['id']!r}"
        out[reply["id"]] = reply
    return out


async def test_a_read_of_requests_good_and_bad_is_answered_line_by_line(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "b", script=BATCH_REPLIER)
    await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        await c.send(  # one write
            echo(1, text="one"),
            b"\n",
            b"   \n",
            b"this is not json\n",
            {"id": 3, "type": "no_such_request"},
            {"id": 4, "type": "call_tool", "name": "echo", "args": [1]},
            {"id": 5, "type": "call_tool", "name": "nope"},
            {"id": 6, "type": "call_tool"},
            '{"id":7,"type":"call_tool","name":"echo","args":{"text":"h\u00e9"}}\n',
            {"id": 8, "type": "ping"},
            echo(9, text="nine"),
        )
        got = await replies(c, 9)
        assert got[1] == echoed(1, "one")
        assert error_of(got[None]) == (None, None, "bad_request")
        assert error_of(got[3]) == (3, "no_such_request", "unknown_command")
        assert error_of(got[4]) == (4, "call_tool", "bad_request")
        assert error_of(got[5]) == (5, "call_tool", "not_found")
        assert error_of(got[6]) == (6, "call_tool", "bad_request")
        assert got[7] == echoed(7, "h\u00e9")
        assert got[8] == ok(8, "ping", {"pong": True})
        assert got[9] == echoed(9, "nine")
        # Nothing more is owed.
        assert await c.request({"id": 10, "type": "ping"}) == ok(10, "ping", {"pong": True})


async def test_a_read_of_many_calls_is_answered_in_full(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", manifest={"args": [str(FAST_ECHO), "t"]})
    daemon = await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        for round_ in range(3):
            ids = [f"{round_}-{i}" for i in range(200)]
            await c.send(*(echo(rid) for rid in ids))  # 200 calls in one write
            got = await replies(c, len(ids))
            assert sorted(got) == sorted(ids)
            assert all(r == echoed(r["id"], "ok", "t") for r in got.values())
        (ws,) = daemon.workspaces.values()
        assert [ext.pending for ext in ws.extensions.values()] == [0]
        assert daemon.in_flight == 0


async def test_a_read_of_replies_good_and_bad_is_routed_line_by_line(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "b", script=BATCH_REPLIER)
    daemon = await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        # The extension answers each write's calls in one write: first all
        # well formed, then with a blank line, an unknown frame, a notify,
        # a reply that is not UTF-8 escaped and a malformed one among them.
        await c.send(*(echo(i, text=f"t{i}") for i in range(5)))
        got = await replies(c, 5)
        assert got == {i: echoed(i, f"t{i}") for i in range(5)}
        await c.send(
            echo(10, text="ten", blank=True),
            echo(11, text="eleven", unknown=True),
            echo(12, text="tw\u00e9lve", notify=True),
            echo(13, garble=True),
            echo(14, text="fourteen"),
        )
        got = await replies(c, 5)
        assert got[10] == echoed(10, "ten")
        assert got[11] == echoed(11, "eleven")
        assert got[12] == echoed(12, "tw\u00e9lve")
        assert error_of(got[13]) == (13, "call_tool", "extension_failed")
        assert got[14] == echoed(14, "fourteen")
        (ws,) = daemon.workspaces.values()
        assert [ext.state for ext in ws.extensions.values()] == ["ready"]
        assert [ext.pending for ext in ws.extensions.values()] == [0]
        assert daemon.in_flight == 0


async def test_tool_calls_leave_nothing_for_the_garbage_collector(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo,slow")
    daemon = await start_daemon()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds stays in gc.garbage
    try:
        async with raw(paths) as c:
            await c.hello(project)
            # Answered, failed, cancelled ...
            await c.send(*(echo(i, n=i) for i in range(20)), echo("bad", x=1) | {"args": 1})
            await replies(c, 21)
            await c.send({"id": "s", "type": "call_tool", "name": "slow", "args": {"seconds": 30}})
            with trio.fail_after(REPLY_TIMEOUT):
                while daemon.in_flight < 1:
                    await trio.sleep(0.01)
            await c.send({"id": "c", "type": "cancel", "request_id": "s"})
            await replies(c, 2)
        # ... and withdrawn when their agent goes away.
        async with raw(paths) as leaver:
            await leaver.hello(project)
            await leaver.send(
                *(
                    {"id": i, "type": "call_tool", "name": "slow", "args": {"seconds": 30}}
                    for i in range(3)
                )
            )
            with trio.fail_after(REPLY_TIMEOUT):
                while daemon.in_flight < 3:
                    await trio.sleep(0.01)
        with trio.fail_after(FAST.tool_timeout / 2):
            while daemon.sessions or daemon.in_flight:
                await trio.sleep(0.02)
        gc.collect()
        found = [o for o in gc.garbage if isinstance(o, AgentCall | Served)]
        assert found == [], "tool calls were freed by the garbage collector, not when they ended"
        alive = [o for o in gc.get_objects() if isinstance(o, AgentCall | Served)]
        assert alive == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
