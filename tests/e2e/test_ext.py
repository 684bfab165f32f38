"""Managing extensions live through the daemon: the ext_* requests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio

from tests.conftest import FAKE, StartDaemon, add_extension
from zotd.client import ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionStatePush
from zotd.protocol.extension import TextBlock


async def wait_for_state(
    notifications: object, extension: str, state: str, limit: float = 30
) -> ExtensionStatePush:
    with trio.fail_after(limit):
        async for frame in notifications:  # type: ignore[attr-defined]
            if (
                isinstance(frame, ExtensionStatePush)
                and frame.extension == extension
                and frame.state == state
            ):
                return frame
    raise AssertionError("connection closed")


async def test_install_while_connected_makes_the_tool_callable(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    source = add_extension(short_tmp / "src", "weather", "--tools", "forecast")
    await start_daemon()
    async with (
        connect(paths.socket, cwd=project) as agent,
        connect(paths.socket, cwd=project) as op,
    ):
        await agent.subscribe()
        assert await agent.list_tools() == []
        res = await op.ext_install(str(source))
        assert (res.name, res.scope) == ("weather", "global")
        assert res.dir == str(paths.extensions_dir / "weather")
        assert res.extension is not None and res.extension.state == "ready"
        assert res.extension.tools == ["forecast"]
        # The agent is told, and can call the tool without reconnecting.
        pushed = await wait_for_state(agent.notifications(), "weather", "ready")
        assert [t.name for t in pushed.tools] == ["forecast"]
        result = await agent.call_tool("forecast", {"city": "Oslo"})
        assert result.content == [TextBlock('{"city": "Oslo"}')]
    assert (paths.extensions_dir / "weather" / "extension.json").is_file()
    assert source.is_dir()  # a copy, not a move


async def test_install_into_the_project(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    source = add_extension(short_tmp / "src", "local", "--commands", "here")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        res = await op.ext_install(str(source), scope="project")
        assert res.scope == "project"
        assert res.dir == str(project / ".zot" / "extensions" / "local")
        assert [c.name for c in await op.list_commands()] == ["here"]


async def test_install_rollback_without_manifest(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    source = short_tmp / "src" / "nomanifest"
    source.mkdir(parents=True)
    (source / "run.sh").write_text("#!/bin/sh\n")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        with pytest.raises(ZotdError) as err:
            await op.ext_install(str(source))
    assert err.value.code == "bad_request"
    assert f"{source} is not a zot extension: it has no extension.json" in err.value.message
    assert list(paths.extensions_dir.iterdir()) == []  # nothing left behind, not even staging


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(short_tmp: Path) -> Path:
    """A bare git repository holding one extension."""
    work = add_extension(short_tmp / "work", "gitext", "--tools", "fromgit")
    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init", cwd=work)
    bare = short_tmp / "gitext.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=short_tmp)
    return bare


@pytest.mark.parametrize("form", ["path", "file-url"])
async def test_install_from_git(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path, form: str
) -> None:
    bare = make_repo(short_tmp)
    source = str(bare) if form == "path" else bare.as_uri()
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        res = await op.ext_install(source)
        assert res.extension is not None and res.extension.tools == ["fromgit"]
    assert (paths.extensions_dir / "gitext" / ".git").is_dir()


async def test_failing_clone_rolls_back(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        with pytest.raises(ZotdError) as err:
            await op.ext_install((short_tmp / "missing.git").as_uri())
    assert err.value.message.startswith("git clone file://")
    assert "failed" in err.value.message
    assert list(paths.extensions_dir.iterdir()) == []


async def test_install_refuses_to_overwrite(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    add_extension(paths.extensions_dir, "dup", "--tools", "old")
    source = add_extension(short_tmp / "src", "dup", "--tools", "new")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        with pytest.raises(ZotdError) as err:
            await op.ext_install(str(source))
        assert [t.name for t in await op.list_tools()] == ["old"]
    assert "already installed" in err.value.message
    assert "zot ext remove dup" in err.value.message


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", ""])
async def test_install_refuses_names_outside_the_extensions_dir(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path, name: str
) -> None:
    source = short_tmp / "src" / "evil"
    source.mkdir(parents=True)
    (source / "extension.json").write_text(json.dumps({"name": name, "exec": "./x"}))
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        with pytest.raises(ZotdError) as err:
            await op.ext_install(str(source))
    assert "invalid name" in err.value.message
    assert list(paths.extensions_dir.iterdir()) == []
    assert not (paths.home / "escape").exists()


async def test_remove_stops_then_deletes_and_reveals_the_global_one(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "x", "--commands", "from-global")
    local = add_extension(project / ".zot" / "extensions", "x", "--commands", "from-project")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        await op.subscribe()
        before = (await op.list_extensions())[0]
        res = await op.ext_remove("x")
        assert not local.exists()
        assert res.scope == "project"
        assert res.extension is not None and res.extension.scope == "global"
        assert [c.name for c in await op.list_commands()] == ["from-global"]
        stopping = await wait_for_state(op.notifications(), "x", "stopping")
        # What is going away is out of the registry at once: no new calls reach it.
        assert (stopping.commands, stopping.tools) == ([], [])
    assert before.pid is not None
    assert not Path(f"/proc/{before.pid}").exists()


async def test_remove_last_one_pushes_removed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "gone", "--tools", "t")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        await op.subscribe()
        res = await op.ext_remove("gone")
        assert res.extension is None
        pushed = await wait_for_state(op.notifications(), "gone", "removed")
        assert (pushed.commands, pushed.tools) == ([], [])
        assert await op.list_extensions() == []
    assert not (paths.extensions_dir / "gone").exists()


async def test_unknown_names_list_the_installed_ones(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "alpha")
    add_extension(paths.extensions_dir, "beta")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        for call in (op.ext_remove("nope"), op.ext_enable("nope"), op.ext_reload("nope")):
            with pytest.raises(ZotdError) as err:
                await call
            assert err.value.code == "not_found"
            assert err.value.message == "no extension named 'nope' (installed: alpha, beta)"


async def test_disable_then_enable_restores_the_commands(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    directory = add_extension(
        paths.extensions_dir, "cmds", "--commands", "one,two", manifest={"description": "d"}
    )
    manifest_before = json.loads((directory / "extension.json").read_text())
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        off = await op.ext_disable("cmds")
        assert off.extension is not None and off.extension.state == "disabled"
        assert await op.list_commands() == []
        manifest = json.loads((directory / "extension.json").read_text())
        assert list(manifest) == [*manifest_before, "enabled"]  # order kept, key added
        assert manifest["enabled"] is False
        on = await op.ext_enable("cmds")
        assert on.extension is not None and on.extension.state == "ready"
        assert sorted(c.name for c in await op.list_commands()) == ["one", "two"]
    manifest = json.loads((directory / "extension.json").read_text())
    assert {**manifest_before, "enabled": True} == manifest


async def test_reload_fails_the_pending_call_and_serves_the_next(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    directory = add_extension(paths.extensions_dir, "r", "--tools", "slow,echo")
    daemon = await start_daemon()
    async with (
        connect(paths.socket, cwd=project) as agent,
        connect(paths.socket, cwd=project) as op,
    ):
        old_pid = (await agent.list_extensions())[0].pid
        errors: list[ZotdError] = []

        async def pending() -> None:
            try:
                await agent.call_tool("slow", {"seconds": 60})
            except ZotdError as exc:
                errors.append(exc)

        # Change the manifest on disk: the reload must read it again.
        manifest = json.loads((directory / "extension.json").read_text())
        manifest["args"] = [str(FAKE), "--name", "r", "--tools", "slow,echo,added"]
        with trio.fail_after(30):  # a hang guard, far below the 60 s call
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pending)
                old = next(iter(daemon.workspaces.values())).extensions["r"]
                while not old.pending:  # the call has reached the extension
                    await trio.sleep(0.01)
                (directory / "extension.json").write_text(json.dumps(manifest))
                reloaded = await op.ext_reload("r")
        assert [e.code for e in errors] == ["extension_failed"]
        assert [(e.name, e.state, e.restarts) for e in reloaded] == [("r", "ready", 1)]
        assert reloaded[0].pid != old_pid
        assert sorted(t.name for t in await agent.list_tools()) == ["added", "echo", "slow"]
        assert (await agent.call_tool("echo", {"n": 2})).content == [TextBlock('{"n": 2}')]


async def test_reload_all_picks_up_new_directories(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "a", "--tools", "ta")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        add_extension(paths.extensions_dir, "b", "--tools", "tb")  # copied in by hand
        reloaded = await op.ext_reload()
        assert sorted((e.name, e.restarts) for e in reloaded) == [("a", 1), ("b", 0)]
        assert sorted(t.name for t in await op.list_tools()) == ["ta", "tb"]


async def test_changes_reach_every_workspace_that_sees_them(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    other = short_tmp / "other"
    other.mkdir()
    source = add_extension(short_tmp / "src", "shared", "--tools", "st")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op, connect(paths.socket, cwd=other) as b:
        await op.ext_install(str(source))
        assert [t.name for t in await b.list_tools()] == ["st"]
        await op.ext_disable("shared")
        assert await b.list_tools() == []


async def test_crash_is_pushed(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "c", "--commands", "boom")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as agent:
        await agent.subscribe()
        with pytest.raises(ZotdError):
            await agent.invoke_command("boom")
        pushed = await wait_for_state(agent.notifications(), "c", "failed")
    assert pushed.error == "exited with code 7"


async def test_logs(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "talk", "--tools", "t")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        logs = await op.ext_logs("talk", lines=50)
        assert logs.path == str(paths.extension_log("talk"))
        assert any("fake talk starting" in line for line in logs.lines)
        assert len((await op.ext_logs("talk", lines=1)).lines) == 1
        with pytest.raises(ZotdError) as err:
            await op.ext_logs("nope")
        assert err.value.code == "not_found"


async def test_explicit_extensions_cannot_be_removed(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    explicit = add_extension(short_tmp / "work", "dev", "--tools", "t")
    await start_daemon(explicit=[explicit])
    async with connect(paths.socket, cwd=project) as op:
        with pytest.raises(ZotdError) as err:
            await op.ext_remove("dev")
        assert "loaded with --ext" in err.value.message
        with pytest.raises(ZotdError) as err:
            await op.ext_disable("dev")
        assert "zotd leaves that directory alone" in err.value.message
        assert [e.name for e in await op.ext_reload("dev")] == ["dev"]
    assert explicit.is_dir()
    assert "enabled" not in (explicit / "extension.json").read_text()


async def test_install_wants_an_absolute_source(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()
    async with connect(paths.socket, cwd=project) as op:
        with pytest.raises(ZotdError) as err:
            await op.ext_install("relative/dir")
    assert err.value.message == (
        "`source` must be an absolute path or a git URL, not 'relative/dir'"
    )
