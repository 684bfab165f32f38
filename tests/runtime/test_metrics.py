"""Metrics per extension (zotd/model/metrics.py, recorded where each request
ends: zotd/runtime/pending.py's slots), in a workspace of in-memory fake
extensions, in virtual time: ``MockClock(autojump_threshold=0)``, so
latencies are exact; and a process's figures (zotd/runtime/proc_figures.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.conftest import add_extension
from tests.fakes import Behaviour, FakeIO, FakeSpawner
from tests.runtime.test_deadlines import answering, mute, open_workspace
from tests.runtime.test_lazy import fill_cache, lazy, tool_server, workspace
from tests.runtime.test_mcp_deadlines import FakeServer
from zotd.model.config import Config, RestartPolicy
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep
from zotd.runtime import proc_figures
from zotd.runtime.workspace import Context, Workspace

_decode_args = msgspec.json.Decoder(dict[str, Any]).decode


def metrics_of(ws: Workspace, name: str) -> ap.Metrics:
    """``name``'s metrics as ``list_extensions`` shows them."""
    (info,) = [i for i in ws.list_extensions().extensions if i.name == name]
    return info.metrics


def counts(m: ap.Metrics) -> tuple[int, int, int, int]:
    return (m.calls, m.errors, m.timeouts, m.cancels)


def timed(name: str) -> Behaviour:
    """Answers tool ``t`` after ``args.delay`` seconds (``args.error``: with
    ``is_error``), and command ``/c`` (with an ``error`` for ``/c fail``)."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, tools=["t"], commands=["c"])
        async with trio.open_nursery() as nursery:
            async for frame in io.frames():
                nursery.start_soon(reply, io, frame)

    async def reply(io: FakeIO, frame: ep.HostFrame) -> None:
        if isinstance(frame, ep.ToolCall):
            args = _decode_args(frame.args)
            await trio.sleep(args.get("delay", 0))
            text = [{"type": "text", "text": "done"}]
            await io.send(
                type="tool_result", id=frame.id, content=text, is_error=args.get("error", False)
            )
        elif isinstance(frame, ep.CommandInvoked):
            error = "it failed" if frame.args == "fail" else ""
            await io.send(type="command_response", id=frame.id, action="noop", error=error)

    return behaviour


def call_args(**args: Any) -> Raw:
    return Raw(msgspec.json.encode(args))


async def test_answers_are_calls_with_their_latencies(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"tm": timed("tm")})
    await ws.wait_settled()
    before = metrics_of(ws, "tm")
    assert counts(before) == (0, 0, 0, 0)
    assert (before.p50_ms, before.p95_ms, before.late_replies) == (None, None, 0)
    for delay in range(1, 21):  # 1 s .. 20 s
        await ws.call_tool("t", call_args(delay=delay), None)
    m = metrics_of(ws, "tm")
    assert counts(m) == (20, 0, 0, 0)
    # Nearest rank: the 10th and the 19th of 20.
    assert (m.p50_ms, m.p95_ms) == (10_000.0, 19_000.0)


async def test_a_tool_error_and_a_command_error_are_errors_with_latency(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"tm": timed("tm")})
    await ws.wait_settled()
    result = await ws.call_tool("t", call_args(delay=3, error=True), None)
    assert result.is_error
    assert (await ws.invoke_command("c", "fail")).error == "it failed"
    await ws.invoke_command("c", "")
    m = metrics_of(ws, "tm")
    assert counts(m) == (3, 2, 0, 0)
    assert (m.p50_ms, m.p95_ms) == (0.0, 3000.0)


async def test_a_tool_call_past_its_deadline_is_a_timeout_not_a_call(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws, _ = await open_workspace(nursery, paths, project, {"mute": mute("mute", tools=["t"])})
    await ws.wait_settled()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), 2.5)
    assert err.value.code == "timeout"
    m = metrics_of(ws, "mute")
    assert counts(m) == (0, 0, 1, 0)
    assert (m.p50_ms, m.p95_ms) == (None, None)


async def test_a_command_past_command_timeout_is_a_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    config = Config(command_timeout=3.0)
    behaviours = {"mute": mute("mute", commands=["c"])}
    ws, _ = await open_workspace(nursery, paths, project, behaviours, config)
    await ws.wait_settled()
    with pytest.raises(RequestError) as err:
        await ws.invoke_command("c", "")
    assert err.value.code == "timeout"
    assert counts(metrics_of(ws, "mute")) == (0, 0, 1, 0)


async def test_withdrawn_calls_and_commands_are_cancels(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    behaviours = {"mute": mute("mute", tools=["t"], commands=["c"])}
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    outcomes: list[object] = []
    withdraw = ws.start_call("t", Raw(b"{}"), None, outcomes.append)
    await trio.sleep(1)
    withdraw()  # (the agent's `cancel`)
    withdraw()  # (twice: counted once)
    with trio.CancelScope() as scope:  # a command, its task cancelled (a hangup)

        async def cancel_soon() -> None:
            await trio.sleep(1)
            scope.cancel()

        nursery.start_soon(cancel_soon)
        await ws.invoke_command("c", "")
    assert scope.cancelled_caught
    await trio.sleep(120)  # past every deadline: nothing more is counted
    assert outcomes == []
    assert counts(metrics_of(ws, "mute")) == (0, 0, 0, 2)


async def test_a_crash_fails_its_call_as_an_error_without_a_latency(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def crashing(io: FakeIO) -> None:
        await io.hello("cr", tools=["t"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                await trio.sleep(1)
                io.crash(1)

    config = Config(restart=RestartPolicy(policy="never"))
    ws, _ = await open_workspace(nursery, paths, project, {"cr": crashing}, config)
    await ws.wait_settled()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("t", Raw(b"{}"), None)
    assert err.value.code == "extension_failed"
    m = metrics_of(ws, "cr")
    assert counts(m) == (1, 1, 0, 0)
    assert m.p50_ms is None
    assert (m.rss_bytes, m.cpu_percent, m.cpu_s) == (None, None, None)  # no process up


async def test_counts_are_kept_across_a_restart(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    runs = 0

    async def once(io: FakeIO) -> None:  # answers, then crashes on its first run
        nonlocal runs
        runs += 1
        await io.hello("rs", tools=["t"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                await io.send(type="tool_result", id=frame.id, content=[])
                if runs == 1:
                    await trio.sleep(1)
                    io.crash(1)

    ws, _ = await open_workspace(nursery, paths, project, {"rs": once})
    await ws.wait_settled()
    await ws.call_tool("t", Raw(b"{}"), None)
    with trio.fail_after(60):  # (a new supervisor for each run)
        while not (ws.extensions["rs"].restarts == 1 and ws.extensions["rs"].state == "ready"):
            await trio.sleep(0.1)
    await ws.call_tool("t", Raw(b"{}"), None)
    assert counts(metrics_of(ws, "rs")) == (2, 0, 0, 0)


async def test_intercept_questions_are_not_calls(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    behaviours = {"g": answering("g", intercept=["tool_call"], tools=["t"])}
    ws, _ = await open_workspace(nursery, paths, project, behaviours)
    await ws.wait_settled()
    payload = {"tool_name": Raw(b'"t"'), "args": Raw(b"{}")}
    for _ in range(3):
        assert not (await ws.intercept("tool_call", payload)).block
    await ws.call_tool("t", Raw(b"{}"), None)
    assert counts(metrics_of(ws, "g")) == (1, 0, 0, 0)


async def test_an_mcp_servers_call_past_its_deadline_is_a_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    server = FakeServer()  # answers no tools/call
    add_extension(paths.extensions_dir, "srv", manifest={"kind": "mcp"})
    ctx = Context(
        config=Config(restart=RestartPolicy(policy="never")),
        paths=paths,
        explicit=[],
        spawner=FakeSpawner(nursery, {"srv": server}),
        env={},
    )
    ws = Workspace(project, ctx)
    await nursery.start(ws.run)
    await ws.wait_settled()
    with pytest.raises(RequestError):
        await ws.call_tool("slow", Raw(b"{}"), 2.0)
    outcomes: list[object] = []
    withdraw = ws.start_call("slow", Raw(b"{}"), None, outcomes.append)
    await trio.sleep(1)
    withdraw()
    assert counts(metrics_of(ws, "srv")) == (0, 0, 1, 1)


async def test_a_call_held_while_it_wakes_is_timed_from_its_sending(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    behaviours = {"lz": tool_server("lz", [], delay=5)}  # 5 s to its hello
    async with workspace(paths, project, behaviours) as (ws, _):
        await ws.call_tool("t", Raw(b"{}"), None)  # held, woken, sent, answered at once
        m = metrics_of(ws, "lz")
        assert counts(m) == (1, 0, 0, 0)
        assert m.p50_ms == 0.0  # its wake is its handshake's, not its answer's


async def test_a_call_held_past_its_deadline_is_a_timeout_and_one_withdrawn_a_cancel(
    autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    lazy(paths, "lz")
    await fill_cache(paths, project, "lz", [])
    behaviours = {"lz": tool_server("lz", [], delay=30)}  # 30 s to its hello
    async with workspace(paths, project, behaviours) as (ws, _):
        with pytest.raises(RequestError) as err:
            await ws.call_tool("t", Raw(b"{}"), 2.0)
        assert err.value.code == "timeout"
        outcomes: list[object] = []
        withdraw = ws.start_call("t", Raw(b"{}"), None, outcomes.append)
        await trio.sleep(1)
        withdraw()  # still held: never sent
        assert ws.extensions["lz"].state == "starting"
        assert counts(metrics_of(ws, "lz")) == (0, 0, 1, 1)


def test_a_process_figures_are_read_and_a_gone_one_gives_nothing() -> None:
    figures = proc_figures.look(os.getpid(), 1.0)
    assert figures.rss_bytes is not None and figures.rss_bytes > 0
    assert figures.cpu_s is not None and figures.cpu_percent is not None
    # Looked at again at once: the same percent (too short a span to mean anything).
    assert proc_figures.look(os.getpid(), 1.0).cpu_percent == figures.cpu_percent
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert proc_figures.look(child.pid, 2.0) == proc_figures.NOTHING
    assert proc_figures.look(None) == proc_figures.NOTHING
    assert proc_figures.look(0) == proc_figures.NOTHING


def test_what_is_remembered_of_processes_is_bounded() -> None:
    for started in range(proc_figures.REMEMBERED + 10):
        proc_figures.look(os.getpid(), float(started))
    assert len(proc_figures._last) == proc_figures.REMEMBERED
    proc_figures._last.clear()
