"""Logs on a full, read-only or broken disk, and logs that must be private.

Real daemons, real extension processes, real OS failures: a log whose name
is taken by a directory (the OS refuses to open it: EISDIR, root or not),
and, where the test may mount (root), a tiny tmpfs that is full (ENOSPC) or
read-only (EROFS).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from tests.conftest import FAST, StartDaemon, add_extension
from zotd.client import autostart, connect
from zotd.model.paths import Paths
from zotd.protocol.extension import TextBlock

#: The smallest max_log_bytes the config allows.
SMALL = 4096
SMALL_LOGS = msgspec.structs.replace(FAST, max_log_bytes=SMALL)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


async def test_the_logs_and_their_directory_are_made_private(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "chatty", "--tools", "t")
    log = paths.extension_log("chatty")
    log.parent.mkdir(parents=True)
    log.parent.chmod(0o777)
    log.write_text("old line\n" * 1000)  # past max_log_bytes: rotated at the start
    log.chmod(0o666)
    older = log.with_name("ext-chatty.log.1")
    older.write_text("older\n")
    older.chmod(0o666)
    await start_daemon(SMALL_LOGS)
    async with connect(paths.socket, cwd=project) as zot:
        assert [i.state for i in await zot.list_extensions()] == ["ready"]
    assert mode(log.parent) == 0o700
    assert {p.name: mode(p) for p in log.parent.iterdir()} == {
        "ext-chatty.log": 0o600,
        "ext-chatty.log.1": 0o600,
        "ext-chatty.log.2": 0o600,
    }


def test_the_daemons_own_log_is_made_private(paths: Paths) -> None:
    log = paths.daemon_log
    log.parent.mkdir(parents=True)
    log.parent.chmod(0o777)
    log.write_text("an older daemon's line\n")
    log.chmod(0o666)
    # A daemon that exits at once (a bad option): its error lands in the log.
    process = autostart.spawn(paths.socket, log, ["--no-such-option"])
    assert process.wait(timeout=30) != 0
    assert (mode(log.parent), mode(log)) == (0o700, 0o600)
    assert log.read_text().startswith("an older daemon's line\n")
    assert "no-such-option" in log.read_text()


async def serves(paths: Paths, project: Path, name: str) -> None:
    """``name`` is ready, answers a tool call, and is ready again after a restart."""
    async with connect(paths.socket, cwd=project) as zot:
        [before] = await zot.list_extensions()
        assert (before.name, before.state) == (name, "ready")
        assert (await zot.call_tool("echo", {"x": 1})).content == [TextBlock('{"x": 1}')]
        [after] = await zot.ext_reload(name)
        assert after.state == "ready" and after.pid != before.pid
        assert (await zot.call_tool("echo", {"x": 2})).content == [TextBlock('{"x": 2}')]


async def test_an_extension_whose_log_cannot_be_opened_starts_serves_and_restarts(
    start_daemon: StartDaemon, paths: Paths, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    add_extension(paths.extensions_dir, "nolog", "--tools", "echo")
    paths.extension_log("nolog").mkdir(parents=True)  # EISDIR for every open
    await start_daemon()
    await serves(paths, project, "nolog")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [w for w in warnings if "nolog" in w] == [
        f"extension nolog: cannot open {paths.extension_log('nolog')} (Is a directory): "
        "its stderr is dropped"
    ]


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[None]:
    """A tmpfs of ``size`` mounted at ``where`` (skips the test where mounting
    is not permitted: root only)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (root only): {mounted.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


async def test_a_full_disk_truncates_the_log_and_the_extension_still_starts(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "full", "--tools", "echo")
    log = paths.extension_log("full")
    with tmpfs(paths.logs_dir, "64k"):
        log.write_text("old line\n" * (3 * SMALL // 9))  # three times max_log_bytes
        filler = paths.logs_dir / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as f:  # ENOSPC: full
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        await start_daemon(SMALL_LOGS)
        await serves(paths, project, "full")
        text = log.read_text()
        assert "old line" not in text
        assert "without a copy: cannot write ext-full.log.1 (No space left on device)" in text
        assert log.stat().st_size <= 2 * SMALL
        assert not log.with_name("ext-full.log.1").exists()  # the partial copy is removed


async def test_a_read_only_log_directory_does_not_stop_an_extension(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "ro", "--tools", "echo")
    with tmpfs(paths.logs_dir, "64k"):
        subprocess.run(["mount", "-o", "remount,ro", str(paths.logs_dir)], check=True)
        with pytest.raises(OSError, match="Read-only file system"):
            os.open(paths.extension_log("ro"), os.O_WRONLY | os.O_CREAT, 0o600)
        await start_daemon()
        await serves(paths, project, "ro")


async def test_writing_several_times_max_log_bytes_leaves_the_log_bounded(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # A real extension floods its stderr past max_log_bytes at the start;
    # the rotation at its next start cannot copy (the names are taken) and
    # truncates the log all the same.
    add_extension(paths.extensions_dir, "loud", "--tools", "echo")
    log = paths.extension_log("loud")
    for n in (1, 2, 3):
        (log.parent / f"ext-loud.log.{n}" / "taken").mkdir(parents=True)
    await start_daemon(SMALL_LOGS)
    async with connect(paths.socket, cwd=project) as zot:
        for _ in range(5):
            with log.open("a") as f:  # what a chatty run leaves behind
                f.write("noise\n" * SMALL)  # six times max_log_bytes
            [info] = await zot.ext_reload("loud")
            assert info.state == "ready"
            text = log.read_text()
            assert "noise" not in text
            assert "] truncated this log (it passed 4096 bytes) without a copy" in text
            assert log.stat().st_size <= 2 * SMALL
