"""A spawn that fails for a transient reason is retried with the restart
policy's backoff; one that fails for good is left failed at once (the real
daemon, real processes and a real socket).

Running out of descriptors for real (a lowered RLIMIT_NOFILE) would starve
the daemon itself, so the first spawns are refused by a wrapper around the
real spawner (:class:`tests.fakes.FailingSpawner`), as ``spawn`` refuses
them under EMFILE; the permanent errors are the kernel's own.
"""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon, add_extension, pid_alive
from tests.fakes import FailingSpawner
from zotd.client import connect
from zotd.model.config import RestartPolicy
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionStatePush
from zotd.protocol.extension import TextBlock
from zotd.runtime.process import spawn

RESTARTING = msgspec.structs.replace(FAST, restart=RestartPolicy(backoff_initial=0.1))


async def test_emfile_at_spawn_is_retried_until_it_starts(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "busy", "--tools", "echo")
    failing = FailingSpawner(spawn, code=errno.EMFILE, times=2)
    await start_daemon(RESTARTING, spawner=failing)
    reason = f"cannot start {sys.executable}: Too many open files (EMFILE)"
    async with connect(paths.socket, cwd=project) as zot:
        await zot.subscribe()
        with trio.fail_after(30):  # a hang guard
            ext = (await zot.list_extensions())[0]
            while ext.state != "ready":
                async for frame in zot.notifications():
                    if isinstance(frame, ExtensionStatePush) and frame.state == "ready":
                        break
                ext = (await zot.list_extensions())[0]
            result = await zot.call_tool("echo", {"x": 1})
    assert failing.refused == 2
    assert (ext.state, ext.restarts, ext.restart_reason) == ("ready", 2, reason)
    assert ext.pid is not None and pid_alive(ext.pid)
    assert result.content == [TextBlock('{"x": 1}')]
    log = paths.extension_log("busy").read_text()
    assert f"{reason}; restarting in 0.1 s" in log
    assert f"{reason}; restarting in 0.2 s" in log


def bad_executable(root: Path, name: str, content: bytes) -> None:
    """An extension whose ``exec`` is an executable file the kernel cannot run
    (``{dir}`` in ``content`` is its directory, which holds a file ``plain``
    that is not executable)."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "plain").write_text("not a program\n")
    program = directory / "run"
    program.write_bytes(content.replace(b"{dir}", str(directory).encode()))
    program.chmod(0o755)
    manifest = {"name": name, "version": "0.0.1", "exec": "./run"}
    (directory / "extension.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (b"#!/nonexistent/interpreter\n", "No such file or directory (ENOENT)"),
        (b"#!{dir}/plain\n", "Permission denied (EACCES)"),
        (b"\x7fELF\x00\x00garbage", "Exec format error (ENOEXEC)"),
    ],
)
async def test_a_permanent_spawn_error_fails_at_once(
    start_daemon: StartDaemon, paths: Paths, project: Path, content: bytes, text: str
) -> None:
    bad_executable(paths.extensions_dir, "bad", content)
    await start_daemon(RESTARTING)
    async with connect(paths.socket, cwd=project) as zot:
        ext = (await zot.list_extensions())[0]
        with trio.fail_after(30):  # a hang guard
            while ext.state == "starting":
                await trio.sleep(0.05)
                ext = (await zot.list_extensions())[0]
    # "failed", not "restarting" (decided as the run ends, with no pause between).
    assert (ext.state, ext.restarts) == ("failed", 0)
    assert ext.last_error == f"cannot start {paths.extensions_dir / 'bad' / 'run'}: {text}"
