"""``zot mcp`` at the end of its input: every request it has read is answered
before it exits (zotd/mcp_bridge.py, ``Drain``).

A host may write all its requests at once and close stdin (a script piping
into ``zot mcp``): the answers must still come, not "Connection closed".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as mt
import trio
import trio.testing
from mcp.shared.message import SessionMessage

from tests.conftest import StartDaemon, add_extension
from tests.e2e.test_examples import run_zot, user_env
from zotd.integrations.mcp_bridge import Drain
from zotd.model.paths import Paths

#: The calls piped in, by request id: a fast tool and one that takes a while,
#: so that some are surely still running when stdin ends.
CALLS: dict[int, tuple[str, dict[str, Any], str]] = {
    3: ("echo", {"text": "one"}, '{"text": "one"}'),
    4: ("slow", {"seconds": 1}, "slept"),
    5: ("echo", {"text": "two"}, '{"text": "two"}'),
    6: ("slow", {"seconds": 1}, "slept"),
    7: ("echo", {"text": "three"}, '{"text": "three"}'),
    8: ("slow", {"seconds": 1}, "slept"),
}


def piped_requests() -> bytes:
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "a script", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    for rid, (name, args, _) in CALLS.items():
        messages.append(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": name, "arguments": args},
            }
        )
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


async def test_every_piped_request_is_answered_before_exit(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "alpha", "--tools", "echo,slow")
    await start_daemon()
    # run_zot writes all of stdin at once, then closes it.
    ran = await run_zot(
        ["mcp", "--cwd", str(project)], cwd=project, env=user_env(paths), stdin=piped_requests()
    )
    assert ran.code == 0, ran
    replies = [json.loads(line) for line in ran.out.splitlines()]
    by_id = {r["id"]: r for r in replies}
    assert sorted(r["id"] for r in replies) == [1, 2, 3, 4, 5, 6, 7, 8], ran.out
    assert by_id[1]["result"]["serverInfo"]["name"] == "zot"
    assert sorted(t["name"] for t in by_id[2]["result"]["tools"]) == ["echo", "slow"]
    for rid, (_, _, text) in CALLS.items():
        assert "error" not in by_id[rid], by_id[rid]
        result = by_id[rid]["result"]
        assert result["isError"] is False
        assert result["content"] == [{"type": "text", "text": text}]


# --- the drain on its own, in virtual time ------------------------------------


def request(rid: int) -> SessionMessage:
    return SessionMessage(mt.JSONRPCRequest(jsonrpc="2.0", id=rid, method="ping"))


def cancelled(rid: int) -> SessionMessage:
    return SessionMessage(
        mt.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params={"requestId": rid}
        )
    )


def answer(rid: int) -> SessionMessage:
    return SessionMessage(mt.JSONRPCResponse(jsonrpc="2.0", id=rid, result={}))


async def run_drain(
    incoming: list[SessionMessage], answers: dict[int, float], bound: float
) -> tuple[float, list[Any]]:
    """Feeds ``incoming`` and ends the input; a fake server answers request ``rid``
    ``answers[rid]`` seconds after it read it (never if absent). Returns when the
    server's input ended, and what reached the output."""
    stdin_send, stdin_read = trio.open_memory_channel[SessionMessage | Exception](100)
    stdout_write, stdout_read = trio.open_memory_channel[SessionMessage](100)
    drain = Drain(stdin_read, stdout_write, bound)
    start = trio.current_time()
    ended = 0.0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain.pump_in)
        nursery.start_soon(drain.pump_out)

        async def server() -> None:
            nonlocal ended
            async with drain.server_write, trio.open_nursery() as handlers:

                async def handle(rid: int, after: float) -> None:
                    await trio.sleep(after)
                    await drain.server_write.send(answer(rid))

                async with drain.server_read:
                    async for item in drain.server_read:
                        assert isinstance(item, SessionMessage)
                        message = item.message
                        if isinstance(message, mt.JSONRPCRequest):
                            rid = int(message.id)
                            if rid in answers:
                                handlers.start_soon(handle, rid, answers[rid])
                ended = trio.current_time() - start
                handlers.cancel_scope.cancel()  # as the mcp server does at end of input

        nursery.start_soon(server)
        async with stdin_send:
            for item in incoming:
                await stdin_send.send(item)
    out = []
    async for item in stdout_read:  # until pump_out closes it
        assert isinstance(item.message, mt.JSONRPCResponse)
        out.append(item.message.id)
    return ended, out


async def test_the_input_ends_when_the_last_answer_is_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended, out = await run_drain(
        [request(1), request(2), request(3)], {1: 0.0, 2: 5.0, 3: 2.0}, bound=60
    )
    assert ended == 5.0
    assert out == [1, 3, 2]


async def test_at_most_the_bound_for_a_request_never_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended, out = await run_drain([request(1), request(2)], {1: 1.0}, bound=30)
    assert ended == 30.0
    assert out == [1]


async def test_a_cancelled_request_is_not_waited_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended, out = await run_drain([request(1), request(2), cancelled(2)], {1: 3.0}, bound=30)
    assert ended == 3.0
    assert out == [1]


async def test_nothing_pending_ends_at_once(autojump_clock: trio.testing.MockClock) -> None:
    ended, out = await run_drain([request(1)], {1: 0.0}, bound=30)
    assert ended == 0.0
    assert out == [1]
