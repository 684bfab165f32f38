"""The daemon end to end: real extension processes, a real socket, the client library."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import FAKE, FAST, StartDaemon, add_extension, pid_alive, quickstart_dir
from zotd.client import ZotdError, connect
from zotd.model.environment import with_own_python
from zotd.model.paths import Paths
from zotd.protocol.agent import ExtensionStatePush, NotifyPush
from zotd.protocol.extension import ImageBlock, TextBlock


async def test_quickstart_extension_answers_hellopy(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    quickstart_dir(paths.extensions_dir)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert [c.name for c in await zot.list_commands()] == ["hellopy"]
        res = await zot.invoke_command("/hellopy")
    assert res.extension == "hello-py"
    assert res.action == "prompt"
    assert res.prompt == "Greet me very briefly. Add one emoji."
    # It never sends `ready`: the daemon says so in its log and goes on.
    assert "no `ready` frame" in paths.extension_log("hello-py").read_text()


async def test_hello_reply_waits_for_ready(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "a", "--tools", "echo")
    add_extension(paths.extensions_dir, "b", "--commands", "hi", "--no-ready")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert zot.hello_data is not None
        assert zot.hello_data.workspace == str(project)
        assert [t.name for t in await zot.list_tools()] == ["echo"]
        assert [c.name for c in await zot.list_commands()] == ["hi"]
        states = {e.name: e.state for e in await zot.list_extensions()}
    assert states == {"a": "ready", "b": "ready"}


async def test_hello_ack_carries_workspace_facts(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    log = short_tmp / "events.jsonl"
    add_extension(paths.extensions_dir, "obs", "--events", "turn_start", "--events-log", str(log))
    await start_daemon()
    async with connect(paths.socket, cwd=project, provider="anthropic", model="opus") as zot:
        await zot.ping()
    with trio.fail_after(30):  # a hang guard
        while not log.exists():  # the extension writes it when it reads hello_ack
            await trio.sleep(0.02)
    ack = json.loads(log.read_text().splitlines()[0])
    assert ack == {
        "type": "hello_ack",
        "protocol_version": 1,
        "zot_version": ack["zot_version"],
        "provider": "anthropic",
        "model": "opus",
        "cwd": str(project),
        # Beyond the reference, as newer zot sends them:
        "extension_dir": str(paths.extensions_dir / "obs"),
        "data_dir": str(paths.home / "data" / "obs"),
        # What the host accepts, as current zot says it:
        "capabilities": ["call_tool"],
    }
    data = paths.home / "data" / "obs"
    assert data.is_dir()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700


async def test_data_dir_survives_a_reinstall(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    source = add_extension(short_tmp / "src", "keep", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.ext_install(str(source))
        (paths.home / "data" / "keep" / "state.json").write_text("{}")
        await zot.ext_remove("keep")
        assert (paths.home / "data" / "keep" / "state.json").exists()
        await zot.ext_install(str(source))
        assert [e.state for e in await zot.list_extensions()] == ["ready"]
    assert (paths.home / "data" / "keep" / "state.json").read_text() == "{}"


async def test_command_actions(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "cmds", "--commands", "go,show,put,nothing,oops")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        go = await zot.invoke_command("go", "  a b  ")
        show = await zot.invoke_command("/show", "x")
        put = await zot.invoke_command("put", "y")
        nothing = await zot.invoke_command("nothing")
        oops = await zot.invoke_command("oops")
    assert (go.action, go.prompt) == ("prompt", "ran /go with 'a b'")
    assert (show.action, show.display) == ("display", "shown: x")
    assert (put.action, put.insert) == ("insert", "inserted: y")
    assert (nothing.action, nothing.error) == ("noop", "")
    assert oops.error == "it broke"


async def test_tool_results(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo,image,fail")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        echo = await zot.call_tool("echo", {"text": "héllo", "n": 1})
        image = await zot.call_tool("image")
        fail = await zot.call_tool("fail")
    assert echo.content == [TextBlock('{"n": 1, "text": "h\\u00e9llo"}')]
    assert not echo.is_error
    assert isinstance(image.content[1], ImageBlock)
    assert image.content[1].mime_type == "image/png"
    assert fail.is_error
    assert fail.content == [TextBlock("no luck")]


async def test_tool_call_timeout_s(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "slow,echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as err:
            await zot.call_tool("slow", {"seconds": 30}, timeout_s=0.2)
        assert err.value.code == "timeout"
        # The extension is fine and serves the next call.
        assert (await zot.call_tool("echo", {})).content == [TextBlock("{}")]


async def test_unknown_names_are_not_found(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        for call in (zot.invoke_command("nope"), zot.call_tool("nope"), zot.call_tool("bash")):
            with pytest.raises(ZotdError) as err:
                await call
            assert err.value.code == "not_found"


async def test_crash_fails_pending_calls_at_once(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "victim", "--tools", "slow,crash", "--commands", "boom")
    add_extension(paths.extensions_dir, "bystander", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        errors: list[ZotdError] = []

        async def pending_call() -> None:
            try:
                await zot.call_tool("slow", {"seconds": 60})
            except ZotdError as exc:
                errors.append(exc)

        with trio.fail_after(5):  # far below the 10 s tool deadline
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pending_call)
                await trio.sleep(0.2)
                with pytest.raises(ZotdError) as crashed:
                    await zot.call_tool("crash")
        assert crashed.value.code == "extension_failed"
        assert [e.code for e in errors] == ["extension_failed"]
        assert "exited with code 3" in errors[0].message
        # Its tools left the registry; the other extension goes on.
        assert [t.name for t in await zot.list_tools()] == ["echo"]
        assert (await zot.call_tool("echo", {"a": 1})).content == [TextBlock('{"a": 1}')]
        victim = {e.name: e for e in await zot.list_extensions()}["victim"]
    assert victim.state == "failed"
    assert victim.exit_code == 3
    assert victim.pid is None
    assert victim.tools == []
    assert any("fake victim starting" in line for line in victim.log_tail)


async def test_notify_and_state_pushes(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "n", "--commands", "tell,boom")
    await start_daemon()
    async with (
        connect(paths.socket, cwd=project) as zot,
        connect(paths.socket, cwd=project) as quiet,
    ):
        await zot.subscribe()
        await zot.invoke_command("tell", "hi")
        with pytest.raises(ZotdError):
            await zot.invoke_command("boom")
        frames = []
        with trio.fail_after(30):  # a hang guard
            async for frame in zot.notifications():
                frames.append(frame)
                if isinstance(frame, ExtensionStatePush) and frame.state == "failed":
                    break
        assert quiet.dropped == 0
    assert frames[0] == NotifyPush(extension="n", level="warn", message="told: hi")
    last = frames[-1]
    assert isinstance(last, ExtensionStatePush)
    assert last.commands == [] and last.tools == []


async def test_events_reach_only_subscribers(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    log = short_tmp / "events.jsonl"
    add_extension(
        paths.extensions_dir, "obs", "--events", "turn_start,tool_call", "--events-log", str(log)
    )
    add_extension(paths.extensions_dir, "deaf", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert await zot.emit_event("turn_start", step=1) == ["obs"]
        assert await zot.emit_event("turn_end", stop="end_turn") == []
        assert await zot.emit_event(
            "tool_call", tool_id="t1", tool_name="read", tool_args={"path": "x"}
        ) == ["obs"]
        # The last one, on the same pipe: once it is there, nothing sent before is missing.
        assert await zot.emit_event("turn_start", step=2) == ["obs"]
    with trio.fail_after(30):  # a hang guard only: hello_ack, then the three events
        while not log.exists() or len(log.read_text().splitlines()) < 4:
            await trio.sleep(0.02)
    events = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    # zotd adds the workspace and a sequence, strictly increasing in the
    # workspace: turn_end, which nobody observes, took 2.
    here = {"cwd": str(project)}
    assert events == [
        {"type": "event", "event": "turn_start", "step": 1, "sequence": 1, **here},
        {
            "type": "event",
            "event": "tool_call",
            "tool_id": "t1",
            "tool_name": "read",
            "tool_args": {"path": "x"},
            "sequence": 3,
            **here,
        },
        {"type": "event", "event": "turn_start", "step": 2, "sequence": 4, **here},
    ]


async def test_intercept(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "guard", "--intercept", "tool_call")
    add_extension(paths.extensions_dir, "other", "--intercept", "tool_call")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        ok = await zot.intercept("bash", {"command": "ls"})
        blocked = await zot.intercept("bash", {"command": "rm -rf /"})
        with trio.fail_after(3):
            silent = await zot.intercept("bash", {"command": "hang"})
    assert not ok.block
    assert blocked.block
    assert blocked.extension in ("guard", "other")
    assert blocked.reason == f"{blocked.extension} refused: matches danger pattern"
    assert not silent.block  # nobody answered within the 1 s intercept deadline


async def test_broken_and_disabled_extensions_are_listed(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    ext = paths.extensions_dir
    (ext / "badjson").mkdir(parents=True)
    (ext / "badjson" / "extension.json").write_text("{not json")
    (ext / "noexec").mkdir()
    (ext / "noexec" / "extension.json").write_text('{"name": "noexec"}')
    (ext / "missing").mkdir()
    (ext / "missing" / "extension.json").write_text('{"name": "missing", "exec": "./nothere"}')
    add_extension(ext, "wrongname", manifest={"args": [str(FAKE), "--name", "other"]})
    add_extension(ext, "early", "--first-frame", "register")
    add_extension(ext, "off", "--tools", "echo", manifest={"enabled": False})
    add_extension(ext, "good", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        infos = {e.name: e for e in await zot.list_extensions()}
        assert [t.name for t in await zot.list_tools()] == ["echo"]
    assert {n: i.state for n, i in infos.items()} == {
        "badjson": "failed",
        "early": "failed",
        "good": "ready",
        "missing": "failed",
        "noexec": "failed",
        "off": "disabled",
        "wrongname": "ready",  # under its manifest's name, as current zot runs it
    }
    assert "invalid JSON" in infos["badjson"].last_error
    assert "`exec`" in infos["noexec"].last_error
    assert "not found" in infos["missing"].last_error
    assert any(
        "'other'" in w and "it runs as 'wrongname'" in w for w in infos["wrongname"].warnings
    )
    assert "first frame must be `hello`" in infos["early"].last_error
    assert infos["off"].pid is None


async def test_a_hello_with_another_name_is_refused_when_strict(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(
        paths.extensions_dir, "wrongname", manifest={"args": [str(FAKE), "--name", "other"]}
    )
    await start_daemon(msgspec.structs.replace(FAST, strict_hello_name=True))
    async with connect(paths.socket, cwd=project) as zot:
        (info,) = await zot.list_extensions()
    assert info.state == "failed"
    assert "'other'" in info.last_error and "must match (strict_hello_name)" in info.last_error


async def test_project_local_wins_over_global_and_explicit_over_both(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    add_extension(paths.extensions_dir, "x", "--commands", "from-global")
    add_extension(project / ".zot" / "extensions", "x", "--commands", "from-project")
    add_extension(paths.extensions_dir, "y", "--commands", "y-global")
    explicit = add_extension(short_tmp / "work", "y", "--commands", "y-explicit")
    await start_daemon(explicit=[explicit])
    async with connect(paths.socket, cwd=project) as zot:
        names = sorted(c.name for c in await zot.list_commands())
        scopes = {e.name: e.scope for e in await zot.list_extensions()}
    assert names == ["from-project", "y-explicit"]
    assert scopes == {"x": "project", "y": "explicit"}


async def test_shadowed_names_are_logged(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "a", "--tools", "bash,shared")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["shared"]
    assert "shadowed by zot's built-in tool 'bash'" in paths.extension_log("a").read_text()


async def test_first_registration_wins(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "one", "--commands", "dup,own1")
    add_extension(paths.extensions_dir, "two", "--commands", "dup,own2")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        owners = {c.name: c.extension for c in await zot.list_commands()}
    winner = owners["dup"]
    loser = "two" if winner == "one" else "one"
    assert owners == {"dup": winner, "own1": "one", "own2": "two"}
    assert f"shadowed by extension {winner!r}" in paths.extension_log(loser).read_text()
    assert "shadowed" not in paths.extension_log(winner).read_text()


async def test_malformed_output_is_skipped(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "messy", "--garbage", "--tools", "echo,bad,wrongkind")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert (await zot.call_tool("echo", {})).content == [TextBlock("{}")]
        for tool in ("bad", "wrongkind"):
            with trio.fail_after(5), pytest.raises(ZotdError) as err:
                await zot.call_tool(tool)
            assert err.value.code == "extension_failed"
        assert {e.name: e.state for e in await zot.list_extensions()} == {"messy": "ready"}
    log = paths.extension_log("messy").read_text()
    assert "skipped a malformed line (invalid JSON" in log
    assert "skipped a malformed line (a frame must be a JSON object)" in log
    assert "from_the_future" not in log  # unknown types are ignored quietly


async def test_oversized_line_is_dropped(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    from zotd.model.config import Config

    add_extension(paths.extensions_dir, "messy", "--garbage", "--tools", "echo")
    await start_daemon(Config(ready_idle=0.1, max_frame_bytes=65536))
    async with connect(paths.socket, cwd=project) as zot:
        assert (await zot.call_tool("echo", {})).content == [TextBlock("{}")]
    assert "dropped a 70000-byte line" in paths.extension_log("messy").read_text()


async def test_shutdown_escalates_and_leaves_no_process(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "stubborn", "--ignore-shutdown", "--tools", "echo")
    add_extension(paths.extensions_dir, "polite", "--tools", "echo2")
    daemon = await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        pids = {e.name: e.pid for e in await zot.list_extensions()}
    start = trio.current_time()
    daemon.request_shutdown()
    with trio.fail_after(30):  # a hang guard only (the exact times: test_deadlines.py)
        while paths.socket.exists():
            await trio.sleep(0.02)
    elapsed = trio.current_time() - start
    # It waited out 1 s for the shutdown and 0.5 s after SIGTERM, then sent SIGKILL
    # (the log below): its own escalation, not the safety net past stop_bound.
    assert elapsed >= daemon.config.shutdown_timeout + daemon.config.kill_timeout
    for pid in pids.values():
        assert pid is not None
        assert not Path(f"/proc/{pid}").exists()  # not running, and reaped: no zombie
    log = paths.extension_log("stubborn").read_text()
    assert "sending SIGTERM" in log and "sending SIGKILL" in log
    assert "sending" not in paths.extension_log("polite").read_text()


async def test_socket_permissions_and_single_instance(
    start_daemon: StartDaemon, paths: Paths
) -> None:
    from zotd.runtime.daemon import Daemon
    from zotd.runtime.listener import AlreadyRunning

    daemon = await start_daemon()
    assert stat.S_IMODE(paths.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.socket.parent.stat().st_mode) == 0o700
    with pytest.raises(AlreadyRunning):
        await Daemon(daemon.config, paths).run()


async def test_stale_socket_is_replaced(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    import socket

    paths.socket.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(paths.socket))
    stale.close()  # the file stays, nobody listens
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert await zot.ping()


async def test_workspaces_are_per_directory(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    other = short_tmp / "other"
    add_extension(other / ".zot" / "extensions", "local", "--commands", "only-there")
    daemon = await start_daemon()
    async with connect(paths.socket, cwd=project) as a, connect(paths.socket, cwd=other) as b:
        assert await a.list_commands() == []
        assert [c.name for c in await b.list_commands()] == ["only-there"]
        status = await a.status()
    assert sorted(w.path for w in status.workspaces) == sorted([str(project), str(other)])
    assert len(daemon.workspaces) == 2


async def test_idle_workspace_stops(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    from zotd.model.config import Config

    add_extension(paths.extensions_dir, "e", "--tools", "echo")
    daemon = await start_daemon(Config(ready_idle=0.1, idle_timeout=0.3))
    async with connect(paths.socket, cwd=project) as zot:
        pid = (await zot.list_extensions())[0].pid
    assert pid is not None
    with trio.fail_after(30):  # a hang guard
        while daemon.workspaces:
            await trio.sleep(0.05)
    assert not pid_alive(pid)
    # A new client starts it again.
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["echo"]


async def test_extension_runs_in_its_dir_with_its_args(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    directory = paths.extensions_dir / "cwd"
    directory.mkdir(parents=True)
    script = directory / "run.sh"
    script.write_text(
        "#!/bin/sh\n"
        'echo "{\\"type\\":\\"hello\\",\\"name\\":\\"cwd\\"}"\n'
        'echo "{\\"type\\":\\"register_command\\",\\"name\\":\\"$(basename "$PWD")-$1\\"}"\n'
        'echo "{\\"type\\":\\"ready\\"}"\n'
        "cat >/dev/null\n"
    )
    script.chmod(0o755)
    (directory / "extension.json").write_text('{"name": "cwd", "exec": "run.sh", "args": ["arg1"]}')
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        assert [c.name for c in await zot.list_commands()] == ["cwd-arg1"]


async def test_exec_found_on_path(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    directory = paths.extensions_dir / "onpath"
    directory.mkdir(parents=True)
    (directory / "extension.json").write_text(
        json.dumps(
            {
                "name": "onpath",
                "exec": os.path.basename(os.path.realpath(sys.executable)),
                "args": [str(FAKE), "--name", "onpath", "--tools", "echo"],
            }
        )
    )
    env = dict(os.environ, PATH=os.path.dirname(os.path.realpath(sys.executable)))
    await start_daemon(env=env)
    async with connect(paths.socket, cwd=project) as zot:
        assert [t.name for t in await zot.list_tools()] == ["echo"]


async def test_idle_timeout_zero_keeps_extensions_while_a_client_is_there(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    from zotd.model.config import Config

    add_extension(paths.extensions_dir, "e", "--tools", "echo")
    daemon = await start_daemon(Config(ready_idle=0.1, idle_timeout=0))
    async with connect(paths.socket, cwd=project) as zot:
        await trio.sleep(0.3)
        assert (await zot.call_tool("echo", {})).content == [TextBlock("{}")]
    with trio.fail_after(30):  # a hang guard
        while daemon.workspaces:
            await trio.sleep(0.02)


async def test_shutdown_time_does_not_grow_with_extensions(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    for i in range(12):
        add_extension(paths.extensions_dir, f"stubborn{i}", "--ignore-shutdown")
    daemon = await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        pids = [e.pid for e in await zot.list_extensions()]
    assert len(pids) == 12
    daemon.request_shutdown()
    with trio.fail_after(30):  # a hang guard only (the exact times: test_deadlines.py)
        while paths.socket.exists():
            await trio.sleep(0.02)
    # In parallel: one shutdown_timeout (1 s) plus one kill_timeout (0.5 s), not
    # twelve. One after the other, the safety net (stop_bound, 3 s) would have
    # cut short all but the first two escalations: every one ran its own.
    for i in range(12):
        log = paths.extension_log(f"stubborn{i}").read_text()
        assert "sending SIGTERM" in log and "sending SIGKILL" in log, (i, log)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)


async def test_exit_takes_the_process_group_along(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    directory = paths.extensions_dir / "forker"
    directory.mkdir(parents=True)
    pidfile = short_tmp / "child.pid"
    script = directory / "run.sh"
    script.write_text(
        "#!/bin/sh\n"
        'echo \'{"type":"hello","name":"forker"}\'\n'
        'echo \'{"type":"ready"}\'\n'
        f"sleep 60 & echo $! > {pidfile}\n"
        "read line\n"  # the first frame from zotd (hello_ack), then exit
        "exit 3\n"
    )
    script.chmod(0o755)
    (directory / "extension.json").write_text('{"name": "forker", "exec": "./run.sh"}')
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with trio.fail_after(30):  # a hang guard
            while (await zot.list_extensions())[0].state != "failed":
                await trio.sleep(0.02)
        child = int(pidfile.read_text())
        # The background `sleep` was in the extension's process group: gone too.
        with trio.fail_after(30):  # at once, or soon: not after its own 60 s
            while Path(f"/proc/{child}").exists() and pid_alive(child):
                await trio.sleep(0.02)
        info = (await zot.list_extensions())[0]
    assert info.last_error == "exited with code 3"


async def test_a_workspace_bug_fails_hello_not_the_daemon(
    start_daemon: StartDaemon, paths: Paths, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zotd.runtime.finding

    def broken_discover(**kwargs: object) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(zotd.runtime.finding, "discover", broken_discover)
    await start_daemon()
    with pytest.raises(ZotdError) as err:
        async with connect(paths.socket, cwd=project):
            pass
    assert err.value.code == "internal"
    assert "RuntimeError('boom')" in err.value.message
    async with connect(paths.socket, attach=False) as zot:
        assert await zot.ping()


async def test_a_crashed_extension_is_restarted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    from zotd.model.config import Config, RestartPolicy

    add_extension(paths.extensions_dir, "phoenix", "--commands", "boom", "--tools", "echo")
    await start_daemon(Config(ready_idle=0.1, restart=RestartPolicy(backoff_initial=0.1)))
    async with connect(paths.socket, cwd=project) as zot:
        await zot.subscribe()
        first = (await zot.list_extensions())[0]
        with pytest.raises(ZotdError):
            await zot.invoke_command("boom")
        states = []
        with trio.fail_after(30):  # a hang guard
            async for frame in zot.notifications():
                if isinstance(frame, ExtensionStatePush):
                    states.append((frame.state, frame.error))
                    if frame.state == "ready":
                        break
        again = (await zot.list_extensions())[0]
        assert (await zot.call_tool("echo", {"x": 1})).content == [TextBlock('{"x": 1}')]
    assert states[:2] == [
        ("failed", "exited with code 7"),
        ("restarting", "exited with code 7; restarting in 0.1 s"),
    ]
    assert (again.restarts, again.restart_reason, again.state) == (1, "exited with code 7", "ready")
    assert again.pid != first.pid
    assert "exited with code 7; restarting in 0.1 s" in paths.extension_log("phoenix").read_text()


async def test_a_flood_is_throttled_and_others_are_served(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    from zotd.runtime.extension import NOISE_PER_SECOND

    # Exact whatever the machine's speed: each flood is bounded by count, starts
    # when the test says so (after the watcher subscribed) and ends with a
    # registration (not noise) that says zotd has read all of it; the budget is
    # checked per elapsed second of the daemon's own clock (it runs in this
    # process), not against a log size that grows with the test's duration.
    flood = 100_000
    add_extension(paths.extensions_dir, "noisy", "--flood", f"notify:{flood}")
    add_extension(paths.extensions_dir, "garbled", "--flood", f"garbage:{flood}")
    add_extension(paths.extensions_dir, "calm", "--tools", "echo")
    await start_daemon()
    notes = 0
    noted = trio.Event()

    async def count_notes() -> None:
        nonlocal notes
        async for frame in watcher.notifications():
            if isinstance(frame, NotifyPush):
                notes += 1
                noted.set()

    async with (
        connect(paths.socket, cwd=project) as watcher,
        connect(paths.socket, cwd=project) as zot,
        trio.open_nursery() as nursery,
    ):
        await watcher.subscribe()
        nursery.start_soon(count_notes)
        with trio.fail_after(60):  # a hang guard only
            begin = trio.current_time()  # no noise is older
            await zot.invoke_command("noisy-flood")
            await zot.invoke_command("garbled-flood")
            for i in range(50):
                assert (await zot.call_tool("echo", {"i": i})).content == [
                    TextBlock(f'{{"i": {i}}}')
                ]
            flooded = {"noisy-flooded", "garbled-flooded"}
            while not flooded <= {c.name for c in await zot.list_commands()}:
                await trio.sleep(0.05)
            elapsed = trio.current_time() - begin
            # Stopped, each notes how many its last window dropped.
            for name in ("noisy", "garbled"):
                await zot.ext_disable(name)
            await noted.wait()
        nursery.cancel_scope.cancel()
    # A noise window lasts a second at least and admits at most the budget;
    # every window began within `elapsed`.
    allowed = NOISE_PER_SECOND * (int(elapsed + 1e-9) + 1)
    dropped: dict[str, int] = {}
    for name in ("noisy", "garbled"):
        lines = paths.extension_log(name).read_text().splitlines()
        summaries = [
            re.search(r"dropped (\d+) notify frames and bad lines in (one|its last) second", line)
            for line in lines
        ]
        skipped = sum("skipped a malformed line" in line for line in lines)
        dropped[name] = sum(int(m[1]) for m in summaries if m)
        others = [
            line
            for line, m in zip(lines, summaries, strict=True)
            if not m and "skipped a malformed line" not in line
        ]
        # The excess is dropped and counted in summaries, never a line per line.
        assert dropped[name] > 0, others
        assert len(others) <= 10, others[:20]
        if name == "garbled":  # a note for each bad line within the budget
            assert skipped + dropped[name] == flood
            assert skipped <= allowed
        else:
            assert skipped == 0
    # What reaches agents is at most what the budget admitted.
    assert 0 < notes <= flood - dropped["noisy"] <= allowed


async def test_the_lock_file_keeps_a_second_daemon_out(
    start_daemon: StartDaemon, paths: Paths
) -> None:
    from zotd.runtime.daemon import Daemon
    from zotd.runtime.listener import AlreadyRunning

    daemon = await start_daemon()
    lock = paths.socket.with_suffix(".lock")
    assert lock.read_text() == f"{os.getpid()}\n"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    paths.socket.unlink()  # even with the socket gone, the lock says who runs
    with pytest.raises(AlreadyRunning) as err:
        await Daemon(daemon.config, paths).run()
    assert str(err.value) == f"another zotd (pid {os.getpid()}) is already running: it holds {lock}"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
async def test_other_users_are_refused(
    start_daemon: StartDaemon, paths: Paths, short_tmp: Path
) -> None:
    await start_daemon()
    # Open the doors so that another user's connection reaches the daemon at all.
    short_tmp.chmod(0o711)
    paths.socket.parent.chmod(0o711)
    paths.socket.chmod(0o666)
    code = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.settimeout(5)\n"
        "s.connect(sys.argv[1])\n"
        's.sendall(b\'{"id": 1, "type": "ping"}\\n\')\n'
        "data = b''\n"
        "while chunk := s.recv(4096):\n"
        "    data += chunk\n"
        "sys.stdout.write(data.decode())\n"
    )
    with trio.fail_after(10):
        result = await trio.run_process(
            [sys.executable, "-c", code, str(paths.socket)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["error"] == {
        "code": "unauthorized",
        "message": "zotd serves only uid 0; this connection is from uid 65534",
    }


async def test_python3_extensions_run_on_zotds_interpreter(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # `"exec": "python3"` with a PATH that does not lead to zotd's Python (a
    # venv that was not activated): the extension still gets it, and the SDK.
    directory = paths.extensions_dir / "where"
    directory.mkdir(parents=True)
    (directory / "where.py").write_text(
        "import sys\n"
        "from zotd.sdk import Extension\n"
        "ext = Extension('where')\n"
        "@ext.tool()\n"
        "def python() -> str:\n"
        "    return sys.executable\n"
        "ext.run()\n"
    )
    (directory / "extension.json").write_text(
        json.dumps({"name": "where", "exec": "python3", "args": ["where.py"]})
    )
    await start_daemon(env={"PATH": "/usr/bin:/bin"})
    async with connect(paths.socket, cwd=project) as zot:
        result = await zot.call_tool("python")
    assert isinstance(result.content[0], TextBlock)
    assert os.path.dirname(result.content[0].text) == os.path.dirname(sys.executable)


async def test_extensions_get_an_allowlisted_environment(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(
        paths.extensions_dir,
        "env",
        "--tools",
        "environ",
        manifest={"env": {"MODE": "test"}, "env_passthrough": ["WEATHER_API_KEY"]},
    )
    daemon_env = {
        "PATH": os.environ["PATH"],
        "HOME": "/home/pat",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": "/home/pat/.config",
        "ANTHROPIC_API_KEY": "secret",
        "ZOTD_TOKEN": "secret too",
        "WEATHER_API_KEY": "asked for",
    }
    await start_daemon(env=daemon_env)
    async with connect(paths.socket, cwd=project) as zot:
        result = await zot.call_tool("environ")
    assert isinstance(result.content[0], TextBlock)
    env = json.loads(result.content[0].text)
    env.pop("LC_CTYPE", None)  # some Pythons set it at startup
    # The watchdog's mark, unique to this process (zotd/runtime/watchdog.py).
    assert re.fullmatch(r"\d+-[0-9a-f]{16}\.\d+", env.pop("ZOTD_INSTANCE"))
    assert env == {
        # zotd's own interpreter first, so that `"exec": "python3"` finds zotd.sdk.
        "PATH": with_own_python({"PATH": os.environ["PATH"]})["PATH"],
        "HOME": "/home/pat",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": "/home/pat/.config",
        "WEATHER_API_KEY": "asked for",
        "MODE": "test",
        "ZOT_HOME": str(paths.home),
    }
