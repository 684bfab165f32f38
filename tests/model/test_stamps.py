"""Memoized reads: a result comes back while its files are unchanged, and
never once one of them changed (zotd.model.stamps, zotd.model.rereads)."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from zotd.model import reg_cache, rereads, stamps
from zotd.model.manifest import Scope
from zotd.model.stamps import Memo


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files made by the test count as long settled (the clock reads an hour on)."""
    monkeypatch.setattr(stamps, "now_ns", lambda: time.time_ns() + 3600 * 10**9)


def counting(memo: Memo[str, str], path: Path) -> tuple[list[int], object]:
    calls: list[int] = []

    def work() -> tuple[str, list[str]]:
        calls.append(1)
        return path.read_text(), [str(path)]

    return calls, work


def test_a_result_is_reused_while_its_file_is_unchanged(tmp_path: Path, settled: None) -> None:
    memo: Memo[str, str] = Memo()
    f = tmp_path / "a.txt"
    f.write_text("one")
    calls, work = counting(memo, f)
    assert memo.get("k", work) == "one"  # type: ignore[arg-type]
    assert memo.get("k", work) == "one"  # type: ignore[arg-type]
    assert len(calls) == 1


def test_a_replaced_file_is_read_again(tmp_path: Path, settled: None) -> None:
    memo: Memo[str, str] = Memo()
    f = tmp_path / "a.txt"
    f.write_text("one")
    calls, work = counting(memo, f)
    memo.get("k", work)  # type: ignore[arg-type]
    tmp = tmp_path / "a.new"
    tmp.write_text("two")
    os.replace(tmp, f)  # same size, same second: another inode
    assert memo.get("k", work) == "two"  # type: ignore[arg-type]
    f.write_text("three!")  # in place, another size
    assert memo.get("k", work) == "three!"  # type: ignore[arg-type]
    f.unlink()
    with pytest.raises(FileNotFoundError):
        memo.get("k", work)  # type: ignore[arg-type]
    assert len(calls) == 4


def test_a_file_changed_just_now_is_not_trusted_to_stay(tmp_path: Path) -> None:
    """With the real clock: a file written this second could change again
    within its time stamp's tick, unseen; its result is read every time."""
    memo: Memo[str, str] = Memo()
    f = tmp_path / "a.txt"
    f.write_text("one")
    calls, work = counting(memo, f)
    memo.get("k", work)  # type: ignore[arg-type]
    memo.get("k", work)  # type: ignore[arg-type]
    assert len(calls) == 2


def test_what_names_no_paths_is_never_kept(settled: None) -> None:
    memo: Memo[str, int] = Memo()
    calls: list[int] = []

    def work() -> tuple[int, None]:
        calls.append(1)
        return len(calls), None

    assert memo.get("k", work) == 1
    assert memo.get("k", work) == 2


def test_the_memo_is_bounded(tmp_path: Path, settled: None) -> None:
    memo: Memo[int, int] = Memo(size=3)
    f = tmp_path / "a"
    f.write_text("x")
    calls: list[int] = []

    def work(i: int) -> tuple[int, list[str]]:
        calls.append(i)
        return i, [str(f)]

    for i in range(5):
        memo.get(i, lambda i=i: work(i))  # type: ignore[misc]
    memo.get(4, lambda: work(4))
    memo.get(0, lambda: work(0))  # pushed out: read again
    assert calls == [0, 1, 2, 3, 4, 0]


def write_ext(root: Path, name: str, manifest: dict[str, object]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "extension.json").write_text(json.dumps({"name": name, "version": "1.0.0", **manifest}))
    return d


def executable(path: Path, body: str = "#!/bin/sh\n") -> Path:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_manifest_edit_shows_in_the_next_discovery(tmp_path: Path, settled: None) -> None:
    d = write_ext(tmp_path, "e", {"exec": sys.executable, "description": "first"})
    first = rereads.load_found(d, Scope.GLOBAL)
    assert first.manifest is not None and first.manifest.description == "first"
    (d / "extension.json").write_text(
        json.dumps(
            {"name": "e", "version": "1.0.0", "exec": sys.executable, "description": "second!"}
        )
    )
    again = rereads.load_found(d, Scope.GLOBAL)
    assert again.manifest is not None and again.manifest.description == "second!"


def test_a_copy_is_given_each_time(tmp_path: Path, settled: None) -> None:
    d = write_ext(tmp_path, "e", {"exec": sys.executable, "args": ["x.py"]})
    one = rereads.load_found(d, Scope.GLOBAL)
    one.argv.append("changed by a caller")
    one.sharing = "shared"
    two = rereads.load_found(d, Scope.GLOBAL)
    assert two.argv == [sys.executable, "x.py"]
    assert two.sharing != "shared"


def two_on_path(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two empty directories, ``early`` before ``late`` on a PATH of their own."""
    early, late = tmp_path / "early", tmp_path / "late"
    early.mkdir()
    late.mkdir()
    return early, late, f"{early}{os.pathsep}{late}"


def test_a_program_put_earlier_on_path_is_found(tmp_path: Path, settled: None) -> None:
    """``"exec": "tool"`` resolves on PATH; a ``tool`` installed into an
    earlier PATH directory afterwards is what runs next."""
    early, late, path_env = two_on_path(tmp_path)
    executable(late / "tool")
    d = write_ext(tmp_path / "exts", "e", {"exec": "tool"})
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(late / "tool")]
    executable(early / "tool")
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(early / "tool")]


def test_path_directories_after_the_one_that_has_the_program_are_not_looked_at_again(
    tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup along PATH depends on the directories up to the first that
    has the program: a change further along reads nothing again; the
    program gone from there, the lookup goes on."""
    early, late, path_env = two_on_path(tmp_path)
    executable(early / "tool")
    d = write_ext(tmp_path / "exts", "e", {"exec": "tool"})
    from zotd.model import manifest

    loads: list[object] = []
    real_load = manifest.load

    def load(*args: Any) -> manifest.Found:
        loads.append(args)
        return real_load(*args)

    monkeypatch.setattr(manifest, "load", load)
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(early / "tool")]
    executable(late / "tool")  # further along: changes nothing
    (late / "other").write_text("")
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(early / "tool")]
    assert len(loads) == 1
    (early / "tool").unlink()
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(late / "tool")]
    assert len(loads) == 2


def test_a_program_made_executable_is_found(tmp_path: Path, settled: None) -> None:
    """A candidate earlier on PATH that becomes executable (chmod, no new
    directory entry) is found too."""
    early, late, path_env = two_on_path(tmp_path)
    executable(late / "tool")
    (early / "tool").write_text("#!/bin/sh\n")  # not executable yet
    d = write_ext(tmp_path / "exts", "e", {"exec": "tool"})
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(late / "tool")]
    (early / "tool").chmod(0o755)
    assert rereads.load_found(d, Scope.GLOBAL, path_env).argv == [str(early / "tool")]


def test_an_edited_script_changes_the_cache_key(tmp_path: Path, settled: None) -> None:
    script = tmp_path / "server.py"
    script.write_text("print('one')\n")
    d = write_ext(tmp_path / "exts", "e", {"exec": sys.executable, "args": [str(script)]})
    found = rereads.load_found(d, Scope.GLOBAL)
    first = rereads.cache_key(found)
    assert rereads.cache_key(found) == first == reg_cache.key(found)
    script.write_text("print('two')\n")
    assert rereads.cache_key(found) != first
    assert rereads.cache_key(found) == reg_cache.key(found)
    (d / "notes.txt").write_text("a file added to its directory")
    assert rereads.cache_key(found) == reg_cache.key(found)


def test_a_rewritten_cache_is_read_again(tmp_path: Path, settled: None) -> None:
    d = write_ext(tmp_path / "exts", "e", {"exec": sys.executable, "args": ["x.py"]})
    found = rereads.load_found(d, Scope.GLOBAL)
    key = rereads.cache_key(found)
    file = tmp_path / "cache" / "e.json"
    assert rereads.load_cache(file, "e", key) == (None, "no cache of its registrations yet")
    reg_cache.save(file, "e", key, reg_cache.Cached(events=["session_start"]))
    cached, _ = rereads.load_cache(file, "e", key)
    assert cached is not None and cached.events == ["session_start"]
    reg_cache.save(file, "e", key, reg_cache.Cached(events=["turn_end"]))
    cached, _ = rereads.load_cache(file, "e", key)
    assert cached is not None and cached.events == ["turn_end"]
