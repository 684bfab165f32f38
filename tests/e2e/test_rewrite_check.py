"""Checking rewritten tool arguments is bounded and off the event loop.

A guard rewrites a call's arguments into a string that makes the tool's
``pattern`` (``^(a+)+$``) backtrack for far longer than the intercept's
deadline. The daemon runs in-process, on the same event loop as the test:
had the check run on it, no ping would be answered until the pattern gave
up.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from tests.conftest import FAST, StartDaemon, add_extension, add_newer_zot
from zotd.client import connect
from zotd.model.paths import Paths

#: A tool whose schema backtracks catastrophically on ``BAD``.
TOOL = f"""
import json, sys
def emit(frame):
    sys.stdout.write(json.dumps(frame) + "\\n")
    sys.stdout.flush()
emit({{"type": "hello", "name": "redos", "version": "1.0.0", "capabilities": ["tools"]}})
emit({{"type": "register_tool", "name": "match", "description": "d", "schema": {
    json.dumps({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}})
}}})
emit({{"type": "ready"}})
for line in sys.stdin:
    pass
"""

BAD = "a" * 40 + "!"

#: The bound of every wait here: a hang guard, generous for a slow or busy machine.
WAIT = 30.0


def setup(paths: Paths, x: str = BAD) -> Path:
    """Installs the tool and a guard rewriting its ``x``; returns the guard's log."""
    script = paths.extensions_dir / "redos" / "redos.py"
    add_extension(paths.extensions_dir, "redos", script=script)
    script.write_text(TOOL)
    log = paths.home / "fixer.frames"
    add_newer_zot(
        paths.extensions_dir,
        "fixer",
        log,
        "--intercept",
        "tool_call",
        "--set",
        f"x={json.dumps(x)}",
    )
    return log


def asked(log: Path) -> bool:
    """Whether the guard has read its question."""
    return log.exists() and '"event_intercept"' in log.read_text()


async def test_a_backtracking_pattern_does_not_stall_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = setup(paths)
    await start_daemon()
    pinged: list[float] = []  # when each ping was answered
    async with (
        connect(paths.socket, cwd=project) as zot,
        connect(paths.socket, cwd=project) as other,
    ):
        assert "match" in {t.name for t in await zot.list_tools()}

        async def ping_meanwhile() -> None:
            while True:
                assert await other.ping()
                pinged.append(trio.current_time())
                await trio.sleep(0.01)

        async with trio.open_nursery() as nursery:
            seen: list[float] = []

            async def watch() -> None:
                while not asked(log):
                    await trio.sleep(0.01)
                seen.append(trio.current_time())

            nursery.start_soon(watch)
            nursery.start_soon(ping_meanwhile)
            start = trio.current_time()
            with trio.fail_after(WAIT):
                reply = await zot.intercept("match", {"x": "a"})
            answered = trio.current_time()
            nursery.cancel_scope.cancel()
    # The check did not finish in time: the checker's limits never block a call.
    assert (reply.block, reply.args, reply.rewritten_by) == (False, {"x": BAD}, ["fixer"])
    # The answer waited for the deadline (the pattern never gives up before it)...
    assert answered - start >= FAST.intercept_timeout
    # ...and meanwhile, once the guard had its question, other requests were answered.
    assert seen
    assert [t for t in pinged if seen[0] < t < answered]


async def test_a_pattern_that_fails_in_time_refuses_the_rewrite(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    setup(paths, "b")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        reply = await zot.intercept("match", {"x": "a"})
    assert (reply.block, reply.extension) == (True, "fixer")
    assert reply.reason == (
        "the arguments of tool 'match' as rewritten by 'fixer' do not fit its schema: "
        "$.x: 'b' does not match '^(a+)+$'"
    )
    assert "rewrite refused" in paths.extension_log("fixer").read_text()
