"""Runs that zotd counts as crashes although no process exited on its own: a
spawn that failed for a transient reason, and a process that closed its
stdout and kept running. In virtual time, against in-memory fake extensions
(tests/e2e/test_spawn_retry.py and test_stdout_closed.py run real ones)."""

from __future__ import annotations

import errno
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.conftest import add_extension
from tests.fakes import Behaviour, FailingSpawner, FakeIO, FakeSpawner
from zotd.model.config import Config, RestartPolicy
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import extension as ep
from zotd.runtime.workspace import Context, Workspace

EXACT = 1e-9


async def open_workspace(
    nursery: trio.Nursery,
    paths: Paths,
    project: Path,
    name: str,
    behaviour: Behaviour,
    *,
    fail: int = 0,
    times: int = 2,
    config: Config | None = None,
    **options: Any,
) -> tuple[Workspace, FakeSpawner, FailingSpawner]:
    add_extension(paths.extensions_dir, name)
    fake = FakeSpawner(nursery, {name: behaviour}, **options)
    failing = FailingSpawner(fake, code=fail, times=times if fail else 0)
    ctx = Context(config=config or Config(), paths=paths, explicit=[], spawner=failing, env={})
    ws = Workspace(project, ctx)
    await nursery.start(ws.run)
    return ws, fake, failing


async def until_ready(ws: Workspace, name: str, fake: FakeSpawner, old: object = None) -> None:
    """Waits (virtual time; a 100 s guard) for a process other than ``old``, ready."""
    with trio.fail_after(100):
        while fake.processes.get(name, old) is old or ws.extensions[name].state != "ready":
            await trio.sleep(0.1)


def serving(name: str) -> Behaviour:
    """Registers the tool ``t`` and answers every call."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, tools=["t"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                await io.send(type="tool_result", id=frame.id, content=[])

    return behaviour


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (errno.EMFILE, "Too many open files (EMFILE)"),
        (errno.ENFILE, "Too many open files in system (ENFILE)"),
        (errno.EAGAIN, "Resource temporarily unavailable (EAGAIN)"),
        (errno.ENOMEM, "Cannot allocate memory (ENOMEM)"),
    ],
)
async def test_a_transient_spawn_error_is_retried_with_backoff(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    paths: Paths,
    project: Path,
    code: int,
    text: str,
) -> None:
    start = trio.current_time()
    ws, fake, failing = await open_workspace(nursery, paths, project, "s", serving("s"), fail=code)
    await until_ready(ws, "s", fake)
    ext = ws.extensions["s"]
    reason = f"cannot start {sys.executable}: {text}"
    assert failing.refused == 2
    # Tried at 0, again 0.5 s later, then 1 s after that: the third one runs.
    assert [t - start for _, t in fake.spawns] == pytest.approx([1.5], abs=EXACT)
    assert (ext.state, ext.restarts, ext.restart_reason) == ("ready", 2, reason)
    await ws.call_tool("t", Raw(b"{}"), None)
    log = paths.extension_log("s").read_text()
    assert f"{reason}; restarting in 0.5 s" in log
    assert f"{reason}; restarting in 1 s" in log


async def test_a_spawn_that_keeps_failing_is_given_up_on(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, fake, failing = await open_workspace(
        nursery, paths, project, "s", serving("s"), fail=errno.EMFILE, times=1000
    )
    await trio.sleep(100)
    ext = ws.extensions["s"]
    assert (ext.state, ext.restarts, failing.refused, fake.spawns) == ("failed", 5, 6, [])
    assert ext.last_error == (
        f"cannot start {sys.executable}: Too many open files (EMFILE); restarted 5 times "
        "in 60 s, so it is left stopped until `zot ext reload`"
    )


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (errno.ENOENT, "No such file or directory (ENOENT)"),
        (errno.EACCES, "Permission denied (EACCES)"),
        (errno.ENOEXEC, "Exec format error (ENOEXEC)"),
    ],
)
async def test_a_permanent_spawn_error_fails_at_once(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    paths: Paths,
    project: Path,
    code: int,
    text: str,
) -> None:
    ws, fake, failing = await open_workspace(nursery, paths, project, "s", serving("s"), fail=code)
    await ws.wait_settled()
    await trio.sleep(100)  # no restart comes
    ext = ws.extensions["s"]
    assert (failing.refused, fake.spawns) == (1, [])
    assert (ext.state, ext.restarts) == ("failed", 0)
    assert ext.last_error == f"cannot start {sys.executable}: {text}"


def closing(name: str, exit_code: int | None = None) -> Behaviour:
    """Registers ``t``; on a call, closes its stdout and keeps running (and,
    with ``exit_code``, exits with it once its stdin closes)."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, tools=["t"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                io.close_stdout()
        if exit_code is None:
            await trio.sleep_forever()  # deaf to `shutdown`: SIGTERM ends it
        io.crash(exit_code)

    return behaviour


async def test_a_closed_stdout_fails_its_calls_and_restarts_it(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, fake, _ = await open_workspace(nursery, paths, project, "c", closing("c"))
    await ws.wait_settled()
    first = fake.processes["c"]
    start = trio.current_time()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), None)
    # At once (0.5 s for it to exit, if it were exiting), not at the 60 s deadline.
    assert trio.current_time() - start == pytest.approx(0.5, abs=EXACT)
    assert err.value.code == "extension_failed"
    assert err.value.message == (
        "extension 'c' closed its stdout before replying (its process is still running, "
        "so no reply can come); it is being stopped"
    )
    # Stopped the normal way: shutdown, SIGTERM 2 s later; restarted 0.5 s after that.
    await until_ready(ws, "c", fake, first)
    assert first.signals == [(start + 2.5, signal.SIGTERM)]
    ext = ws.extensions["c"]
    assert (ext.restarts, ext.restart_reason) == (1, "closed its stdout but kept running")
    assert fake.spawns[-1][1] - start == pytest.approx(3, abs=EXACT)
    log = paths.extension_log("c").read_text()
    assert "closed its stdout but kept running; stopping it" in log
    assert "closed its stdout but kept running; restarting in 0.5 s" in log


async def test_a_closed_stdout_is_a_failure_even_if_it_then_exits_0(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    # `on-failure` (the default) restarts it: zotd failed it, whatever its exit code.
    ws, fake, _ = await open_workspace(nursery, paths, project, "c", closing("c", exit_code=0))
    await ws.wait_settled()
    first = fake.processes["c"]
    with pytest.raises(RequestError):
        await ws.call_tool("t", Raw(b"{}"), None)
    await until_ready(ws, "c", fake, first)
    assert (first.code, first.signals) == (0, [])
    assert ws.extensions["c"].restarts == 1


async def test_an_exit_that_closes_stdout_first_is_an_exit(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    # A process that closes its stdout and exits within the grace just crashed.
    async def behaviour(io: FakeIO) -> None:
        await io.hello("e", tools=["t"])
        async for _ in io.frames():
            io.close_stdout()
            await trio.sleep(0.2)
            io.crash(3)

    config = Config(restart=RestartPolicy(policy="never"))
    ws, _, _ = await open_workspace(nursery, paths, project, "e", behaviour, config=config)
    await ws.wait_settled()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), None)
    assert err.value.message == "extension 'e' exited with code 3 before replying"
    assert ws.extensions["e"].last_error == "exited with code 3"
