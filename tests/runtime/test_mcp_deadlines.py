"""An MCP server's deadlines, in virtual time: ``initialize``, a call's deadline
and its ``notifications/cancelled``, and agents not held up by a slow start.

The "server" is a coroutine speaking JSON-RPC lines over the fake process's
pipes (tests/fakes.py), so the mcp package's client runs for real in the
daemon's code while the clock jumps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from tests.conftest import add_extension
from tests.fakes import FakeIO, FakeSpawner
from zotd.model.config import Config, RestartPolicy
from zotd.model.errors import RequestError
from zotd.model.paths import Paths
from zotd.protocol.lines import LineSplitter
from zotd.runtime.workspace import Context, Workspace


class FakeServer:
    """A scripted MCP server: answers ``initialize`` (unless ``mute``) and
    ``tools/list`` (one tool, ``slow``), never answers ``tools/call``, and
    records every message it reads."""

    def __init__(self, *, mute: bool = False) -> None:
        self.mute = mute
        self.seen: list[dict[str, Any]] = []
        self.cancelled = trio.Event()

    async def __call__(self, io: FakeIO) -> None:
        splitter = LineSplitter(1 << 20)
        process = io._process
        while True:
            chunk = await process.inp.receive_some()
            if not chunk:
                return
            for line in splitter.feed(chunk):
                assert isinstance(line, bytes)
                await self._on(io, msgspec.json.decode(line))

    async def _on(self, io: FakeIO, message: dict[str, Any]) -> None:
        self.seen.append(message)
        method = message.get("method")
        if method == "initialize" and not self.mute:
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }
            await io.send(jsonrpc="2.0", id=message["id"], result=result)
        elif method == "tools/list":
            tools = [{"name": "slow", "inputSchema": {"type": "object"}}]
            await io.send(jsonrpc="2.0", id=message["id"], result={"tools": tools})
        elif method == "notifications/cancelled":
            self.cancelled.set()


async def _workspace(
    nursery: trio.Nursery, paths: Paths, project: Path, server: FakeServer
) -> Workspace:
    add_extension(paths.extensions_dir, "srv", manifest={"kind": "mcp"})
    spawner = FakeSpawner(nursery, {"srv": server})
    config = Config(restart=RestartPolicy(policy="never"))
    ctx = Context(config=config, paths=paths, explicit=[], spawner=spawner, env={})
    ws = Workspace(project, ctx)
    await nursery.start(ws.run)
    return ws


async def test_a_server_that_never_answers_initialize_fails_at_its_deadline(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    ws = await _workspace(nursery, paths, project, FakeServer(mute=True))
    start = trio.current_time()
    await ws.wait_settled()  # agents are not held up past ready_grace
    assert trio.current_time() - start == pytest.approx(3.0, abs=0.01)
    ext = ws.extensions["srv"]
    assert ext.state == "starting"
    with trio.fail_after(100):
        await ext.finished.wait()
    assert trio.current_time() - start == pytest.approx(60.0, abs=0.1)
    assert ext.state == "failed"
    assert ext.last_error == "did not answer MCP `initialize` within 60 s"


async def test_a_call_past_its_deadline_is_cancelled_on_the_server(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    server = FakeServer()
    ws = await _workspace(nursery, paths, project, server)
    await ws.wait_settled()
    assert ws.extensions["srv"].state == "ready"
    assert [t.name for t in ws.registry.tool_infos()] == ["slow"]
    start = trio.current_time()
    with pytest.raises(RequestError) as err:
        await ws.call_tool("slow", Raw(b"{}"), 2.0)
    assert err.value.code == "timeout"
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)
    with trio.fail_after(1):
        await server.cancelled.wait()
    call = next(m for m in server.seen if m.get("method") == "tools/call")
    cancel = next(m for m in server.seen if m.get("method") == "notifications/cancelled")
    assert cancel["params"]["requestId"] == call["id"]
    assert call["params"]["name"] == "slow"
