"""The outer scopes (explicit and global extensions, and the lazy ones'
caches) read once and checked as a whole: given back while nothing they
depend on changed, read again as soon as anything did
(zotd.model.outer_scopes)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import add_extension
from zotd.model import reg_cache, stamps
from zotd.model.discovery import read_outer
from zotd.model.manifest import Found
from zotd.model.outer_scopes import Outer, OuterScopes
from zotd.model.reg_cache import Cached
from zotd.model.stamps import Look
from zotd.protocol import extension as ep


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files made by the test count as long settled (the clock reads an hour on)."""
    monkeypatch.setattr(stamps, "now_ns", lambda: time.time_ns() + 3600 * 10**9)


class Outers:
    """An :class:`OuterScopes` over a global directory, counting the passes it reads."""

    def __init__(self, home: Path, explicit: Sequence[Path] = ()) -> None:
        self.global_dir = home / "extensions"
        self.global_dir.mkdir(parents=True, exist_ok=True)
        self.cache_dir = home / "cache" / "registrations"
        self.explicit = list(explicit)
        self.scopes = OuterScopes()
        self.passes = 0

    def _reader(
        self, explicit: Sequence[Path], global_dir: Path, path_env: str | None, look: Look
    ) -> tuple[list[Found], list[Found]]:
        self.passes += 1
        return read_outer(explicit, global_dir, path_env, look)

    def read(self) -> Outer:
        return self.scopes.read(
            self._reader,
            explicit=self.explicit,
            global_dir=self.global_dir,
            path_env=os.environ.get("PATH", ""),
            cache_dir=self.cache_dir,
            lazy=lambda f: f.manifest is not None and f.manifest.lazy,
        )

    def kept(self) -> Outer:
        """Reads until a pass is kept (the first fills the memos), then once more."""
        self.read()
        self.read()
        passes = self.passes
        outer = self.read()
        assert self.passes == passes, "the pass was not kept"
        return outer


def names(outer: Outer) -> list[str]:
    return [f.name for f in [*outer.explicit, *outer.global_]]


def write_cache(outers: Outers, found: Found, tools: list[str]) -> None:
    key = reg_cache.key(found)
    regs: list[ep.RegisterCommand | ep.RegisterTool] = [
        ep.RegisterTool(name=t, description="", schema=msgspec.Raw(b"{}")) for t in tools
    ]
    assert reg_cache.save(
        reg_cache.path(outers.cache_dir, found.name), found.name, key, Cached(regs)
    )


def cached_tools(outer: Outer, name: str) -> list[str] | str:
    read = next(v for (n, _), v in outer.caches.items() if n == name)
    assert isinstance(read, tuple), read
    cached, why = read
    return [r.name for r in cached.registrations] if cached is not None else why


def test_an_unchanged_pass_is_given_back_without_reading(tmp_path: Path, settled: None) -> None:
    outers = Outers(tmp_path)
    for name in ("a", "b"):
        add_extension(outers.global_dir, name)
    outer = outers.kept()
    assert names(outer) == ["a", "b"]


def test_each_read_is_a_copy_of_its_own(tmp_path: Path, settled: None) -> None:
    outers = Outers(tmp_path)
    add_extension(outers.global_dir, "a")
    first = outers.kept()
    first.global_[0].argv.append("--changed")
    first.global_[0].sharing = "shared"
    again = outers.read()
    assert "--changed" not in again.global_[0].argv
    assert again.global_[0].sharing == "workspace"


def test_a_manifest_edited_in_place_is_read_again(tmp_path: Path, settled: None) -> None:
    outers = Outers(tmp_path)
    directory = add_extension(outers.global_dir, "a")
    outers.kept()
    manifest = directory / "extension.json"
    fields = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**fields, "version": "0.0.2"}))
    outer = outers.read()
    assert outer.global_[0].manifest is not None
    assert outer.global_[0].manifest.version == "0.0.2"


def test_an_extension_added_or_removed_is_seen(tmp_path: Path, settled: None) -> None:
    outers = Outers(tmp_path)
    add_extension(outers.global_dir, "a")
    outers.kept()
    add_extension(outers.global_dir, "b")
    assert names(outers.read()) == ["a", "b"]
    outers.kept()
    for f in (outers.global_dir / "a").iterdir():
        f.unlink()
    (outers.global_dir / "a").rmdir()
    assert names(outers.read()) == ["b"]


def test_a_link_to_a_directory_made_later_is_seen(tmp_path: Path, settled: None) -> None:
    outers = Outers(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (outers.global_dir / "late").symlink_to(elsewhere)  # dangling: no extension yet
    assert names(outers.kept()) == []
    add_extension(tmp_path, "elsewhere", manifest={"name": "late"})
    assert names(outers.read()) == ["late"]


def test_an_explicit_directory_is_checked_too(tmp_path: Path, settled: None) -> None:
    mine = add_extension(tmp_path / "dev", "mine")
    outers = Outers(tmp_path / "home", explicit=[mine])
    assert names(outers.kept()) == ["mine"]
    (mine / "extension.json").write_text(json.dumps({"name": "mine"}))  # no exec: a broken one
    assert outers.read().explicit[0].error


def test_a_lazy_extensions_cache_is_read_with_it_and_again_when_rewritten(
    tmp_path: Path, settled: None
) -> None:
    outers = Outers(tmp_path)
    add_extension(outers.global_dir, "lz", manifest={"lazy": True})
    add_extension(outers.global_dir, "eager")
    found = outers.read().global_[1]
    write_cache(outers, found, ["t1"])
    outer = outers.kept()
    assert cached_tools(outer, "lz") == ["t1"]
    assert [n for n, _ in outer.caches] == ["lz"]  # (not the eager one's)
    write_cache(outers, found, ["t1", "t2"])
    assert cached_tools(outers.read(), "lz") == ["t1", "t2"]


def test_the_caches_are_checked_by_their_directory_once_and_a_deleted_one_is_seen(
    tmp_path: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each extension costs a workspace's start two ``stat`` calls (its
    directory and manifest), its cache none: a cache is only ever renamed
    into its directory, so the directory stands for all of them."""
    outers = Outers(tmp_path)
    lazy = 10
    for i in range(lazy):
        add_extension(outers.global_dir, f"lz{i}", manifest={"lazy": True})
    for found in outers.read().global_:
        write_cache(outers, found, [f"t-{found.name}"])
    outers.kept()
    calls: list[str] = []
    real_stat = os.stat

    def stat(path: str, *args: Any, **kwargs: Any) -> os.stat_result:
        calls.append(path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    outer = outers.read()
    monkeypatch.setattr(os, "stat", real_stat)
    assert cached_tools(outer, "lz3") == ["t-lz3"]
    assert str(outers.cache_dir) in calls
    assert not [c for c in calls if str(c).startswith(f"{outers.cache_dir}{os.sep}")]
    assert len(calls) <= 2 * lazy + 6  # (the global directory, the program, its lookup)
    reg_cache.path(outers.cache_dir, "lz3").unlink()  # by hand
    assert cached_tools(outers.read(), "lz3") == "no cache of its registrations yet"
    assert cached_tools(outers.read(), "lz4") == ["t-lz4"]


def test_a_changed_script_or_a_file_named_like_an_argument_invalidates_the_cache(
    tmp_path: Path, settled: None
) -> None:
    outers = Outers(tmp_path)
    directory = add_extension(outers.global_dir, "lz", manifest={"lazy": True})
    script = directory / "server.py"
    script.write_text("print('one')\n")
    manifest = directory / "extension.json"
    fields = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**fields, "args": ["server.py", "tool"]}))
    found = next(f for f in outers.read().global_ if f.name == "lz")
    write_cache(outers, found, ["t"])
    assert cached_tools(outers.kept(), "lz") == ["t"]
    script.write_text("print('two')\n")  # its content: another key
    assert cached_tools(outers.read(), "lz") != ["t"]
    found = next(f for f in outers.read().global_ if f.name == "lz")
    write_cache(outers, found, ["t"])
    assert cached_tools(outers.kept(), "lz") == ["t"]
    (directory / "tool").write_text("")  # an argument that names a file now
    assert cached_tools(outers.read(), "lz") != ["t"]


def test_a_pass_over_files_changed_just_now_is_not_kept(tmp_path: Path) -> None:
    """With the real clock: files written this second could change again
    within their stamps' tick, unseen; every read reads them again."""
    outers = Outers(tmp_path)
    add_extension(outers.global_dir, "a")
    for _ in range(3):
        assert names(outers.read()) == ["a"]
    assert outers.passes == 3


def test_a_copy_of_an_extension_keeps_every_field(tmp_path: Path) -> None:
    # copy_found names the fields one by one: a field added to Found and
    # left out there would come back as its default. Found's comparison
    # names them too: every field but passed_over counts.
    from msgspec.structs import replace

    from zotd.model.discovery import Aside
    from zotd.model.manifest import Manifest
    from zotd.model.rereads import copy_found
    from zotd.model.skills import Skill

    found = Found(
        name="a",
        dir=tmp_path,
        scope="project",
        manifest=Manifest(name="a", version="1.0.0", exec="x"),
        argv=["x", "--y"],
        error="broken",
        untrusted="not trusted",
        exec_on_path=True,
        warnings=["w"],
        skills=[Skill("a:s", str(tmp_path / "SKILL.md"), "")],
        sharing="shared",
        origin=tmp_path / ".mcp.json",
        passed_over=[Aside(Found(name="a", dir=tmp_path, scope="global"), "hidden", "")],
    )
    defaults = Found(name="", dir=Path("/"), scope="")
    every = Found.__struct_fields__
    changed = [name for name in every if getattr(found, name) != getattr(defaults, name)]
    assert set(changed) == set(every), "set every field"
    copy = copy_found(found)
    for name in every:
        if name != "passed_over":
            assert getattr(copy, name) == getattr(found, name), name
    assert copy.passed_over == [] and copy.argv is not found.argv
    assert copy == found  # (passed_over aside)
    for name in every:
        one = replace(defaults, **{name: getattr(found, name)})
        assert (one == defaults) is (name == "passed_over"), name
        assert (one != defaults) is (name != "passed_over"), name
