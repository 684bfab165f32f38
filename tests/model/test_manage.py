"""zotd.model.manage: the file operations behind `zot ext`, without a daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import add_extension
from zotd.model import manage
from zotd.model.manifest import Found, load, read_manifest


def test_install_copies_and_loads(tmp_path: Path) -> None:
    source = add_extension(tmp_path / "src", "copyme", "--tools", "t")
    (source / "data").mkdir()
    (source / "data" / "file.txt").write_text("kept")
    dest = tmp_path / "exts"
    found = manage.install(str(source), dest, "global")
    assert (found.name, found.dir, found.scope, found.error) == (
        "copyme",
        dest / "copyme",
        "global",
        "",
    )
    assert (dest / "copyme" / "data" / "file.txt").read_text() == "kept"
    assert [p.name for p in dest.iterdir()] == ["copyme"]  # no staging left


def test_install_uses_the_manifest_name_not_the_directory_name(tmp_path: Path) -> None:
    source = add_extension(tmp_path / "src", "real-name")
    renamed = source.rename(tmp_path / "src" / "checkout-dir")
    found = manage.install(str(renamed), tmp_path / "exts", "global")
    assert found.dir == tmp_path / "exts" / "real-name"


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (None, "is not a zot extension: it has no extension.json"),
        ("{nope", "is not a zot extension"),
        ('{"name": "x"}', "`exec`"),
        ('{"name": "../x", "exec": "./x"}', "invalid name '../x'"),
    ],
)
def test_install_rolls_back_on_a_bad_manifest(
    tmp_path: Path, manifest: str | None, message: str
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    if manifest is not None:
        (source / "extension.json").write_text(manifest)
    dest = tmp_path / "exts"
    with pytest.raises(manage.ManageError, match=message.replace("(", r"\(")):
        manage.install(str(source), dest, "global")
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "x").exists()


def test_install_refuses_to_overwrite(tmp_path: Path) -> None:
    dest = tmp_path / "exts"
    add_extension(dest, "taken", "--tools", "old")
    source = add_extension(tmp_path / "src", "taken", "--tools", "new")
    with pytest.raises(manage.ManageError) as err:
        manage.install(str(source), dest, "global")
    assert str(err.value) == (
        f"an extension named 'taken' is already installed in {dest / 'taken'}; "
        "remove it first with `zot ext remove taken`"
    )
    assert "old" in (dest / "taken" / "extension.json").read_text()
    assert [p.name for p in dest.iterdir()] == ["taken"]


def test_install_refuses_a_source_holding_the_destination(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "extension.json").parent.mkdir()
    (project / "extension.json").write_text('{"name": "p", "exec": "./p"}')
    dest = project / ".zot" / "extensions"
    with pytest.raises(manage.ManageError, match="into a directory inside itself"):
        manage.install(str(project), dest, "project")
    assert list(dest.iterdir()) == []


def test_install_missing_source(tmp_path: Path) -> None:
    with pytest.raises(manage.ManageError, match="no such directory"):
        manage.install(str(tmp_path / "nothing"), tmp_path / "exts", "global")


def _bare_repo(tmp_path: Path) -> Path:
    work = add_extension(tmp_path / "work", "cloned", "--tools", "t")

    def git(*args: str, cwd: Path) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c", cwd=work)
    bare = tmp_path / "cloned.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare


def test_install_clones_bare_repositories_and_file_urls(tmp_path: Path) -> None:
    bare = _bare_repo(tmp_path)
    assert manage.is_git_source(str(bare))
    found = manage.install(str(bare), tmp_path / "a", "global")
    assert found.dir == tmp_path / "a" / "cloned"
    # Shallow: one commit of history.
    log = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"], cwd=found.dir, capture_output=True, text=True
    )
    assert log.stdout.strip() == "1"
    found = manage.install(bare.as_uri(), tmp_path / "b", "global")
    assert (found.dir / "extension.json").is_file()


def test_failing_clone_leaves_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "exts"
    with pytest.raises(manage.ManageError) as err:
        manage.install((tmp_path / "none.git").as_uri(), dest, "global")
    assert str(err.value).startswith(f"git clone {(tmp_path / 'none.git').as_uri()} failed: ")
    assert list(dest.iterdir()) == []


@pytest.mark.parametrize(
    ("source", "is_git"),
    [
        ("https://example.com/x.git", True),
        ("ssh://git@example.com/x", True),
        ("git@example.com:owner/x.git", True),
        ("file:///srv/x.git", True),
        ("./some/dir", False),
        ("plain", False),
    ],
)
def test_is_git_source(source: str, is_git: bool) -> None:
    assert manage.is_git_source(source) is is_git


def test_set_enabled_keeps_fields_and_order(tmp_path: Path) -> None:
    directory = tmp_path / "e"
    directory.mkdir()
    original = {"name": "e", "version": "1", "enabled": True, "exec": "./e", "x-extra": [1, "é"]}
    (directory / "extension.json").write_text(json.dumps(original))
    found = Found(name="e", dir=directory, scope="global")
    manage.set_enabled(found, False)
    text = (directory / "extension.json").read_text()
    assert list(json.loads(text).items()) == [*{**original, "enabled": False}.items()]
    assert "é" in text  # not escaped
    manage.set_enabled(found, True)
    assert json.loads((directory / "extension.json").read_text()) == original
    assert sorted(p.name for p in directory.iterdir()) == ["extension.json"]  # no temp file


def test_set_enabled_adds_the_key_at_the_end(tmp_path: Path) -> None:
    directory = tmp_path / "e"
    directory.mkdir()
    (directory / "extension.json").write_text('{"name": "e", "exec": "./e"}')
    manage.set_enabled(Found(name="e", dir=directory, scope="global"), False)
    assert list(json.loads((directory / "extension.json").read_text())) == [
        "name",
        "exec",
        "enabled",
    ]


def test_set_enabled_on_a_broken_manifest(tmp_path: Path) -> None:
    directory = tmp_path / "e"
    directory.mkdir()
    (directory / "extension.json").write_text("[1, 2]")
    with pytest.raises(manage.ManageError, match="is not a JSON object"):
        manage.set_enabled(Found(name="e", dir=directory, scope="global"), True)


def test_remove_only_installed_directories(tmp_path: Path) -> None:
    global_dir = tmp_path / "exts"
    installed = add_extension(global_dir, "g")
    project = add_extension(tmp_path / "proj" / ".zot" / "extensions", "p")
    stray = add_extension(tmp_path / "work", "s")
    manage.remove(Found(name="g", dir=installed, scope="global"), global_dir=global_dir)
    manage.remove(Found(name="p", dir=project, scope="project"), global_dir=global_dir)
    assert not installed.exists() and not project.exists()
    with pytest.raises(manage.ManageError, match="is not an installed extension"):
        manage.remove(Found(name="s", dir=stray, scope="explicit"), global_dir=global_dir)
    assert stray.exists()


def test_find_lists_the_names_there_are(tmp_path: Path) -> None:
    found = [Found(name=n, dir=tmp_path / n, scope="global") for n in ("b", "a")]
    assert manage.find("a", found) is found[1]
    with pytest.raises(manage.ManageError) as err:
        manage.find("c", found)
    assert str(err.value) == "no extension named 'c' (installed: a, b)"
    with pytest.raises(manage.ManageError, match=r"\(installed: none\)"):
        manage.find("c", [])


def test_scope_root(tmp_path: Path) -> None:
    assert manage.scope_root("global", workspace=None, global_dir=tmp_path) == tmp_path
    assert (
        manage.scope_root("project", workspace=tmp_path, global_dir=tmp_path / "g")
        == tmp_path / ".zot" / "extensions"
    )
    with pytest.raises(manage.ManageError, match="scope must be 'global' or 'project'"):
        manage.scope_root("everywhere", workspace=tmp_path, global_dir=tmp_path)


# --- staging directories left by killed installs -------------------------------------------


def _staging_of_a_dead_process(dest: Path) -> Path:
    """A staging directory made by :func:`manage.make_staging` in a process that
    then died without cleaning up, as a SIGKILLed install leaves it."""
    code = (
        "import sys; from pathlib import Path; from zotd.model import manage; "
        "s = manage.make_staging(Path(sys.argv[1])); (s / 'tree').mkdir(); "
        "(s / 'tree' / 'half.txt').write_text('half'); print(s)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(dest)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return Path(out.stdout.strip())


def test_the_next_install_removes_staging_left_by_a_dead_installer(tmp_path: Path) -> None:
    dest = tmp_path / "exts"
    manage.install(str(add_extension(tmp_path / "src", "mine")), dest, "global")
    left = _staging_of_a_dead_process(dest)
    assert left.name.startswith(manage.STAGING_PREFIX) and left.is_dir()
    manage.install(str(add_extension(tmp_path / "src", "next")), dest, "global")
    assert sorted(p.name for p in dest.iterdir()) == ["mine", "next"]
    assert json.loads((dest / "mine" / "extension.json").read_text())["name"] == "mine"


def test_only_staging_nobody_uses_is_removed(tmp_path: Path) -> None:
    dest = tmp_path / "exts"
    dest.mkdir()
    dead = _staging_of_a_dead_process(dest)
    ours = manage.make_staging(dest)  # this process is alive: an install in progress
    old = manage.make_staging(dest)
    day_ago = time.time() - manage.STALE_STAGING_AGE - 60
    os.utime(old, (day_ago, day_ago))  # older than any install takes
    nameless = dest / ".install-abcdefgh"  # no pid in the name, recent: kept
    nameless.mkdir()
    other = dest / ".hidden-by-the-user"
    other.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("x")
    link = dest / ".install-1-link"  # a link is never followed nor removed
    link.symlink_to(target)
    assert sorted(manage.remove_stale_staging(dest)) == sorted([dead, old])
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [ours.name, nameless.name, other.name, link.name]
    )
    assert (target / "precious").read_text() == "x"
    assert manage.remove_stale_staging(tmp_path / "missing") == []


# --- concurrent enable/disable -------------------------------------------------------------


def test_concurrent_toggles_never_fail_and_readers_see_whole_manifests(tmp_path: Path) -> None:
    """100 enable/disable at once on one extension (as 100 clients would ask a
    daemon, or 100 `zot ext` without one) while readers keep decoding it."""
    directory = add_extension(tmp_path / "exts", "busy", manifest={"description": "x" * 60_000})
    (directory / "extension.json").chmod(0o644)
    found = load(directory, "global")
    start = threading.Barrier(100 + 4)
    toggling = threading.Event()
    errors: list[BaseException] = []
    reads: list[int] = []

    def toggle(i: int) -> None:
        try:
            start.wait(timeout=30)
            manage.set_enabled(found, i % 2 == 0)
        except BaseException as exc:  # every failure is the finding
            errors.append(exc)

    def read() -> None:
        start.wait(timeout=30)
        n = 0
        while not toggling.is_set() or n == 0:
            try:
                data = json.loads((directory / "extension.json").read_text())
                assert data["name"] == "busy" and isinstance(data.get("enabled", True), bool)
                assert data["description"] == "x" * 60_000
            except BaseException as exc:
                errors.append(exc)
                return
            n += 1
        reads.append(n)

    workers = [threading.Thread(target=toggle, args=(i,)) for i in range(100)]
    readers = [threading.Thread(target=read) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads take turns often, as processes on many cores would
    try:
        for t in workers + readers:
            t.start()
        for t in workers:
            t.join(timeout=60)
        toggling.set()
        for t in readers:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(reads) == 4
    assert [p.name for p in directory.iterdir()] == ["extension.json"]  # no temporary left
    assert (directory / "extension.json").stat().st_mode & 0o777 == 0o644
    assert isinstance(read_manifest(directory).enabled, bool)
