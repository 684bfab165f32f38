"""Peers that stop reading, or never finish a line, cost the daemon bounded
memory (issue 15, point 6): a real daemon, real extension processes, a raw
Unix socket.

* An extension that stops reading its stdin never sees the calls given up
  meanwhile, and once ``extension_queue_bytes`` wait behind it, it is stuck:
  its calls fail with a clear error and it is restarted.
* Connections holding unfinished lines share ``max_buffered_bytes``; the one
  that takes them past it is closed with an error, the others go on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension
from tests.e2e.test_socket_protocol import Conn, raw
from zotd.model.config import RestartPolicy
from zotd.model.paths import Paths

STUCK = EXTENSIONS / "stuck_stdin.py"

#: Every wait here is bounded by this: a hang guard, generous for a busy machine.
WAIT = 30.0

MIB = 1024 * 1024


def stuck_extension(paths: Paths, short_tmp: Path) -> tuple[Path, Path]:
    """Installs ``stuck``, holding (not reading stdin) until ``hold`` is removed;
    returns (its frame log, the hold file)."""
    log, hold = short_tmp / "frames.jsonl", short_tmp / "hold"
    hold.touch()
    add_extension(
        paths.extensions_dir, "stuck", "--log", str(log), "--hold", str(hold), script=STUCK
    )
    return log, hold


def seen(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def call(rid: Any, n: int, pad: int = 0) -> dict[str, Any]:
    return {"id": rid, "type": "call_tool", "name": "echo", "args": {"n": n, "pad": "x" * pad}}


async def replies(conn: Conn, count: int) -> dict[Any, dict[str, Any]]:
    got: dict[Any, dict[str, Any]] = {}
    while len(got) < count:
        frame = await conn.recv()
        if frame.get("type") == "response":
            got[frame["id"]] = frame
    return got


async def test_calls_given_up_are_never_seen_by_an_extension_that_stopped_reading(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    log, hold = stuck_extension(paths, short_tmp)
    await start_daemon(msgspec.structs.replace(FAST, tool_timeout=1.0))
    async with raw(paths) as conn:
        await conn.hello(project)
        # Five 1 MiB calls; the extension reads none of them, and each times out.
        await conn.send(*(call(i, i, MIB) for i in range(5)))
        got = await replies(conn, 5)
        assert {rid: r["error"]["code"] for rid, r in got.items()} == dict.fromkeys(
            range(5), "timeout"
        )
        hold.unlink()  # it reads again
        reply = await conn.request(call("after", 99))
        assert reply["success"] and reply["data"]["content"][0]["text"] == "99", reply

    frames = [f for f in seen(log) if f["type"] in ("tool_call", "cancel")]
    # Only the first call had been written (in part: the pipe holds less than
    # 1 MiB) when it stopped reading; it is followed by its `cancel`. The
    # four behind it were taken back from the queue: it never saw them.
    first = frames[0]
    assert (first["type"], first["n"]) == ("tool_call", 0)
    assert frames[1:] == [
        {"type": "cancel", "id": first["id"], "n": None},
        {"type": "tool_call", "id": frames[2]["id"], "n": 99},
    ]


async def test_an_extension_past_its_queue_bytes_is_stuck_failed_and_restarted(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    log, hold = stuck_extension(paths, short_tmp)
    config = msgspec.structs.replace(
        FAST,
        tool_timeout=WAIT,
        extension_queue_bytes=MIB,
        restart=RestartPolicy(policy="on-failure", backoff_initial=0.1),
    )
    await start_daemon(config)
    async with raw(paths) as conn:
        await conn.hello(project)
        # 400 KiB calls: the third would take the queue past 1 MiB.
        for i in range(3):
            await conn.send(call(i, i, 400 * 1024))
        got = await replies(conn, 3)
        for reply in got.values():
            assert reply["error"]["code"] == "extension_failed", reply
            assert reply["error"]["message"].startswith(
                "extension 'stuck' stopped reading its stdin ("
            ), reply
            assert reply["error"]["message"].endswith(
                "waiting); it is stopped, and restarted per its restart policy"
            ), reply
        hold.unlink()
        with trio.fail_after(WAIT):  # restarted by the policy
            while True:
                listed = await conn.request({"id": "l", "type": "list_extensions"})
                (ext,) = listed["data"]["extensions"]
                if ext["state"] == "ready" and ext["restarts"] == 1:
                    break
                await trio.sleep(0.05)
        assert ext["restart_reason"].startswith("stopped reading its stdin ("), ext
        reply = await conn.request(call("after", 7))
        assert reply["success"] and reply["data"]["content"][0]["text"] == "7", reply
    started = [f for f in seen(log) if f["type"] == "started"]
    assert len(started) == 2
    # The first process never got to read: only the call made after the
    # restart reached an extension.
    assert [f["n"] for f in seen(log) if f["type"] == "tool_call"] == [7]


async def test_unfinished_lines_share_a_budget_and_the_one_past_it_is_closed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon(msgspec.structs.replace(FAST, max_buffered_bytes=256 * 1024))
    async with raw(paths) as a, raw(paths) as b, raw(paths) as c, raw(paths) as d:
        conns = [a, b, c]
        for conn in [*conns, d]:
            await conn.hello(project)
        # Three unfinished 100 KiB lines: 300 KiB, over the 256 KiB budget.
        start = '{"id": "p", "type": "ping", "pad": "' + "x" * (100 * 1024)
        for conn in conns:
            await conn.send(start)
        # Exactly one of them takes the budget past its limit: that one is
        # closed with an error (the other two hold 200 KiB, within it).
        first: list[tuple[Conn, dict[str, Any]]] = []
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:

                async def first_frame(conn: Conn) -> None:
                    frame = await conn.recv()
                    first.append((conn, frame))
                    nursery.cancel_scope.cancel()

                for conn in conns:
                    nursery.start_soon(first_frame, conn)
        ((closed, error),) = first
        assert error["id"] is None and error["command"] is None and not error["success"]
        assert error["error"]["code"] == "busy"
        assert "max_buffered_bytes" in error["error"]["message"]
        assert await closed.at_eof()
        # Another connection is served meanwhile, and the two others finish
        # their lines.
        assert (await d.request({"id": 1, "type": "ping"}))["success"]
        for conn in conns:
            if conn is not closed:
                reply = await conn.request('"}\n')
                assert (reply["id"], reply["success"]) == ("p", True), reply
        # Their bytes are given back: a new 200 KiB line fits.
        await d.send('{"id": 2, "type": "ping", "pad": "' + "y" * (200 * 1024))
        reply = await d.request('"}\n')
        assert (reply["id"], reply["success"]) == (2, True), reply
