"""``extension_state`` pushes are coalesced (issue 15): an extension that
registers thousands of tools after ``ready`` costs a few pushes, each with
the latest of its registrations, not one push of everything per tool; and
a change of state is still pushed at once, in order.

Real daemon (in this process), real socket, a real extension process
(tests/extensions/late_tools.py). Nothing here asserts a time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.conftest import EXTENSIONS, StartDaemon, add_extension
from zotd.client import ZotdError, connect
from zotd.model.config import Config, RestartPolicy
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionStatePush
from zotd.protocol.extension import TextBlock

LATE_TOOLS = EXTENSIONS / "late_tools.py"

#: Tools the burst registers after ready.
BURST = 3000


async def test_a_burst_of_late_registrations_is_pushed_in_a_few_frames(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "burst", script=LATE_TOOLS)
    add_extension(paths.extensions_dir, "calm", "--tools", "echo")
    await start_daemon()
    frames: list[ExtensionStatePush] = []
    everything = trio.Event()
    async with (
        connect(paths.socket, cwd=project) as watcher,
        connect(paths.socket, cwd=project) as other,
        trio.open_nursery() as nursery,
    ):
        await watcher.subscribe()

        async def watch() -> None:
            async for frame in watcher.notifications():
                if isinstance(frame, ExtensionStatePush) and frame.extension == "burst":
                    frames.append(frame)
                    if len(frame.tools) == BURST:
                        everything.set()
                        return

        nursery.start_soon(watch)
        with trio.fail_after(60):  # a hang guard only
            await other.invoke_command("burst", str(BURST))
            # Half the burst is registered (the rest waits for /resume):
            # another client is answered while its pushes are under way.
            half = 0
            while half < BURST // 2:
                half = sum(t.extension == "burst" for t in await other.list_tools())
            echo = await other.call_tool("echo", {"during": "burst"})
            assert echo.content == [TextBlock('{"during": "burst"}')]
            assert not everything.is_set()
            await other.invoke_command("resume")
            answered = 0
            while not everything.is_set():  # and while the second half is read
                await other.call_tool("echo", {"i": answered})
                answered += 1
            await everything.wait()
        nursery.cancel_scope.cancel()
    # One push per registration would be 3,000 frames, the last ones each
    # listing ~3,000 tools: O(tools²) bytes.
    assert len(frames) < 100, len(frames)
    last = frames[-1]
    assert last.state == "ready"
    assert sorted(t.name for t in last.tools) == sorted(f"t{i}" for i in range(BURST))
    assert [c.name for c in last.commands] == ["burst", "resume"]
    # Each push is the latest: the tools only grow, frame to frame.
    sizes = [len(f.tools) for f in frames]
    assert sizes == sorted(sizes)


async def test_changes_of_state_are_each_pushed_in_order(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "phoenix", "--commands", "boom", "--tools", "echo")
    config = Config(ready_idle=0.1, restart=RestartPolicy(backoff_initial=0.1))
    await start_daemon(config)
    async with connect(paths.socket, cwd=project) as zot:
        await zot.subscribe()
        with pytest.raises(ZotdError):
            await zot.invoke_command("boom")
        states = []
        with trio.fail_after(30):  # a hang guard
            async for frame in zot.notifications():
                if isinstance(frame, ExtensionStatePush):
                    states.append(frame.state)
                    if frame.state == "ready":
                        break
        await zot.ext_disable("phoenix")
        with trio.fail_after(30):
            async for frame in zot.notifications():
                if isinstance(frame, ExtensionStatePush):
                    states.append(frame.state)
                    if frame.state == "disabled":
                        break
    # Not one state coalesced away: failed, then restarting, then the new
    # process starting and ready; then stopping, exited, and the disabled one.
    assert states == [
        "failed",
        "restarting",
        "starting",
        "ready",
        "stopping",
        "exited",
        "disabled",
    ]
