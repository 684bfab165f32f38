"""The registrations cache of lazy extensions (zotd/model/reg_cache.py): its
key, and its file. Plain functions, real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from zotd.model import reg_cache
from zotd.model.manifest import Found, Manifest
from zotd.model.reg_cache import Cached, CacheError
from zotd.protocol import extension as ep


def found(
    directory: Path, *args: str, exec_: str = "", on_path: bool = False, **fields: object
) -> Found:
    directory.mkdir(parents=True, exist_ok=True)
    exe = exec_ or str(directory / "run.sh")
    manifest = Manifest(name="x", exec=exe, args=list(args), **fields)  # type: ignore[arg-type]
    return Found(
        name="x",
        dir=directory,
        scope="global",
        manifest=manifest,
        argv=[exe, *args],
        exec_on_path=on_path,
    )


def tool(name: str) -> ep.RegisterTool:
    return ep.RegisterTool(name=name, schema=msgspec.Raw(b'{"type":"object"}'))


def test_the_key_follows_the_manifest_but_not_enabled(tmp_path: Path) -> None:
    f = found(tmp_path / "x")
    (tmp_path / "x" / "run.sh").write_text("echo\n")
    k = reg_cache.key(f)
    assert reg_cache.key(found(tmp_path / "x")) == k
    assert reg_cache.key(found(tmp_path / "x", enabled=False)) == k
    assert reg_cache.key(found(tmp_path / "x", description="other")) != k
    assert reg_cache.key(found(tmp_path / "x", "--flag")) != k


def test_the_key_follows_the_directory_and_the_files_its_argv_names(tmp_path: Path) -> None:
    script = tmp_path / "elsewhere" / "server.py"
    script.parent.mkdir()
    script.write_text("print(1)\n")
    f = found(tmp_path / "x", str(script))
    (tmp_path / "x" / "run.sh").write_text("echo\n")
    k = reg_cache.key(f)
    script.write_text("print(2)\n")  # outside its directory, named by an argument
    k2 = reg_cache.key(f)
    assert k2 != k
    (tmp_path / "x" / "helper.py").write_text("\n")  # inside it
    assert reg_cache.key(f) not in (k, k2)


def test_an_interpreter_on_path_counts_by_its_identity(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\n")
    f = found(tmp_path / "x", "server.py", exec_=str(python), on_path=True)
    (tmp_path / "x" / "server.py").write_text("\n")
    k = reg_cache.key(f)
    assert reg_cache.key(f) == k
    os.utime(python, ns=(1, 1))  # upgraded in place
    assert reg_cache.key(f) != k


def test_a_directory_that_links_out_cannot_be_cached(tmp_path: Path) -> None:
    f = found(tmp_path / "x")
    (tmp_path / "x" / "out").symlink_to("/etc")
    with pytest.raises(reg_cache.Uncacheable, match="links outside"):
        reg_cache.key(f)


def test_saved_and_loaded_privately_and_a_stale_key_is_no_cache(tmp_path: Path) -> None:
    file = reg_cache.path(tmp_path / "cache", "x")
    cached = Cached(
        [tool("t"), ep.RegisterCommand(name="c", description="d")], ["turn_start"], ["tool_call"]
    )
    assert reg_cache.save(file, "x", "sha256:1", cached)
    assert file.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o700
    assert reg_cache.load(file, "x", "sha256:1") == (cached, "")
    again, why = reg_cache.load(file, "x", "sha256:2")
    assert again is None and "changed since" in why
    assert reg_cache.load(tmp_path / "none.json", "x", "k") == (
        None,
        "no cache of its registrations yet",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"version": 1, "name": "x", "key": 3', "not a registrations cache"),
        (b"[]", "not a registrations cache"),
        (b'{"version": 1, "name": "y", "key": "k"}', "it is 'y''s"),
        (
            b'{"version": 1, "name": "x", "key": "k", "registrations": [{"type": "ready"}]}',
            "a registration that is not one",
        ),
        (
            b'{"version": 1, "name": "x", "key": "k", "registrations": [{"type": "register_tool"}]}',
            "not a registrations cache",
        ),
    ],
)
def test_a_corrupt_cache_says_why(tmp_path: Path, content: bytes, message: str) -> None:
    file = tmp_path / "x.json"
    file.write_bytes(content)
    with pytest.raises(CacheError, match=message):
        reg_cache.load(file, "x", "k")


def test_a_cache_too_large_is_not_written_nor_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "x.json"
    assert reg_cache.save(file, "x", "k", Cached([tool("t")]))
    monkeypatch.setattr(reg_cache, "MAX_CACHE_BYTES", 64)
    assert not reg_cache.save(file, "x", "k", Cached([tool("t" * 100)]))
    assert not file.exists()  # the old one is gone: it no longer says what runs
    file.write_text(json.dumps({"version": 1, "name": "x", "key": "k", "pad": "p" * 100}))
    with pytest.raises(CacheError, match="larger than"):
        reg_cache.load(file, "x", "k")


def test_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    file = tmp_path / "x.json"
    os.mkfifo(file)
    with pytest.raises(CacheError, match="FIFO"):
        reg_cache.load(file, "x", "k")
