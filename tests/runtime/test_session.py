"""The session over an in-memory stream pair, against a hub, without a socket.

Each test runs a :class:`~zotd.runtime.hub.Hub` whose extensions are fakes
(``tests.fakes``) and serves one or two connections with
:class:`~zotd.runtime.session.ClientSession` over
``trio.testing.memory_stream_pair``, under ``MockClock(autojump_threshold=0)``:
where a test waits for a deadline, it asserts the exact virtual time.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from tests.conftest import add_extension
from tests.fakes import Behaviour, FakeIO, FakeSpawner
from zotd.model.config import Config
from zotd.model.paths import Paths
from zotd.protocol import extension as ep
from zotd.runtime.hub import Hub
from zotd.runtime.session import ClientSession
from zotd.runtime.workspace import Context

EXACT = 1e-9


def answering(name: str, delay: float = 0.0) -> Behaviour:
    """Registers the tool ``echo`` and answers each call after ``delay`` seconds
    with the call's arguments as text; never answers a tool ``hang``."""

    async def behaviour(io: FakeIO) -> None:
        await io.hello(name, tools=["echo", "hang"])
        async with trio.open_nursery() as nursery:
            async for frame in io.frames():
                if isinstance(frame, ep.ToolCall) and frame.name == "echo":
                    nursery.start_soon(reply, io, frame)

    async def reply(io: FakeIO, frame: ep.ToolCall) -> None:
        await trio.sleep(delay)
        text = json.dumps(json.loads(bytes(frame.args)))
        await io.send(type="tool_result", id=frame.id, content=[{"type": "text", "text": text}])

    return behaviour


async def open_hub(
    nursery: trio.Nursery,
    paths: Paths,
    project: Path,
    behaviours: Mapping[str, Behaviour],
    config: Config | None = None,
) -> Hub:
    for name in behaviours:
        add_extension(paths.extensions_dir, name)
    spawner = FakeSpawner(nursery, behaviours)
    ctx = Context(config=config or Config(), paths=paths, explicit=[], spawner=spawner, env={})
    hub = Hub(ctx, cwd=project)
    await nursery.start(hub.run)
    return hub


class Agent:
    """The client's end of one in-memory connection served by a session."""

    def __init__(self, hub: Hub, nursery: trio.Nursery, number: int = 1) -> None:
        self.stream, server = trio.testing.memory_stream_pair()
        self.session = ClientSession(hub, server, number)
        nursery.start_soon(self.session.run)
        self._buf = b""

    async def send(self, *frames: dict[str, Any] | bytes) -> None:
        """Writes the frames in one write (dicts as JSON lines, bytes as they are)."""
        out = b"".join(
            f if isinstance(f, bytes) else json.dumps(f).encode() + b"\n" for f in frames
        )
        await self.stream.send_all(out)

    async def recv(self) -> dict[str, Any]:
        """The next frame the session wrote."""
        while b"\n" not in self._buf:
            chunk = await self.stream.receive_some()
            assert chunk, f"connection closed; unterminated tail {self._buf!r}"
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        frame = json.loads(line)
        assert isinstance(frame, dict)
        return frame

    async def request(self, frame: dict[str, Any] | bytes) -> dict[str, Any]:
        await self.send(frame)
        return await self.recv()

    async def hello(self, project: Path) -> dict[str, Any]:
        reply = await self.request(
            {"id": 0, "type": "hello", "protocol_version": 1, "cwd": str(project)}
        )
        assert reply["success"], reply
        return reply

    async def at_eof(self) -> bool:
        """Whether the session closes the connection with nothing more to say."""
        return await self.stream.receive_some() == b"" and not self._buf


def failed(rid: Any, command: str | None, code: str, message: str) -> dict[str, Any]:
    return {
        "type": "response",
        "id": rid,
        "command": command,
        "success": False,
        "error": {"code": code, "message": message},
    }


def text_of(reply: dict[str, Any]) -> str:
    assert reply["success"], reply
    content = reply["data"]["content"]
    assert isinstance(content, list)
    text = content[0]["text"]
    assert isinstance(text, str)
    return text


async def test_a_request_and_its_reply(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {"e": answering("e")})
    agent = Agent(hub, nursery)
    hello = await agent.hello(project)
    assert hello["data"]["workspace"] == str(project)
    assert list(hub.workspaces) == [project]

    reply = await agent.request(
        {"id": 7, "type": "call_tool", "name": "echo", "args": {"say": "hi"}}
    )
    assert (reply["id"], reply["command"]) == (7, "call_tool")
    assert json.loads(text_of(reply)) == {"say": "hi"}
    assert await agent.request({"id": "p", "type": "ping"}) == {
        "type": "response",
        "id": "p",
        "command": "ping",
        "success": True,
        "data": {"pong": True},
    }
    assert hub.in_flight == 0


async def test_a_request_before_hello_is_refused(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {})
    agent = Agent(hub, nursery)
    assert await agent.request({"id": 1, "type": "list_tools"}) == failed(
        1, "list_tools", "hello_required", "send `hello` first"
    )


async def test_a_bad_line_gets_a_clear_error_and_the_connection_goes_on(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {"e": answering("e")})
    agent = Agent(hub, nursery)
    await agent.hello(project)

    reply = await agent.request(b"this is not json\n")
    assert reply["success"] is False
    assert (reply["id"], reply["command"], reply["error"]["code"]) == (None, None, "bad_request")
    assert reply["error"]["message"].startswith("invalid JSON")

    assert await agent.request({"id": 2, "type": "no_such_thing"}) == failed(
        2, "no_such_thing", "unknown_command", "unknown request type 'no_such_thing'"
    )
    # The connection still serves: the next request is answered as usual.
    reply = await agent.request({"id": 3, "type": "call_tool", "name": "echo", "args": {}})
    assert (reply["id"], text_of(reply)) == (3, "{}")


async def test_busy_past_the_per_connection_limit(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    config = Config(max_client_requests=2)
    hub = await open_hub(nursery, paths, project, {"e": answering("e")}, config)
    agent = Agent(hub, nursery)
    await agent.hello(project)

    await agent.send(
        *({"id": i, "type": "call_tool", "name": "hang", "args": {}} for i in (1, 2)),
        {"id": 3, "type": "call_tool", "name": "echo", "args": {}},
    )
    assert await agent.recv() == failed(
        3,
        "call_tool",
        "busy",
        "this connection has 2 requests in flight, the most allowed; "
        "wait for some replies, then retry",
    )
    assert hub.in_flight == 2
    # `cancel` is answered even at the limit, and frees a place: the
    # cancelled call's reply comes first, then the cancel's own.
    await agent.send({"id": 4, "type": "cancel", "request_id": 1})
    assert await agent.recv() == failed(1, "call_tool", "cancelled", "cancelled by the client")
    assert await agent.recv() == {
        "type": "response",
        "id": 4,
        "command": "cancel",
        "success": True,
        "data": {"cancelled": True},
    }
    assert hub.in_flight == 1
    reply = await agent.request({"id": 5, "type": "call_tool", "name": "echo", "args": {}})
    assert (reply["id"], text_of(reply)) == (5, "{}")


async def test_busy_past_the_daemon_limit_counts_every_connection(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    config = Config(max_requests=1)
    hub = await open_hub(nursery, paths, project, {"e": answering("e")}, config)
    first, second = Agent(hub, nursery, 1), Agent(hub, nursery, 2)
    await first.hello(project)
    await second.hello(project)

    await first.send({"id": 1, "type": "call_tool", "name": "hang", "args": {}})
    while hub.in_flight < 1:
        await trio.lowlevel.checkpoint()
    assert await second.request(
        {"id": 1, "type": "call_tool", "name": "echo", "args": {}}
    ) == failed(
        1, "call_tool", "busy", "zotd has 1 requests in flight, the most allowed; retry soon"
    )


async def test_a_tool_call_past_its_deadline_is_a_timeout_at_that_moment(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {"e": answering("e")})
    agent = Agent(hub, nursery)
    await agent.hello(project)

    start = trio.current_time()
    reply = await agent.request(
        {"id": 1, "type": "call_tool", "name": "hang", "args": {}, "timeout_s": 2.5}
    )
    assert trio.current_time() - start == pytest.approx(2.5, abs=EXACT)
    assert (reply["id"], reply["success"], reply["error"]["code"]) == (1, False, "timeout")
    assert hub.in_flight == 0


async def test_end_of_input_is_answered_then_the_connection_closes(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {"e": answering("e", delay=1.5)})
    agent = Agent(hub, nursery)
    await agent.hello(project)

    start = trio.current_time()
    await agent.send(
        {"id": 1, "type": "call_tool", "name": "echo", "args": {"n": 1}},
        {"id": 2, "type": "ping"},
    )
    await agent.stream.send_eof()  # a half-close: the replies are still owed
    assert (await agent.recv())["command"] == "ping"
    reply = await agent.recv()
    assert trio.current_time() - start == pytest.approx(1.5, abs=EXACT)
    assert (reply["id"], json.loads(text_of(reply))) == (1, {"n": 1})
    assert await agent.at_eof()
    await agent.session.done.wait()
    assert hub.in_flight == 0
    assert hub.workspaces[project].clients == 0


async def test_end_of_input_before_any_request_closes_the_connection(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {})
    agent = Agent(hub, nursery)
    await agent.stream.send_eof()
    assert await agent.at_eof()
    await agent.session.done.wait()
    assert hub.workspaces == {}


# --- the hello deadline (client_hello_timeout) -----------------------------------------


async def test_no_hello_by_the_deadline_closes_the_connection_with_an_error(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {}, Config(client_hello_timeout=5.0))
    agent = Agent(hub, nursery)
    start = trio.current_time()
    assert (await agent.request({"id": 1, "type": "ping"}))["success"]  # ping is no hello
    assert await agent.recv() == failed(
        None, None, "hello_required", "no `hello` within 5 s; closing the connection"
    )
    assert trio.current_time() - start == pytest.approx(5.0, abs=EXACT)
    assert await agent.at_eof()
    await agent.session.done.wait()
    assert hub.in_flight == 0


async def test_a_silent_connection_is_closed_at_the_deadline(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {}, Config(client_hello_timeout=2.5))
    agent = Agent(hub, nursery)
    start = trio.current_time()
    await agent.send(b'{"id": 1, "type": "hel')  # half a line, then nothing
    assert (await agent.recv())["error"]["code"] == "hello_required"
    assert trio.current_time() - start == pytest.approx(2.5, abs=EXACT)
    assert await agent.at_eof()


async def test_a_hello_in_time_keeps_the_connection_open(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    hub = await open_hub(nursery, paths, project, {}, Config(client_hello_timeout=5.0))
    agent = Agent(hub, nursery)
    await trio.sleep(4.9)
    await agent.hello(project)
    await trio.sleep(60)
    assert (await agent.request({"id": 2, "type": "ping"}))["success"]


async def test_a_hello_still_being_answered_at_the_deadline_is_let_finish(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def slow(io: FakeIO) -> None:  # ready after 2 s: the hello waits for it
        await trio.sleep(2.0)
        await io.hello("slow", tools=["echo"])
        async for _ in io.frames():
            pass

    config = Config(client_hello_timeout=1.0, ready_grace=3.0)
    hub = await open_hub(nursery, paths, project, {"slow": slow}, config)
    agent = Agent(hub, nursery)
    start = trio.current_time()
    await agent.hello(project)
    assert trio.current_time() - start == pytest.approx(2.0, abs=EXACT)
    await trio.sleep(60)
    assert (await agent.request({"id": 2, "type": "ping"}))["success"]


async def test_a_failed_hello_does_not_stop_the_deadline(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    config = Config(client_hello_timeout=3.0, token="s3cret")
    hub = await open_hub(nursery, paths, project, {}, config)
    agent = Agent(hub, nursery)
    start = trio.current_time()
    reply = await agent.request({"id": 1, "type": "hello", "protocol_version": 1})
    assert reply["error"]["code"] == "unauthorized"
    assert (await agent.recv())["error"]["code"] == "hello_required"
    assert trio.current_time() - start == pytest.approx(3.0, abs=EXACT)
    assert await agent.at_eof()


# --- a client that does not read its replies (client_outbox_bytes) ------------------------


class SocketAgent:
    """The client's end of a real Unix socket pair served by a session, with
    small kernel buffers; it writes without blocking, and reads when told."""

    def __init__(self, hub: Hub, nursery: trio.Nursery, number: int) -> None:
        ours, theirs = trio.socket.socketpair()
        for sock in (ours, theirs):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
        self.sock = ours
        self.session = ClientSession(hub, trio.SocketStream(theirs), number)
        nursery.start_soon(self.session.run)
        self._buf = b""

    def write_some(self, data: memoryview) -> int:
        """Writes what the kernel takes now (0 if nothing)."""
        try:
            return os.write(self.sock.fileno(), data)
        except BlockingIOError:
            return 0

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self.write_some(view) :]
            if view:
                await trio.lowlevel.wait_writable(self.sock)

    async def recv(self) -> dict[str, Any]:
        while b"\n" not in self._buf:
            chunk = await self.sock.recv(1 << 16)
            assert chunk, "connection closed"
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        frame = json.loads(line)
        assert isinstance(frame, dict)
        return frame


async def test_a_client_that_does_not_read_its_replies_is_not_read_either(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, paths: Paths, project: Path
) -> None:
    async def echo(io: FakeIO) -> None:  # answers each call at once, in order
        await io.hello("e", tools=["echo"])
        async for frame in io.frames():
            if isinstance(frame, ep.ToolCall):
                text = json.dumps(json.loads(bytes(frame.args)))
                content = [{"type": "text", "text": text}]
                await io.send(type="tool_result", id=frame.id, content=content)

    config = Config(client_outbox_bytes=64 * 1024)
    hub = await open_hub(nursery, paths, project, {"e": echo}, config)
    agent = SocketAgent(hub, nursery, 1)
    with agent.sock:
        hello = {"id": "h", "type": "hello", "protocol_version": 1, "cwd": str(project)}
        await agent.send_all(json.dumps(hello).encode() + b"\n")
        assert (await agent.recv())["success"]

        # 200 calls whose replies are 16 KiB each (3 MiB in all), and no reading.
        pad = "x" * (16 * 1024)
        count = 200
        payload = b"".join(
            json.dumps(
                {"id": i, "type": "call_tool", "name": "echo", "args": {"i": i, "pad": pad}}
            ).encode()
            + b"\n"
            for i in range(count)
        )
        sent = 0
        while sent < len(payload):
            written = agent.write_some(memoryview(payload)[sent:])
            if not written:
                # Once everything in the daemon is idle, the kernel still takes
                # nothing more: the daemon has stopped reading this client.
                await trio.testing.wait_all_tasks_blocked()
                written = agent.write_some(memoryview(payload)[sent:])
                if not written:
                    break
            sent += written
        # The daemon read a few replies' worth, and stopped: what it took is the
        # outbox's 64 KiB, a read, and the sockets' small buffers, not 3 MiB.
        assert sent < 1024 * 1024, "the daemon kept reading a client that reads nothing"
        # (Past the 64 KiB, only the replies of the calls of the last read.)
        assert agent.session._outbox.unwritten < 256 * 1024

        # Meanwhile another client is served as usual.
        other = Agent(hub, nursery, 2)
        await other.hello(project)
        reply = await other.request(
            {"id": 1, "type": "call_tool", "name": "echo", "args": {"n": 1}}
        )
        assert json.loads(text_of(reply)) == {"n": 1}

        # Once the first client reads, it gets every reply, in full, in order of
        # its requests (the fake answers at once), and the rest of its requests
        # are read.
        async with trio.open_nursery() as writing:
            writing.start_soon(agent.send_all, payload[sent:])
            for i in range(count):
                reply = await agent.recv()
                assert reply["id"] == i
                assert json.loads(text_of(reply)) == {"i": i, "pad": pad}
        assert agent.session.in_flight == 0
