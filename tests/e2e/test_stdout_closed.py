"""An extension that closes its stdout and stays alive: its calls fail at once,
it is stopped the normal way and restarted (a real process, a real socket)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension, pid_alive
from zotd.client import ZotdError, connect
from zotd.model.config import RestartPolicy
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionStatePush

STDOUT_CLOSER = EXTENSIONS / "stdout_closer.py"


async def test_a_closed_stdout_fails_the_call_and_restarts_the_extension(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "closer", script=STDOUT_CLOSER)
    # A call that waited for its deadline would outlast the test's guard.
    config = msgspec.structs.replace(
        FAST, tool_timeout=600.0, restart=RestartPolicy(backoff_initial=0.1)
    )
    await start_daemon(config)
    async with connect(paths.socket, cwd=project) as zot:
        await zot.subscribe()
        first = (await zot.list_extensions())[0]
        assert (first.state, first.restarts) == ("ready", 0)
        states = []
        with trio.fail_after(30):  # a hang guard
            with pytest.raises(ZotdError) as err:
                await zot.call_tool("close", {})
            async for frame in zot.notifications():
                if isinstance(frame, ExtensionStatePush):
                    states.append(frame.state)
                    if frame.state == "ready":
                        break
        again = (await zot.list_extensions())[0]
    assert err.value.code == "extension_failed"
    assert err.value.message == (
        "extension 'closer' closed its stdout before replying (its process is still "
        "running, so no reply can come); it is being stopped"
    )
    assert states == ["stopping", "failed", "restarting", "starting", "ready"]
    assert (again.state, again.restarts) == ("ready", 1)
    assert again.restart_reason == "closed its stdout but kept running"
    assert again.pid != first.pid
    assert first.pid is not None and not pid_alive(first.pid)
    log = paths.extension_log("closer").read_text()
    assert "closed its stdout but kept running; stopping it" in log
    assert "did not exit after shutdown; sending SIGTERM" in log
