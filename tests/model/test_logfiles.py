"""Extension logs: private, rotated by size, and written with timestamps."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.conftest import StartDaemon, add_extension
from tests.runtime.test_deadlines import mute, open_workspace
from zotd.client import connect
from zotd.model import logfiles
from zotd.model.config import Config
from zotd.model.paths import Paths


def test_rotation_keeps_three_older_copies(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    for generation in range(5):
        log.write_text(f"generation {generation}\n" * 100)
        assert logfiles.rotate_if_big(log, 1000)
        assert log.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ext-x.log",
        "ext-x.log.1",
        "ext-x.log.2",
        "ext-x.log.3",
    ]
    assert (tmp_path / "ext-x.log.1").read_text().startswith("generation 4")
    assert (tmp_path / "ext-x.log.3").read_text().startswith("generation 2")
    assert stat.S_IMODE((tmp_path / "ext-x.log.1").stat().st_mode) == 0o600


def occupy_rotated_names(log: Path) -> None:
    """Puts a non-empty directory at each of ``log``'s rotated names: no
    copy can be made (a real EISDIR / ENOTEMPTY from the OS, root or not)."""
    for n in range(1, logfiles.KEEP + 1):
        (log.parent / f"{log.name}.{n}" / "taken").mkdir(parents=True)


def test_a_log_that_cannot_be_copied_is_truncated_anyway(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    occupy_rotated_names(log)
    log.write_text("line\n" * 1000)
    rotation = logfiles.rotate_if_big(log, 1000)
    assert rotation is not None and rotation.size == 5000
    assert isinstance(rotation.copy_error, OSError)
    assert log.read_bytes() == b""
    assert (tmp_path / "ext-x.log.1").is_dir()  # left as it was


def test_a_copy_that_fails_once_begun_is_removed(tmp_path: Path) -> None:
    # The copy's target is created, then the source (a directory) cannot be read.
    with pytest.raises(IsADirectoryError):
        logfiles._copy(tmp_path, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_older_copies_are_made_private_as_they_shift(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    older = tmp_path / "ext-x.log.1"
    older.write_text("older\n")
    older.chmod(0o644)
    log.write_text("line\n" * 1000)
    assert logfiles.rotate_if_big(log, 1000)
    for name in ("ext-x.log.1", "ext-x.log.2"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    assert (tmp_path / "ext-x.log.2").read_text() == "older\n"


def test_a_symlink_at_a_logs_name_is_not_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("precious\n")
    log = tmp_path / "logs" / "ext-x.log"
    log.parent.mkdir()
    log.symlink_to(elsewhere)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        logfiles.append(log, "one\n")
    rotated = tmp_path / "logs" / "ext-y.log"
    rotated.write_text("line\n" * 1000)
    (tmp_path / "logs" / "ext-y.log.1").symlink_to(elsewhere)
    assert logfiles.rotate_if_big(rotated, 1000, keep=1)  # .1 replaced, not followed
    assert elsewhere.read_text() == "precious\n"


def test_small_logs_are_left_alone(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("short\n")
    assert not logfiles.rotate_if_big(log, 1000)
    assert not logfiles.rotate_if_big(tmp_path / "missing.log", 1000)
    assert not logfiles.rotate_if_big(tmp_path, 0)  # a directory at a log's name
    assert log.read_text() == "short\n"


def test_append_creates_private_files(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "ext-x.log"
    logfiles.append(log, "one\n")
    log.chmod(0o644)
    logfiles.append(log, "two\n")
    assert log.read_text() == "one\ntwo\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_wide_logs_directory_is_made_private(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    logs.chmod(0o777)
    (logs / "ext-x.log").write_text("old\n")
    (logs / "ext-x.log").chmod(0o666)
    logfiles.append(logs / "ext-x.log", "new\n")
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    assert stat.S_IMODE((logs / "ext-x.log").stat().st_mode) == 0o600


async def test_a_big_log_is_rotated_when_the_extension_starts(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "chatty", "--tools", "t")
    log = paths.extension_log("chatty")
    log.parent.mkdir(parents=True)
    log.write_text("old line\n" * 1000)
    await start_daemon(Config(ready_idle=0.1, max_log_bytes=4096))
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["t"]
    assert log.with_name("ext-chatty.log.1").read_text() == "old line\n" * 1000
    text = log.read_text()
    assert "old line" not in text
    assert "] started pid " in text  # the daemon's own lines carry a timestamp
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


async def test_a_running_extensions_log_is_rotated(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(
        nursery, paths, project, {"m": mute("m")}, Config(max_log_bytes=4096)
    )
    await ws.wait_settled()
    log = paths.extension_log("m")
    with log.open("a") as f:  # as if the extension wrote a lot to stderr
        f.write("noise\n" * 2000)
    await trio.sleep(11)
    rotated = log.with_name("ext-m.log.1")
    for _ in range(1500):  # the copy runs in a thread, on the real clock: up to 30 s
        if "rotated this log" in log.read_text():
            break
        await trio.to_thread.run_sync(time.sleep, 0.02)
    assert rotated.read_text().endswith("noise\n" * 2000)
    assert "rotated this log (it passed 4096 bytes) to ext-m.log.1" in log.read_text()


async def test_a_running_extensions_log_stays_bounded_when_no_copy_can_be_made(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(
        nursery, paths, project, {"m": mute("m")}, Config(max_log_bytes=4096)
    )
    await ws.wait_settled()
    log = paths.extension_log("m")
    occupy_rotated_names(log)
    for _ in range(5):  # 60,000 bytes written in all: 15 times max_log_bytes
        with log.open("a") as f:  # as if the extension wrote a lot to stderr
            f.write("noise\n" * 2000)
        with trio.fail_after(60):  # virtual seconds: a check comes within 10
            while "noise" in log.read_text():
                await trio.sleep(0.5)
        (line,) = log.read_text().splitlines()
        assert "] truncated this log (it passed 4096 bytes) without a copy: " in line
        assert log.stat().st_size <= 2 * 4096
    assert all(log.with_name(f"ext-m.log.{n}").is_dir() for n in (1, 2, 3))
