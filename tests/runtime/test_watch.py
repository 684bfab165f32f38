"""Watching a directory (zotd.runtime.watch): what counts as a change, the
debounce and the coalescing of restarts, in virtual time with a fed stream
of changes; and the real file watcher, on the real clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePath

import pytest
import trio
import trio.testing

from zotd.runtime.watch import (
    QUIET,
    Changes,
    changed,
    files_text,
    ignored,
    keep_watching,
    restart_on_changes,
    watch_files,
)

#: How long a real file system change may take to be seen on a busy machine.
REAL_WAIT = 30.0


@pytest.mark.parametrize(
    "path",
    [
        ".main.py.swp",
        "lib/.util.py.swx",
        "main.py~",
        "4913",
        ".#main.py",
        "#main.py#",
        "__pycache__/main.cpython-311.pyc",
        "lib/__pycache__/x.pyc",
        "util.pyc",
        ".git/index",
        ".git",
        "node_modules/left-pad/index.js",
        "web/node_modules/x/package.json",
        ".DS_Store",
    ],
)
def test_editor_and_tool_noise_is_ignored(path: str) -> None:
    assert ignored(PurePath(path))


@pytest.mark.parametrize(
    "path", ["main.py", "extension.json", "lib/util.py", "git.py", "modules/x.js", "swp.txt"]
)
def test_sources_are_changes(path: str) -> None:
    assert not ignored(PurePath(path))


def test_a_file_that_came_and_went_in_one_batch_is_no_change(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("x")
    batch = {
        (2, str(tmp_path / "main.py")),
        (1, str(tmp_path / "sedAb12")),
        (3, str(tmp_path / "sedAb12")),
        (3, str(tmp_path / "old.py")),
        (1, "/elsewhere/x.py"),
    }
    # sed -i's temporary file is gone; a deleted source is a change.
    assert changed(batch, tmp_path) == ["main.py", "old.py"]


def test_files_text() -> None:
    assert files_text(["main.py"]) == "main.py"
    assert files_text(["a", "b", "c"]) == "a, b, c"
    assert files_text(["a", "b", "c", "d", "e"]) == "a, b, c and 2 more"


class Restarts:
    """A restart that takes ``takes`` seconds and records when it ran and with what."""

    def __init__(self, takes: float = 0.0, fail_first: bool = False) -> None:
        self.takes = takes
        self.fail_first = fail_first
        self.runs: list[tuple[float, list[str]]] = []
        self.running = False
        self.overlapped = False

    async def __call__(self, names: list[str]) -> None:
        self.overlapped |= self.running
        self.running = True
        self.runs.append((trio.current_time(), names))
        try:
            await trio.sleep(self.takes)
            if self.fail_first and len(self.runs) == 1:
                raise RuntimeError("the first restart fails")
        finally:
            self.running = False


async def test_a_burst_of_changes_is_one_restart_once_it_is_quiet(
    autojump_clock: trio.testing.MockClock,
) -> None:
    changes, restarts = Changes(), Restarts()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart_on_changes, changes, restarts)
        for name in ["main.py", "lib.py", "main.py", "extension.json"]:
            changes.add([name])
            await trio.sleep(0.1)  # less than QUIET apart: one burst
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    # Once, QUIET after the last change (at 0.3), with each file once, in order.
    ((at, names),) = restarts.runs
    assert names == ["main.py", "lib.py", "extension.json"]
    assert at == pytest.approx(0.3 + QUIET)


async def test_no_change_no_restart(autojump_clock: trio.testing.MockClock) -> None:
    changes, restarts = Changes(), Restarts()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart_on_changes, changes, restarts)
        changes.add([])  # an empty batch (everything in it was noise)
        await trio.sleep(100)
        nursery.cancel_scope.cancel()
    assert restarts.runs == []


async def test_changes_during_a_restart_make_exactly_one_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    changes, restarts = Changes(), Restarts(takes=5.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart_on_changes, changes, restarts)
        changes.add(["main.py"])
        await trio.sleep(QUIET + 1)  # the restart is under way (it takes 5 s)
        assert restarts.running
        for i in range(20):  # a save every 0.2 s while it restarts
            changes.add([f"f{i % 3}.py"])
            await trio.sleep(0.2)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert not restarts.overlapped
    (first, first_names), (second, second_names) = restarts.runs
    assert (first, first_names) == (QUIET, ["main.py"])
    assert second_names == ["f0.py", "f1.py", "f2.py"]
    # After the first was done (at 5.3) and once the saves had stopped (the
    # last at 1.3 + 19 * 0.2 = 5.1) for QUIET.
    assert second == pytest.approx(max(QUIET + 5.0, 1.3 + 19 * 0.2 + QUIET))


async def test_a_restart_that_fails_does_not_end_the_watching(
    autojump_clock: trio.testing.MockClock,
) -> None:
    changes, restarts = Changes(), Restarts(fail_first=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restart_on_changes, changes, restarts)
        changes.add(["a.py"])
        await trio.sleep(5)
        changes.add(["b.py"])
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert [names for _, names in restarts.runs] == [["a.py"], ["b.py"]]


async def test_keep_watching_feeds_restarts_and_says_when_its_feed_fails(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    said: list[str] = []
    restarts = Restarts()

    async def feed(directory: Path, changes: Changes, ready: Callable[[], None]) -> None:
        ready()
        changes.add(["main.py"])
        await trio.sleep(10)
        raise FileNotFoundError(2, "No such file or directory")

    with trio.fail_after(100):
        await keep_watching(
            tmp_path, restarts, said.append, ready=lambda: said.append("ready"), feed=feed
        )  # returns: its feed is over
    assert [names for _, names in restarts.runs] == [["main.py"]]
    assert said == ["ready", f"stopped watching {tmp_path}: No such file or directory"]


# --- the real watcher: real files, the real clock -----------------------------------


async def test_the_real_watcher_sees_a_source_change_and_not_the_noise(tmp_path: Path) -> None:
    limiter = trio.to_thread.current_default_thread_limiter()
    tokens = limiter.total_tokens
    (tmp_path / "__pycache__").mkdir()
    changes = Changes()
    watching = trio.Event()
    with trio.fail_after(REAL_WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_files, tmp_path, changes, watching.set)
            await watching.wait()
            assert limiter.total_tokens == tokens + 1  # its own thread token, while it watches
            (tmp_path / ".main.py.swp").write_text("swap")
            (tmp_path / "__pycache__" / "main.cpython.pyc").write_text("code")
            (tmp_path / "main.py~").write_text("backup")
            (tmp_path / "main.py").write_text("print('hi')")
            assert await changes.settled(QUIET) == ["main.py"]
            nursery.cancel_scope.cancel()  # stops its thread
    assert limiter.total_tokens == tokens


async def test_the_real_watcher_of_a_missing_directory_raises(tmp_path: Path) -> None:
    with trio.fail_after(REAL_WAIT), pytest.raises(FileNotFoundError):
        await watch_files(tmp_path / "gone", Changes())
