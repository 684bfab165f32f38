"""Project-local extensions run only once the user trusts them, pinned to their content."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import FAKE, StartDaemon, add_extension
from zotd.client import ZotdError, connect
from zotd.model import trust
from zotd.model.config import Config
from zotd.model.manifest import Scope, load
from zotd.model.paths import Paths

#: The daemon's defaults for trust (unlike tests.conftest.FAST).
STRICT = Config(ready_idle=0.1)


def project_ext(project: Path, name: str, *args: str) -> Path:
    return add_extension(project / ".zot" / "extensions", name, *args)


async def test_untrusted_until_trusted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    project_ext(project, "repo-tool", "--tools", "rt")
    add_extension(paths.extensions_dir, "mine", "--tools", "m")
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        infos = {i.name: i for i in await zot.list_extensions()}
        assert (infos["repo-tool"].state, infos["repo-tool"].pid) == ("untrusted", None)
        assert infos["repo-tool"].last_error == (
            "project-local extensions run only once trusted: "
            f"run `zot ext trust` in {project} to allow it"
        )
        assert infos["mine"].state == "ready"  # global ones are the user's own
        assert [t.name for t in await zot.list_tools()] == ["m"]
        trusted = await zot.ext_trust()
        assert [(i.name, i.state) for i in trusted] == [("repo-tool", "ready")]
        assert sorted(t.name for t in await zot.list_tools()) == ["m", "rt"]
    store = json.loads((paths.home / "trust.json").read_text())
    assert list(store["workspaces"]) == [str(project)]
    assert (paths.home / "trust.json").stat().st_mode & 0o777 == 0o600


async def test_a_change_asks_again(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    directory = project_ext(project, "repo-tool", "--tools", "rt")
    found = load(directory, Scope.PROJECT)
    trust.trust(paths.home, project, [found])
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        assert (await zot.list_extensions())[0].state == "ready"
        # The repository changes the manifest (a git pull, say): trust is gone.
        manifest = json.loads((directory / "extension.json").read_text())
        manifest["args"] = ["fake.py", "--name", "repo-tool", "--tools", "rt,sneaky"]
        (directory / "extension.json").write_text(json.dumps(manifest))
        with pytest.raises(ZotdError) as err:
            await zot.ext_reload("repo-tool")
        assert (err.value.code, err.value.message) == (
            "unavailable",
            f"repo-tool changed since it was trusted; run `zot ext trust` in {project}",
        )
        info = (await zot.list_extensions())[0]
        assert info.state == "untrusted"
        assert info.last_error.startswith("it changed since it was trusted: ")
        assert await zot.list_tools() == []


def test_fingerprint_covers_the_files_it_runs(tmp_path: Path) -> None:
    directory = tmp_path / "e"
    directory.mkdir()
    script = directory / "run.py"
    script.write_text("print('v1')\n")
    script.chmod(0o755)
    (directory / "extension.json").write_text('{"name": "e", "exec": "./run.py"}')
    before = trust.fingerprint(load(directory, Scope.PROJECT))
    script.write_text("print('v2')\n")
    after = trust.fingerprint(load(directory, Scope.PROJECT))
    assert before != after
    assert before.startswith("sha256:")


async def test_a_config_switch_trusts_all(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    project_ext(project, "repo-tool", "--tools", "rt")
    await start_daemon(Config(ready_idle=0.1, trust_project_extensions=True))
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["rt"]


async def test_installing_into_the_project_trusts_it(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    source = add_extension(short_tmp / "src", "chosen", "--tools", "c", self_contained=True)
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        res = await zot.ext_install(str(source), scope="project")
        assert res.extension is not None and res.extension.state == "ready"


async def test_trust_is_per_workspace(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    other = short_tmp / "other"
    project_ext(project, "repo-tool", "--tools", "rt")
    project_ext(other, "repo-tool", "--tools", "rt")
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as a, connect(paths.socket, cwd=other) as b:
        await a.ext_trust()
        assert [t.name for t in await a.list_tools()] == ["rt"]
        assert await b.list_tools() == []


async def test_nothing_to_trust(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        assert await zot.ext_trust() == []
        with pytest.raises(ZotdError):
            await zot.ext_reload("nothing")


def test_concurrent_trust_loses_nothing(tmp_path: Path) -> None:
    import threading

    project = tmp_path / "p"
    founds = [
        load(project_ext(project, f"e{i}", "--tools", f"t{i}"), Scope.PROJECT) for i in range(8)
    ]
    errors: list[BaseException] = []

    def trust_one(i: int) -> None:
        try:
            trust.trust(tmp_path / "home", project, [founds[i]])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=trust_one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(trust.load(tmp_path / "home")[str(project)]) == [f"e{i}" for i in range(8)]


# --- the fingerprint covers the whole directory (issue 15) --------------------------------


def script_ext(directory: Path, files: dict[str, str], **manifest: object) -> Path:
    """``directory`` with ``files`` and a manifest running ``python3 main.py``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    fields = {"name": directory.name, "exec": "python3", "args": ["main.py"], **manifest}
    (directory / "extension.json").write_text(json.dumps(fields))
    return directory


def print_of(directory: Path) -> str:
    return trust.fingerprint(load(directory, Scope.PROJECT))


def refusal(directory: Path) -> str:
    found = load(directory, Scope.PROJECT)
    assert found.error == "", found.error
    with pytest.raises(trust.Untrustable) as err:
        trust.fingerprint(found)
    with pytest.raises(trust.Untrustable) as checked:
        trust.check(found)  # the same refusal, without reading the files
    assert str(checked.value) == str(err.value)
    return str(err.value)


def test_a_change_to_an_imported_module_is_a_change(tmp_path: Path) -> None:
    directory = script_ext(tmp_path / "e", {"main.py": "import helper\n", "helper.py": "X = 1\n"})
    before = print_of(directory)
    assert print_of(directory) == before  # stable
    (directory / "helper.py").write_text("X = 2\n")
    assert print_of(directory) != before


def test_every_file_counts_in_subdirectories_too(tmp_path: Path) -> None:
    directory = script_ext(tmp_path / "e", {"main.py": "", "lib/deep/util.py": "a\n"})
    prints = {print_of(directory)}
    (directory / "lib" / "deep" / "util.py").write_text("b\n")
    prints.add(print_of(directory))
    (directory / "lib" / "new.py").write_text("")  # a new file
    prints.add(print_of(directory))
    (directory / "lib" / "new.py").chmod(0o755)  # its executable bit
    prints.add(print_of(directory))
    (directory / "lib" / "new.py").rename(directory / "lib" / "renamed.py")
    prints.add(print_of(directory))
    (directory / "empty").mkdir()  # a directory
    prints.add(print_of(directory))
    assert len(prints) == 6


def test_a_change_behind_a_link_is_a_change(tmp_path: Path) -> None:
    directory = script_ext(tmp_path / "e", {"real/main.py": "v1\n"})
    (directory / "main.py").symlink_to("real/main.py")
    before = print_of(directory)
    (directory / "real" / "main.py").write_text("v2\n")  # the file the link leads to
    after = print_of(directory)
    assert after != before
    (directory / "main.py").unlink()
    (directory / "other.py").write_text("v2\n")
    (directory / "main.py").symlink_to("other.py")  # the link itself, retargeted
    assert print_of(directory) not in (before, after)


def test_a_link_leading_out_cannot_be_trusted(tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("")
    directory = script_ext(tmp_path / "e", {"main.py": "import helper\n"})
    (directory / "helper.py").symlink_to("../outside.py")
    assert refusal(directory) == (
        "helper.py links outside its directory (to ../outside.py); zotd pins only what is inside it"
    )


def test_a_link_to_a_device_is_never_opened(tmp_path: Path) -> None:
    directory = script_ext(tmp_path / "e", {"main.py": ""})
    (directory / "data").symlink_to("/dev/zero")
    assert refusal(directory).startswith("data links outside its directory (to /dev/zero)")


def test_a_fifo_in_the_directory_is_pinned_by_kind_not_opened(tmp_path: Path) -> None:
    directory = script_ext(tmp_path / "e", {"main.py": ""})
    before = print_of(directory)
    os.mkfifo(directory / "pipe")
    result: list[str] = []
    thread = threading.Thread(target=lambda: result.append(print_of(directory)), daemon=True)
    thread.start()
    thread.join(30)  # a hang guard: opening the FIFO would block
    assert result and result[0] != before


def test_git_directories_are_left_out(tmp_path: Path) -> None:
    directory = script_ext(tmp_path / "e", {"main.py": "", ".git/index": "1"})
    before = print_of(directory)
    (directory / ".git" / "index").write_text("2")  # git refreshing its index
    assert print_of(directory) == before


def test_an_exec_outside_its_directory_cannot_be_trusted(tmp_path: Path) -> None:
    tool = tmp_path / "scripts" / "run.sh"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    directory = script_ext(tmp_path / "e", {}, exec="../scripts/run.sh", args=[])
    assert refusal(directory).startswith(
        f"its `exec` '../scripts/run.sh' is outside its directory ({tool}) and not a program "
        "found on PATH"
    )
    absolute = script_ext(tmp_path / "f", {}, exec=str(tool), args=[])
    assert refusal(absolute).startswith(f"its `exec` {str(tool)!r} is outside its directory")


def test_an_interpreter_on_path_may_run(tmp_path: Path) -> None:
    bare = script_ext(tmp_path / "bare", {"main.py": ""})
    assert print_of(bare).startswith("sha256:")
    # The very file PATH finds (zotd's own Python is first on the extensions' PATH).
    own = script_ext(tmp_path / "own", {"main.py": ""}, exec=sys.executable)
    assert print_of(own).startswith("sha256:")


@pytest.mark.parametrize(
    "arg",
    ["../lib/x.py", "--require=../x.js", "/etc/passwd", "..", "sub/../../x.py"],
)
def test_an_argument_outside_its_directory_cannot_be_trusted(tmp_path: Path, arg: str) -> None:
    directory = script_ext(tmp_path / "e", {"main.py": "", "sub/x.py": ""}, args=["main.py", arg])
    assert refusal(directory).startswith(f"its argument {arg!r} names a path outside its directory")


def test_an_argument_through_a_link_leading_out_cannot_be_trusted(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("")
    directory = script_ext(tmp_path / "e", {}, args=["main.py"])
    (directory / "main.py").symlink_to(tmp_path / "real.py")
    assert "outside its directory" in refusal(directory)


def test_arguments_inside_or_not_paths_are_fine(tmp_path: Path) -> None:
    directory = script_ext(
        tmp_path / "e",
        {"main.py": "", "sub/x.py": ""},
        args=["main.py", "--name", "e", "sub/../sub/x.py", "./main.py", "--mode=fast", "a,b"],
    )
    assert print_of(directory).startswith("sha256:")


def test_too_many_files_cannot_be_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trust, "MAX_ENTRIES", 5)
    directory = script_ext(tmp_path / "e", {f"m{i}.py": "" for i in range(5)})
    assert refusal(directory) == "it holds more than 5 files and directories, more than zotd pins"


def test_a_file_too_large_cannot_be_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trust, "MAX_FILE_BYTES", 1 << 20)
    directory = script_ext(tmp_path / "e", {"main.py": "", "blob.bin": "x" * ((1 << 20) + 1)})
    assert refusal(directory) == "blob.bin is larger than 1 MiB"


def test_too_many_bytes_cannot_be_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trust, "MAX_TOTAL_BYTES", 3 << 20)
    files = {f"part{i}.bin": "x" * (1 << 20) for i in range(4)}
    directory = script_ext(tmp_path / "e", {"main.py": "", **files})
    assert refusal(directory) == "its files add up to more than 3 MiB, more than zotd pins"


def test_what_cannot_be_trusted_is_not_pinned(tmp_path: Path) -> None:
    good = load(script_ext(tmp_path / "good", {"main.py": ""}), Scope.PROJECT)
    bad = load(script_ext(tmp_path / "bad", {"main.py": ""}, args=["../x"]), Scope.PROJECT)
    workspace = tmp_path / "ws"
    assert trust.trust(tmp_path / "home", workspace, [good, bad]) == ["good"]
    assert list(trust.load(tmp_path / "home")[str(workspace)]) == ["good"]
    store = trust.load(tmp_path / "home")
    trust.vet(bad, workspace, store)
    assert bad.error.startswith("cannot be trusted: its argument '../x' names a path outside")
    trust.vet(good, workspace, store)
    assert (good.error, good.untrusted) == ("", "")


# --- live: what runs is what was trusted (issue 15) ------------------------------------------

MAIN = """\
import runpy, sys
import helper
sys.argv = ["fake.py", "--name", "split", "--tools", helper.TOOLS]
runpy.run_path("fake.py", run_name="__main__")
"""


async def test_a_change_in_an_imported_module_asks_again(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    directory = script_ext(
        project / ".zot" / "extensions" / "split", {"main.py": MAIN, "helper.py": 'TOOLS = "rt"\n'}
    )
    shutil.copy(FAKE, directory / "fake.py")
    trust.trust(paths.home, project, [load(directory, Scope.PROJECT)])
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["rt"]
        # It ran (and imported helper) without writing bytecode into its
        # directory: a reload finds it unchanged, and trusted.
        assert not (directory / "__pycache__").exists()
        assert [i.state for i in await zot.ext_reload("split")] == ["ready"]
        # A git pull changes the module its entry point imports, not the entry point.
        (directory / "helper.py").write_text('TOOLS = "rt,sneaky"\n')
        with pytest.raises(ZotdError) as err:
            await zot.ext_reload("split")
        assert err.value.message == (
            f"split changed since it was trusted; run `zot ext trust` in {project}"
        )
        assert await zot.list_tools() == []
        assert [(i.name, i.state) for i in await zot.ext_trust()] == [("split", "ready")]
        assert sorted(t.name for t in await zot.list_tools()) == ["rt", "sneaky"]


async def test_one_that_can_never_be_trusted_says_why(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    outside = short_tmp / "elsewhere.py"
    shutil.copy(FAKE, outside)
    directory = project / ".zot" / "extensions" / "escape"
    directory.mkdir(parents=True)
    (directory / "extension.json").write_text(
        json.dumps({"name": "escape", "exec": "python3", "args": ["../../../../elsewhere.py"]})
    )
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        [info] = await zot.list_extensions()
        assert info.state == "failed"
        assert info.last_error == (
            "cannot be trusted: its argument '../../../../elsewhere.py' names a path outside its "
            f"directory ({outside}); zotd pins only what is inside it"
        )
        assert await zot.ext_trust() == []  # nothing it could pin
        assert (await zot.list_extensions())[0].state == "failed"


# --- a project copy never disables the user's own (issue 15) ------------------------------


async def test_an_untrusted_project_guard_leaves_the_users_guard_running(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "guard", "--tools", "mine", "--intercept", "tool_call")
    theirs = project_ext(project, "guard", "--tools", "theirs")
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        [info] = await zot.list_extensions()
        assert (info.scope, info.state, info.intercepts) == ("global", "ready", ["tool_call"])
        assert [t.name for t in await zot.list_tools()] == ["mine"]
        [aside] = info.passed_over
        assert (aside.scope, aside.dir, aside.why) == ("project", str(theirs), "untrusted")
        assert aside.reason == (
            "project-local extensions run only once trusted: "
            f"run `zot ext trust` in {project} to allow it"
        )
        # Trusted, the project's copy takes over, as the precedence says.
        [trusted] = await zot.ext_trust()
        assert (trusted.scope, trusted.state) == ("project", "ready")
        assert [t.name for t in await zot.list_tools()] == ["theirs"]
        [info] = await zot.list_extensions()
        assert [(a.scope, a.why) for a in info.passed_over] == [("global", "hidden")]


async def test_a_changed_project_copy_gives_the_name_back(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "guard", "--tools", "mine")
    theirs = project_ext(project, "guard", "--tools", "theirs")
    trust.trust(paths.home, project, [load(theirs, Scope.PROJECT)])
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["theirs"]
        (theirs / "fake.py").write_text((theirs / "fake.py").read_text() + "\n# changed\n")
        [info] = await zot.ext_reload("guard")
        assert (info.scope, info.state) == ("global", "ready")
        assert [t.name for t in await zot.list_tools()] == ["mine"]
        assert [(a.why, a.reason.split(":")[0]) for a in info.passed_over] == [
            ("untrusted", "it changed since it was trusted")
        ]


async def test_a_disabled_or_broken_project_copy_leaves_the_users_one_running(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "guard", "--tools", "g")
    add_extension(paths.extensions_dir, "audit", "--tools", "a")
    project_ext(project, "guard", "--tools", "x")
    off = project / ".zot" / "extensions" / "guard" / "extension.json"
    off.write_text(json.dumps({**json.loads(off.read_text()), "enabled": False}))
    broken = project / ".zot" / "extensions" / "audit"
    broken.mkdir(parents=True)
    (broken / "extension.json").write_text("{")
    # Even with every project extension trusted.
    await start_daemon(Config(ready_idle=0.1, trust_project_extensions=True))
    async with connect(paths.socket, cwd=project) as zot:
        infos = {i.name: i for i in await zot.list_extensions()}
        assert {n: (i.scope, i.state) for n, i in infos.items()} == {
            "audit": ("global", "ready"),
            "guard": ("global", "ready"),
        }
        assert [a.why for a in infos["guard"].passed_over] == ["disabled"]
        assert [a.why for a in infos["audit"].passed_over] == ["failed"]
        assert sorted(t.name for t in await zot.list_tools()) == ["a", "g"]


async def test_disabling_a_trusted_project_copy_and_enabling_it_again(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "weather", "--tools", "mine")
    theirs = project_ext(project, "weather", "--tools", "theirs")
    trust.trust(paths.home, project, [load(theirs, Scope.PROJECT)])
    await start_daemon(STRICT)
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["theirs"]
        off = await zot.ext_disable("weather")  # the project's copy: the one that runs
        assert (off.scope, off.dir) == ("project", str(theirs))
        assert off.extension is not None and off.extension.scope == "global"
        assert [t.name for t in await zot.list_tools()] == ["mine"]
        # `enable` finds the project copy that gave way, not the global one
        # that runs; still trusted (the edit was the user's), it takes over.
        on = await zot.ext_enable("weather")
        assert (on.scope, on.dir) == ("project", str(theirs))
        assert on.extension is not None and on.extension.scope == "project"
        assert [t.name for t in await zot.list_tools()] == ["theirs"]
