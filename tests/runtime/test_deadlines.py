"""Every deadline, in virtual time: the supervisor and workspace run in-process
against in-memory fake extensions under ``MockClock(autojump_threshold=0)``."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.conftest import add_extension
from tests.fakes import Behaviour, FakeIO, FakeSpawner
from zotd.model.config import Config, RestartPolicy
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import extension as ep
from zotd.runtime.workspace import Context, Workspace

EXACT = 1e-9


def elapsed(since: float) -> Any:
    """``trio.current_time() - since``, compared exactly (to float rounding)."""
    return pytest.approx(trio.current_time() - since, abs=EXACT)


async def open_workspace(
    nursery: trio.Nursery,
    paths: Paths,
    project: Path,
    behaviours: Mapping[str, Behaviour],
    config: Config | None = None,
    **options: Any,
) -> tuple[Workspace, FakeSpawner]:
    for name in behaviours:
        add_extension(paths.extensions_dir, name)
    spawner = FakeSpawner(nursery, behaviours, **options)
    ctx = Context(config=config or Config(), paths=paths, explicit=[], spawner=spawner, env={})
    ws = Workspace(project, ctx)
    await nursery.start(ws.run)
    return ws, spawner


def mute(name: str, **registrations: Any) -> Behaviour:
    """Registers, then reads every frame and never answers."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, **registrations)
        async for _ in io.frames():
            pass

    return behaviour


def stubborn(name: str, **registrations: Any) -> Behaviour:
    """Like :func:`mute`, and does not exit when its stdin closes either."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, **registrations)
        async for _ in io.frames():
            pass
        await trio.sleep_forever()

    return behaviour


def answering(
    name: str, delay: float = 0.0, block: bool = False, **registrations: Any
) -> Behaviour:
    """Answers every call after ``delay`` seconds (intercepts with ``block``)."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, **registrations)
        async with trio.open_nursery() as nursery:
            async for frame in io.frames():
                nursery.start_soon(reply, io, frame)

    async def reply(io: FakeIO, frame: ep.HostFrame) -> None:
        await trio.sleep(delay)
        if isinstance(frame, ep.ToolCall):
            await io.send(
                type="tool_result", id=frame.id, content=[{"type": "text", "text": "done"}]
            )
        elif isinstance(frame, ep.CommandInvoked):
            await io.send(type="command_response", id=frame.id, action="noop")
        elif isinstance(frame, ep.EventIntercept):
            await io.send(type="event_intercept_response", id=frame.id, block=block, reason=name)

    return behaviour


async def test_tool_call_deadline_is_60s(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"mute": mute("mute", tools=["t"])})
    await ws.wait_settled()
    start = trio.current_time()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), None)
    assert err.value.code == "timeout"
    assert elapsed(start) == 60
    assert "did not answer within 60 s" in err.value.message


async def test_per_call_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(
        nursery, paths, project, {"slow": answering("slow", 10, tools=["t"])}
    )
    await ws.wait_settled()
    start = trio.current_time()
    with pytest.raises(RequestError):
        await ws.call_tool("t", Raw(b"{}"), 2.5)
    assert elapsed(start) == 2.5
    start = trio.current_time()
    result = await ws.call_tool("t", Raw(b"{}"), 11)
    assert result.content == [ep.TextBlock("done")]
    assert elapsed(start) == 10


async def test_command_deadline_is_60s(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"mute": mute("mute", commands=["c"])})
    await ws.wait_settled()
    start = trio.current_time()
    with pytest.raises(RequestError) as err:
        await ws.invoke_command("c", "")
    assert err.value.code == "timeout"
    assert elapsed(start) == 60


async def test_intercept_silence_is_allow_after_5s(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    behaviours = {
        "mute": mute("mute", intercept=["tool_call"]),
        "fine": answering("fine", 1, intercept=["tool_call"]),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    start = trio.current_time()
    verdict = await ws.intercept("tool_call", {})
    assert not verdict.block
    assert elapsed(start) == 5


async def test_intercept_first_block_wins_without_waiting(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    behaviours = {
        "mute": mute("mute", intercept=["tool_call"]),
        "late": answering("late", 3, block=True, intercept=["tool_call"]),
        "early": answering("early", 1, block=True, intercept=["tool_call"]),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    start = trio.current_time()
    verdict = await ws.intercept("tool_call", {})
    assert (verdict.block, verdict.extension, verdict.reason) == (True, "early", "early")
    assert elapsed(start) == 1


def rewriting(name: str, delay: float, **changes: Any) -> Behaviour:
    """A tool-call guard that answers after ``delay`` seconds with the
    arguments it was sent, updated with ``changes``; records what it saw."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, intercept=["tool_call"])
        async with trio.open_nursery() as nursery:
            async for frame in io.frames():
                if isinstance(frame, ep.EventIntercept):
                    seen[name].append(frame.tool_args)
                    nursery.start_soon(reply, io, frame)

    async def reply(io: FakeIO, frame: ep.EventIntercept) -> None:
        await trio.sleep(delay)
        args = {**frame.tool_args, **changes} if changes else None
        await io.send(type="event_intercept_response", id=frame.id, modified_args=args)

    seen[name] = []
    return behaviour


#: What each ``rewriting`` guard was asked about, by guard name.
seen: dict[str, list[Any]] = {}


async def test_rewrites_chain_within_the_5s_bound(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    behaviours = {"a": rewriting("a", 3, x=1), "b": rewriting("b", 3)}
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    payload = {"tool_name": Raw(b'"bash"'), "tool_args": Raw(b'{"cmd":"ls"}')}
    # First time: both asked at once; at 3 s "a" turns out to rewrite, so
    # "b" is asked again about the new arguments; it would answer at 6 s,
    # past the bound: it counts as allow, and the rewrite stands.
    start = trio.current_time()
    verdict = await ws.intercept("tool_call", payload)
    assert elapsed(start) == 5
    assert (verdict.block, verdict.args, verdict.rewritten_by) == (
        False,
        Raw(b'{"cmd":"ls","x":1}'),
        ["a"],
    )
    assert seen["b"] == [{"cmd": "ls"}, {"cmd": "ls", "x": 1}]
    # Now "a" is known to rewrite: "b" is asked only after it, once.
    await trio.sleep(10)
    start = trio.current_time()
    verdict = await ws.intercept("tool_call", payload)
    assert elapsed(start) == 5
    assert seen["b"][2:] == [{"cmd": "ls", "x": 1}]
    assert verdict.rewritten_by == ["a"]


async def test_a_silent_guard_ordered_first_does_not_hold_up_a_block(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    behaviours = {
        "a-mute": mute("a-mute", intercept=["tool_call"]),
        "b-no": answering("b-no", 1, block=True, intercept=["tool_call"]),
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    start = trio.current_time()
    verdict = await ws.intercept("tool_call", {})
    assert (verdict.block, verdict.extension) == (True, "b-no")
    assert elapsed(start) == 1


async def test_no_guards_allows_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"m": mute("m")})
    await ws.wait_settled()
    start = trio.current_time()
    assert not (await ws.intercept("tool_call", {})).block
    assert elapsed(start) == 0


async def test_shutdown_escalation_times(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def polite(io: FakeIO) -> None:
        await io.hello("polite")
        async for frame in io.frames():
            if isinstance(frame, ep.Shutdown):
                await io.send(type="shutdown_ack")
                return

    ws, spawner = await open_workspace(
        nursery,
        paths,
        project,
        {"stubborn": stubborn("stubborn"), "polite": polite, "deaf": stubborn("deaf")},
        stubborn={"ignore_sigterm": True},
    )
    await ws.wait_settled()
    start = trio.current_time()
    await ws.stop_extensions("shutting_down")
    assert elapsed(start) == 3  # 2 s for shutdown, 1 s after SIGTERM, then SIGKILL
    sent = {name: [(t - start, s) for t, s in p.signals] for name, p in spawner.processes.items()}
    assert sent == {
        "stubborn": [(2.0, signal.SIGTERM), (3.0, signal.SIGKILL)],
        "deaf": [(2.0, signal.SIGTERM)],  # SIGTERM was enough
        "polite": [],
    }
    assert {e.name: e.state for e in ws.extensions.values()} == {
        "stubborn": "exited",
        "polite": "exited",
        "deaf": "exited",
    }


async def test_crash_fails_pending_call_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def crasher(io: FakeIO) -> None:
        await io.hello("crasher", tools=["t"])
        async for _ in io.frames():
            await trio.sleep(7)
            return  # exits (code 0 here) with the call unanswered

    ws, _ = await open_workspace(nursery, paths, project, {"crasher": crasher})
    await ws.wait_settled()
    start = trio.current_time()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), None)
    assert err.value.code == "extension_failed"
    assert elapsed(start) == 7
    assert ws.registry.tools == {}


async def test_ready_after_quiet_and_after_grace(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def chatty(io: FakeIO) -> None:
        await io.hello("chatty", ready=False)
        for i in range(100):  # never done registering for 0.2 s, never `ready`
            await trio.sleep(0.1)
            await io.send(type="register_command", name=f"c{i}")
        async for _ in io.frames():
            pass

    behaviours = {"quiet": mute("quiet", ready=False, tools=["q"]), "chatty": chatty}
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    start = trio.current_time()
    await ws.extensions["quiet"].settled.wait()
    assert elapsed(start) == pytest.approx(0.2)
    await ws.extensions["chatty"].settled.wait()
    assert elapsed(start) == 3
    assert {e.state for e in ws.extensions.values()} == {"ready"}
    assert "no `ready` within 3 s" in paths.extension_log("chatty").read_text()


async def test_an_extension_serving_calls_is_ready_after_its_registrations_end(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    # Like newer zot's SDK: no `ready`, and busy answering (and reporting
    # progress, and notifying) from the start: only registrations count.
    async def busy(io: FakeIO) -> None:
        await io.hello("busy", ready=False, tools=["t"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                await io.send(type="tool_progress", id=frame.id, message="on it")
                await io.send(type="notify", message="working")
                await io.send(type="tool_result", id=frame.id, content=[])

    ws, _ = await open_workspace(nursery, paths, project, {"busy": busy})
    start = trio.current_time()
    ext = ws.extensions["busy"]
    while "t" not in ws.registry.tools:
        await trio.sleep(0.01)
    while not ext.settled.is_set():
        await ws.call_tool("t", Raw(b"{}"), None)
        await trio.sleep(0.05)
    assert ext.state == "ready"
    assert elapsed(start) == pytest.approx(0.2, abs=0.06)


async def test_hello_deadline_and_agent_grace(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def tongue_tied(io: FakeIO) -> None:
        await trio.sleep_forever()

    ws, spawner = await open_workspace(nursery, paths, project, {"tied": tongue_tied})
    start = trio.current_time()
    await ws.wait_settled()  # what an agent's `hello` waits for
    assert elapsed(start) == 3
    assert ws.extensions["tied"].state == "starting"
    await ws.extensions["tied"].finished.wait()
    assert elapsed(start) == 10
    ext = ws.extensions["tied"]
    assert ext.state == "failed"
    assert ext.last_error == "refused: sent no `hello` frame within 10 s"
    assert spawner.processes["tied"].signals == [(start + 10, signal.SIGKILL)]


async def test_stuck_stdin_costs_the_caller_its_deadline_only(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def not_reading(io: FakeIO) -> None:
        await io.hello("stuck", tools=["t"], events=["turn_start"])
        await trio.sleep_forever()

    ws, _ = await open_workspace(
        nursery,
        paths,
        project,
        {"stuck": not_reading, "ok": answering("ok", tools=["fine"])},
        Config(extension_queue=2),
        stuck={"lockstep": True},
    )
    await ws.wait_settled()
    event = {"event": Raw(b'"turn_start"')}
    start = trio.current_time()
    delivered = [ws.emit_event("turn_start", event).delivered for _ in range(5)]
    assert elapsed(start) == 0  # emitting never waits on a subscriber
    assert delivered[0] == ["stuck"]
    assert delivered[-1] == []  # its queue is full: dropped, and said in its log
    assert "stdin queue full" in paths.extension_log("stuck").read_text()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), 4)
    assert err.value.code == "timeout"
    assert elapsed(start) == 4
    result = await ws.call_tool("fine", Raw(b"{}"), None)
    assert result.content == [ep.TextBlock("done")]


async def test_idle_workspace_stops_after_idle_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"m": mute("m")})
    ws.acquire()
    await trio.sleep(1000)
    assert not ws.stopping  # a client is attached
    ws.release()
    start = trio.current_time()
    await trio.sleep(200)
    ws.acquire()  # came back in time
    await trio.sleep(1000)
    assert not ws.stopping
    ws.release()
    start = trio.current_time()
    await ws.extensions["m"].finished.wait()
    assert ws.stopping
    assert elapsed(start) == 300


async def test_correlation_ids_count_per_extension(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    seen: dict[str, list[str]] = {"a": [], "b": []}

    def recording(name: str) -> Behaviour:
        async def behaviour(io: FakeIO) -> None:
            await io.hello(name, tools=[f"t{name}"], intercept=["tool_call"])
            async for frame in io.frames():
                if isinstance(frame, ep.ToolCall):
                    seen[name].append(frame.id)
                    await io.send(type="tool_result", id=frame.id, content=[])
                elif isinstance(frame, ep.EventIntercept):
                    seen[name].append(frame.id)
                    await io.send(type="event_intercept_response", id=frame.id)

        return behaviour

    ws, _ = await open_workspace(
        nursery, paths, project, {"a": recording("a"), "b": recording("b")}
    )
    await ws.wait_settled()
    for _ in range(2):
        await ws.call_tool("ta", Raw(b"{}"), None)
        await ws.intercept("tool_call", {})
    await ws.call_tool("tb", Raw(b"{}"), None)
    assert seen == {"a": ["1", "2", "3", "4"], "b": ["1", "2", "3"]}


async def test_a_begun_reload_completes_when_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, spawner = await open_workspace(
        nursery, paths, project, {"s": stubborn("s", tools=["t"])}, s={"ignore_sigterm": True}
    )
    await ws.wait_settled()
    old = spawner.processes["s"]
    start = trio.current_time()
    with trio.move_on_after(1):  # the caller gives up half-way through the stop
        await ws.refresh("s", reload=True)
    # The refresh went on: the old process was stopped (2 s, SIGTERM, 1 s,
    # SIGKILL), and a new one started and became ready.
    assert elapsed(start) == 3
    assert old.signals == [(start + 2, signal.SIGTERM), (start + 3, signal.SIGKILL)]
    assert spawner.processes["s"] is not old
    assert ws.extensions["s"].state == "ready"
    assert ws.extensions["s"].restarts == 1


def crashing(name: str, after: float = 0.0, code: int = 1) -> Behaviour:
    """Says hello and registers a tool, then exits with ``code`` after ``after`` seconds."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, tools=["t"])
        await trio.sleep(after)
        io.crash(code)

    return behaviour


async def test_restarts_back_off_then_give_up(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    start = trio.current_time()
    ws, spawner = await open_workspace(nursery, paths, project, {"c": crashing("c", code=3)})
    await trio.sleep(100)
    starts = [t - start for _, t in spawner.spawns]
    ext = ws.extensions["c"]
    # The first run, then five restarts 0.5, 1, 2, 4 and 8 s after each crash.
    assert starts == pytest.approx([0, 0.5, 1.5, 3.5, 7.5, 15.5], abs=EXACT)
    assert (ext.state, ext.restarts) == ("failed", 5)
    assert ext.restart_reason == "exited with code 3"
    assert ext.last_error == (
        "exited with code 3; restarted 5 times in 60 s, so it is left stopped until "
        "`zot ext reload`"
    )
    log = paths.extension_log("c").read_text()
    assert log.count("restarting in") == 5
    assert "exited with code 3; restarting in 8 s" in log


async def test_restart_window_forgets_old_crashes(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    config = Config(restart=RestartPolicy(intensity=2, window=10, backoff_initial=1))
    ws, _ = await open_workspace(nursery, paths, project, {"c": crashing("c", after=6)}, config)
    await trio.sleep(100)  # crashes every 6 s (+ backoff): never 2 restarts within 10 s
    ext = ws.extensions["c"]
    assert ext.state in ("ready", "restarting")
    assert ext.restarts >= 10


@pytest.mark.parametrize(
    ("policy", "code", "restarted"),
    [
        ("never", 1, False),
        ("on-failure", 0, False),
        ("on-failure", 1, True),
        ("always", 0, True),
    ],
)
async def test_restart_policies(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    paths: Paths,
    project: Path,
    policy: str,
    code: int,
    restarted: bool,
) -> None:
    config = msgspec.convert(
        {"extensions": {"c": {"restart": {"policy": policy}}}, "restart": {"policy": "never"}},
        Config,
    )
    ws, _ = await open_workspace(nursery, paths, project, {"c": crashing("c", code=code)}, config)
    await trio.sleep(5)
    assert (ws.extensions["c"].restarts > 0) is restarted


async def test_reload_during_backoff_starts_it_now(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    config = Config(restart=RestartPolicy(backoff_initial=20))
    ws, _ = await open_workspace(nursery, paths, project, {"c": crashing("c", after=1)}, config)
    await trio.sleep(2)
    assert ws.extensions["c"].state == "restarting"
    start = trio.current_time()
    ext = await ws.refresh("c", reload=True)
    assert ext is not None and ext.state == "ready"
    assert elapsed(start) == 0
    await trio.sleep(30)  # the old backoff does not start a second one
    assert ws.extensions["c"].restarts <= 2


async def test_a_silent_guard_leaves_the_rewrite_time_to_be_checked(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    # "a" rewrites an extension tool's arguments at 1 s; "b" never answers.
    # The guards still thinking get the deadline less the check's reserve
    # (0.5 s of 5 s), so the rewrite is checked, and stands, at 4.5 s; without
    # the reserve the check would have no time left and block the call.
    async def tool_owner(io: FakeIO) -> None:
        await io.hello("owner", tools=["t"])
        async for _ in io.frames():
            pass

    behaviours = {
        "a": rewriting("a", 1, x=1),
        "b": mute("b", intercept=["tool_call"]),
        "owner": tool_owner,
    }
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    payload = {"tool_name": Raw(b'"t"'), "tool_args": Raw(b'{"cmd":"ls"}')}
    start = trio.current_time()
    verdict = await ws.intercept("tool_call", payload)
    assert elapsed(start) == 4.5
    assert (verdict.block, verdict.args, verdict.rewritten_by) == (
        False,
        Raw(b'{"cmd":"ls","x":1}'),
        ["a"],
    )
