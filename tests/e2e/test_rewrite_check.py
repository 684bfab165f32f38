"""Checking rewritten tool arguments is bounded, off the event loop, and fails closed.

A guard rewrites a call's arguments into a string that makes the tool's
``pattern`` (``^(a+)+$``) backtrack for far longer than the intercept's
deadline. The daemon runs in-process, on the same event loop as the test:
had the check run on it, no other request would be answered until the
pattern gave up. A check that cannot finish in time blocks the call.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon, add_extension, add_newer_zot, pid_alive
from zotd.client import connect
from zotd.model.paths import Paths
from zotd.protocol.agent import InterceptData

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


def checkers() -> list[int]:
    """The pids of this process's children running the argument check
    (the daemon runs in this process)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        if parent == os.getpid() and b"zotd.model.args" in cmdline:
            found.append(int(entry.name))
    return found


async def wait_for_checker() -> int:
    with trio.fail_after(WAIT):
        while not checkers():
            await trio.sleep(0.01)
    return checkers()[0]


#: Long enough for a child to start on a busy machine; short, so the test is quick.
CONFIG = msgspec.structs.replace(FAST, intercept_timeout=3.0)

UNCHECKED = (
    "the arguments of tool 'match' as rewritten by 'fixer' could not be checked "
    "against its schema within the intercept's deadline: "
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_backtracking_pattern_is_checked_off_the_loop_and_fails_closed(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    setup(paths)
    elsewhere = short_tmp / "elsewhere"
    elsewhere.mkdir()
    await start_daemon(CONFIG)
    answered: list[str] = []
    verdicts: list[InterceptData] = []
    async with (
        connect(paths.socket, cwd=project) as zot,
        connect(paths.socket, cwd=elsewhere) as other,
    ):
        assert "match" in {t.name for t in await zot.list_tools()}
        assert await other.ping()

        async def intercept() -> None:
            verdicts.append(await zot.intercept("match", {"x": "a"}))
            answered.append("intercept")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(intercept)
            # The check is running (in a child: the pattern never gives up)...
            checker = await wait_for_checker()
            # ...and another workspace is answered meanwhile, before the verdict.
            with trio.fail_after(WAIT):
                tools = await other.list_tools()
            answered.append("list_tools")
        assert "match" in {t.name for t in tools}
        assert answered == ["list_tools", "intercept"]
        # The check did not finish in time: the rewrite is refused, not allowed.
        [verdict] = verdicts
        assert (verdict.block, verdict.extension, verdict.args) == (True, "fixer", None)
        assert verdict.reason.startswith(UNCHECKED), verdict.reason
        # The checker was killed at the deadline.
        assert not pid_alive(checker)
        # The same rewrite again is refused again (at once if the first check
        # ran long enough to be remembered as one that does not finish).
        with trio.fail_after(WAIT):
            again = await zot.intercept("match", {"x": "a"})
    assert (again.block, again.extension) == (True, "fixer")
    assert again.reason.startswith(UNCHECKED), again.reason
    assert "rewrite refused" in paths.extension_log("fixer").read_text()


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
