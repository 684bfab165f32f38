"""Project-local extensions run only once the user trusts them, pinned to their content."""

from __future__ import annotations

import json
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
        manifest["args"] = [str(FAKE), "--name", "repo-tool", "--tools", "rt,sneaky"]
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
    source = add_extension(short_tmp / "src", "chosen", "--tools", "c")
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
