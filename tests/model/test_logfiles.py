"""Extension logs: private, rotated by size, and written with timestamps."""

from __future__ import annotations

import stat
import time
from pathlib import Path

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


def test_small_logs_are_left_alone(tmp_path: Path) -> None:
    log = tmp_path / "ext-x.log"
    log.write_text("short\n")
    assert not logfiles.rotate_if_big(log, 1000)
    assert not logfiles.rotate_if_big(tmp_path / "missing.log", 1000)
    assert log.read_text() == "short\n"


def test_append_creates_private_files(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "ext-x.log"
    logfiles.append(log, "one\n")
    log.chmod(0o644)
    logfiles.append(log, "two\n")
    assert log.read_text() == "one\ntwo\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


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
