"""Agent protocol v1 on the raw socket: exact frames, bad input, pipelining, shutdown.

These tests speak to an in-process daemon over a plain Unix socket stream,
writing JSON lines by hand, so they see exactly what any agent would see.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from tests.conftest import FAST, StartDaemon, add_extension
from zotd import AGENT_PROTOCOL_VERSION, __version__
from zotd.model.config import Config
from zotd.model.paths import Paths
from zotd.runtime import session as session_module

#: How long any single reply may take in these tests: a hang guard, generous
#: for a slow or busy machine (a `hello` waits for extensions to start).
REPLY_TIMEOUT = 30.0

FAST_ECHO = Path(__file__).parents[1] / "extensions" / "fast_echo.py"


class Conn:
    """A raw connection: write bytes, read one JSON line at a time."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buf = bytearray()

    async def send(self, *frames: dict[str, Any] | str | bytes) -> None:
        """Sends frames in one write; dicts become JSON lines, str/bytes go as is."""
        out = bytearray()
        for frame in frames:
            if isinstance(frame, dict):
                out += json.dumps(frame).encode() + b"\n"
            elif isinstance(frame, str):
                out += frame.encode()
            else:
                out += frame
        await self.stream.send_all(bytes(out))

    async def raw_line(self) -> bytes:
        """The next line the daemon wrote (without its newline)."""
        with trio.fail_after(REPLY_TIMEOUT):
            while b"\n" not in self._buf:
                chunk = await self.stream.receive_some(65536)
                if not chunk:
                    raise EOFError(f"connection closed; unterminated tail {bytes(self._buf)!r}")
                self._buf += chunk
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        return line

    async def recv(self) -> dict[str, Any]:
        """The next frame, decoded."""
        frame = json.loads(await self.raw_line())
        assert isinstance(frame, dict)
        return frame

    async def request(self, frame: dict[str, Any] | str | bytes) -> dict[str, Any]:
        """Sends one frame and returns the next frame read."""
        await self.send(frame)
        return await self.recv()

    async def at_eof(self) -> bool:
        """Whether the daemon closes the connection (after anything still buffered)."""
        with trio.fail_after(REPLY_TIMEOUT):
            while True:
                try:
                    chunk = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return True
                if not chunk:
                    return True
                self._buf += chunk

    async def hello(self, cwd: Path | str | None, rid: int | str = 1, **fields: Any) -> None:
        """Says hello and asserts it worked."""
        frame: dict[str, Any] = {"id": rid, "type": "hello", "protocol_version": 1, **fields}
        if cwd is not None:
            frame["cwd"] = str(cwd)
        reply = await self.request(frame)
        assert reply["success"], reply


@asynccontextmanager
async def raw(paths: Paths) -> AsyncIterator[Conn]:
    stream = await trio.open_unix_socket(str(paths.socket))
    async with stream:
        yield Conn(stream)


def ok(rid: Any, command: str, data: Any) -> dict[str, Any]:
    return {"type": "response", "id": rid, "command": command, "success": True, "data": data}


def failed(rid: Any, command: str | None, code: str, message: str) -> dict[str, Any]:
    return {
        "type": "response",
        "id": rid,
        "command": command,
        "success": False,
        "error": {"code": code, "message": message},
    }


def error_of(reply: dict[str, Any]) -> tuple[Any, Any, str]:
    """(id, command, code) of a failed reply, after checking its shape."""
    assert set(reply) == {"type", "id", "command", "success", "error"}, reply
    assert reply["type"] == "response" and reply["success"] is False
    assert set(reply["error"]) == {"code", "message"} and reply["error"]["message"]
    return reply["id"], reply["command"], reply["error"]["code"]


PONG_LINE = b'{"type":"response","id":99,"command":"ping","success":true,"data":{"pong":true}}'


# --- bad input ---------------------------------------------------------------------


async def test_malformed_line_gets_bad_request_and_connection_lives(
    start_daemon: StartDaemon, paths: Paths
) -> None:
    await start_daemon()
    async with raw(paths) as c:
        await c.send("this is not json\n")
        line = await c.raw_line()
        assert line.startswith(
            b'{"type":"response","id":null,"command":null,"success":false,'
            b'"error":{"code":"bad_request","message":"invalid JSON: '
        ), line
        assert error_of(json.loads(line)) == (None, None, "bad_request")
        # A truncated object is malformed too.
        reply = await c.request('{"id": 4, "type": "pi\n')
        assert error_of(reply) == (None, None, "bad_request")
        # The exact bytes a client sees for a ping after all that.
        await c.send({"id": 99, "type": "ping"})
        assert await c.raw_line() == PONG_LINE


async def test_non_object_json_is_bad_request(start_daemon: StartDaemon, paths: Paths) -> None:
    await start_daemon()
    async with raw(paths) as c:
        for text in ("[1, 2, 3]", '"ping"', "42", "null", "true"):
            reply = await c.request(text + "\n")
            assert reply == failed(None, None, "bad_request", "a frame must be a JSON object"), text
        # An object without a (string) type: its id is still echoed.
        assert await c.request({"id": 3}) == failed(
            3, None, "bad_request", "missing or non-string `type`"
        )
        assert await c.request({"id": "x", "type": 5}) == failed(
            "x", None, "bad_request", "missing or non-string `type`"
        )
        assert await c.request({"id": 99, "type": "ping"}) == ok(99, "ping", {"pong": True})


async def test_blank_lines_are_ignored(start_daemon: StartDaemon, paths: Paths) -> None:
    await start_daemon()
    async with raw(paths) as c:
        await c.send("\n   \n\r\n", {"id": 1, "type": "ping"})
        assert await c.recv() == ok(1, "ping", {"pong": True})


async def test_missing_required_field_echoes_id(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        reply = await c.request({"id": 5, "type": "invoke_command"})
        assert error_of(reply) == (5, "invoke_command", "bad_request")
        assert "`name`" in reply["error"]["message"]
        # A wrongly typed field is the same kind of error.
        reply = await c.request({"id": "t", "type": "call_tool", "name": 12})
        assert error_of(reply) == ("t", "call_tool", "bad_request")
        # Only ids a client could have sent are echoed; a bool is neither string nor int.
        reply = await c.request({"id": True, "type": "ping"})
        assert error_of(reply) == (None, "ping", "bad_request")
        # A request with no id at all.
        reply = await c.request({"type": "ping"})
        assert error_of(reply) == (None, "ping", "bad_request")
        assert "`id`" in reply["error"]["message"]


async def test_odd_bytes_and_ids(start_daemon: StartDaemon, paths: Paths) -> None:
    await start_daemon()
    async with raw(paths) as c:
        # Invalid UTF-8 in a field the daemon reads.
        reply = await c.request(b'{"id": "\xff\xfe", "type": "ping"}\n')
        assert error_of(reply) == (None, "ping", "bad_request")
        assert reply["error"]["message"] == "invalid JSON: not UTF-8 (byte 8)"
        # A CRLF line ending is whitespace after the object: fine.
        assert await c.request(b'{"id": 2, "type": "ping"}\r\n') == ok(2, "ping", {"pong": True})
        # Ids must be strings or integers; others are not echoed.
        for rid in (1.5, None, [1], {"a": 1}):
            reply = await c.request({"id": rid, "type": "ping"})
            assert error_of(reply) == (None, "ping", "bad_request"), rid
        assert await c.request({"id": 3, "type": "ping"}) == ok(3, "ping", {"pong": True})


async def test_bad_arguments_of_known_requests(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo")
    await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        for rid, args in enumerate([[1], "x", None, 3], start=2):
            reply = await c.request({"id": rid, "type": "call_tool", "name": "echo", "args": args})
            assert reply == failed(
                rid, "call_tool", "bad_request", "`args` must be a JSON object"
            ), args
        reply = await c.request(
            {"id": 10, "type": "call_tool", "name": "echo", "args": {}, "timeout_s": 0}
        )
        assert reply == failed(10, "call_tool", "bad_request", "`timeout_s` must be positive")
        reply = await c.request({"id": 11, "type": "intercept", "event": "turn_end"})
        assert reply == failed(
            11,
            "intercept",
            "bad_request",
            "cannot intercept 'turn_end': only assistant_message, before_agent_start, tool_call, turn_start",
        )
        reply = await c.request({"id": 12, "type": "invoke_command", "name": "nope"})
        assert reply == failed(
            12,
            "invoke_command",
            "not_found",
            "no command /nope in this workspace (`zot commands` lists them)",
        )
        reply = await c.request({"id": 13, "type": "call_tool", "name": "bash"})
        assert reply == failed(
            13,
            "call_tool",
            "not_found",
            "'bash' is one of zot's built-in tools, not an extension's",
        )
        # Unknown extra fields are tolerated (forward compatibility).
        reply = await c.request({"id": 14, "type": "call_tool", "name": "echo", "future": 1})
        assert reply["success"] is True
        # The requests beyond the first version: mistyped fields, missing panels.
        cases: list[tuple[int, dict[str, Any], str]] = [
            (20, {"type": "intercept", "event": "turn_start", "step": "one"}, "bad_request"),
            (21, {"type": "intercept", "event": "assistant_message", "text": 5}, "bad_request"),
            (22, {"type": "panel_key", "key": "up"}, "bad_request"),
            (
                23,
                {"type": "panel_resize", "panel_id": "p", "width": "wide", "height": 1},
                "bad_request",
            ),
            (24, {"type": "panel_key", "panel_id": "p", "key": "up"}, "not_found"),
            (25, {"type": "panel_close", "panel_id": "p", "extension": "t"}, "not_found"),
            (26, {"type": "cancel", "request_id": [1]}, "bad_request"),
            (27, {"type": "cancel"}, "bad_request"),
        ]
        for rid, request, code in cases:
            reply = await c.request({"id": rid, **request})
            assert error_of(reply) == (rid, request["type"], code), reply
        reply = await c.request({"id": 28, "type": "cancel", "request_id": 999})
        assert reply == ok(28, "cancel", {"cancelled": False})
        reply = await c.request({"id": 29, "type": "ping"})
        assert reply == ok(29, "ping", {"pong": True})


async def test_push_frames_on_the_wire(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "n", "--commands", "tell")
    await start_daemon()
    async with raw(paths) as quiet, raw(paths) as c:
        await quiet.hello(project)
        await c.hello(project)
        assert await c.request({"id": 2, "type": "subscribe", "notifications": True}) == ok(
            2, "subscribe", {}
        )
        await c.send({"id": 3, "type": "invoke_command", "name": "tell", "args": "hi"})
        lines = {await c.raw_line(), await c.raw_line()}
        assert lines == {
            b'{"type":"notify","extension":"n","level":"warn","message":"told: hi"}',
            b'{"type":"response","id":3,"command":"invoke_command","success":true,'
            b'"data":{"extension":"n","action":"noop","prompt":"","insert":"","display":"","error":"","open_panel":null}}',
        }
        # The unsubscribed connection got nothing but its own replies.
        assert await quiet.request({"id": 9, "type": "ping"}) == ok(9, "ping", {"pong": True})


async def test_unknown_type_is_unknown_command(start_daemon: StartDaemon, paths: Paths) -> None:
    await start_daemon()
    async with raw(paths) as c:
        # Before hello too: the type is checked first.
        assert await c.request({"id": 7, "type": "frobnicate", "x": [1]}) == failed(
            7, "frobnicate", "unknown_command", "unknown request type 'frobnicate'"
        )
        assert await c.request({"id": "s", "type": "response"}) == failed(
            "s", "response", "unknown_command", "unknown request type 'response'"
        )


async def test_requests_before_hello_need_hello(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()
    async with raw(paths) as c:
        assert await c.request({"id": 1, "type": "ping"}) == ok(1, "ping", {"pong": True})
        for rid, kind in enumerate(
            ["status", "list_tools", "list_commands", "list_extensions", "subscribe", "shutdown"],
            start=2,
        ):
            assert await c.request({"id": rid, "type": kind}) == failed(
                rid, kind, "hello_required", "send `hello` first"
            )
        reply = await c.request(
            {"id": 9, "type": "call_tool", "name": "echo", "args": {"text": "x"}}
        )
        assert reply == failed(9, "call_tool", "hello_required", "send `hello` first")
        await c.hello(project, rid=10)
        assert await c.request({"id": 11, "type": "list_tools"}) == ok(
            11, "list_tools", {"tools": []}
        )
    # The refused shutdown did not stop anything.
    assert paths.socket.exists()


async def test_hello_reply_is_exact(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    import os

    await start_daemon()
    async with raw(paths) as c:
        reply = await c.request(
            {
                "id": 1,
                "type": "hello",
                "protocol_version": 1,
                "cwd": str(project),
                "provider": "anthropic",
                "model": "m",
                "client": "raw/1",
            }
        )
    assert reply == ok(
        1,
        "hello",
        {
            "protocol_version": AGENT_PROTOCOL_VERSION,
            "zotd_version": __version__,
            "workspace": str(project),
            "pid": os.getpid(),
        },
    )


async def test_hello_with_wrong_protocol_version(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()
    async with raw(paths) as c:
        reply = await c.request(
            {"id": 1, "type": "hello", "protocol_version": 2, "cwd": str(project)}
        )
        assert reply == failed(
            1,
            "hello",
            "bad_request",
            "protocol_version 2 is not supported; this zotd speaks 1",
        )
        # Not authenticated by the failed hello ...
        assert error_of(await c.request({"id": 2, "type": "status"}))[2] == "hello_required"
        # ... and a good hello afterwards works.
        await c.hello(project, rid=3)
        reply = await c.request({"id": 4, "type": "list_commands"})
        assert reply == ok(4, "list_commands", {"commands": []})


async def test_hello_cwd_must_be_an_absolute_directory(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    await start_daemon()
    async with raw(paths) as c:
        reply = await c.request({"id": 1, "type": "hello", "cwd": "relative/dir"})
        assert reply == failed(
            1, "hello", "bad_request", "`cwd` must be an absolute path, not 'relative/dir'"
        )
        missing = str(short_tmp / "does-not-exist")
        reply = await c.request({"id": 2, "type": "hello", "cwd": missing})
        assert reply == failed(2, "hello", "bad_request", f"`cwd` {missing!r} is not a directory")
        a_file = short_tmp / "a-file"
        a_file.write_text("")
        reply = await c.request({"id": 3, "type": "hello", "cwd": str(a_file)})
        assert error_of(reply) == (3, "hello", "bad_request")
        reply = await c.request({"id": 4, "type": "hello", "cwd": 17})
        assert error_of(reply) == (4, "hello", "bad_request")
        assert error_of(await c.request({"id": 5, "type": "status"}))[2] == "hello_required"


async def test_hello_without_cwd_joins_the_daemons_cwd(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()  # the fixture runs it with cwd=project
    async with raw(paths) as c:
        reply = await c.request({"id": 1, "type": "hello"})
    assert reply["success"] is True
    assert reply["data"]["workspace"] == str(project)


async def test_second_hello_is_bad_request(
    start_daemon: StartDaemon, paths: Paths, project: Path, short_tmp: Path
) -> None:
    daemon = await start_daemon()
    other = short_tmp / "other"
    other.mkdir()
    async with raw(paths) as c:
        await c.hello(project)
        reply = await c.request({"id": 2, "type": "hello", "cwd": str(other)})
        assert reply == failed(
            2, "hello", "bad_request", "`hello` was already sent on this connection"
        )
        assert await c.request({"id": 3, "type": "ping"}) == ok(3, "ping", {"pong": True})
    # The second hello did not start a workspace.
    assert list(daemon.workspaces) == [project]


async def test_token(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    await start_daemon(Config(token="s3cret", ready_idle=0.1))
    hello = {"type": "hello", "protocol_version": 1, "cwd": str(project)}
    async with raw(paths) as c:
        assert await c.request({"id": 1, **hello}) == failed(
            1, "hello", "unauthorized", "a valid `token` is required"
        )
        assert await c.request({"id": 2, **hello, "token": "wrong"}) == failed(
            2, "hello", "unauthorized", "a valid `token` is required"
        )
        assert await c.request({"id": 3, **hello, "token": ""}) == failed(
            3, "hello", "unauthorized", "a valid `token` is required"
        )
        # Still not in: everything but ping needs a successful hello.
        assert error_of(await c.request({"id": 4, "type": "list_tools"}))[2] == "hello_required"
        assert await c.request({"id": 5, "type": "ping"}) == ok(5, "ping", {"pong": True})
        reply = await c.request({"id": 6, **hello, "token": "s3cret"})
        assert reply["success"] is True
        assert await c.request({"id": 7, "type": "list_tools"}) == ok(
            7, "list_tools", {"tools": []}
        )
    # attach=false operators need the token as well.
    async with raw(paths) as c:
        reply = await c.request({"id": 1, "type": "hello", "attach": False})
        assert error_of(reply) == (1, "hello", "unauthorized")
        reply = await c.request({"id": 2, "type": "hello", "attach": False, "token": "s3cret"})
        assert reply["success"] is True


async def test_oversized_line_is_frame_too_large(start_daemon: StartDaemon, paths: Paths) -> None:
    await start_daemon(Config(ready_idle=0.1, max_frame_bytes=1024))
    async with raw(paths) as c:
        big = json.dumps({"id": 1, "type": "ping", "pad": "x" * 2000})
        reply = await c.request(big + "\n")
        assert reply == failed(
            None,
            None,
            "frame_too_large",
            f"a {len(big)}-byte request is over the 1024-byte limit",
        )
        assert await c.request({"id": 2, "type": "ping"}) == ok(2, "ping", {"pong": True})
        # An oversized line that arrives in pieces, with a good request behind it.
        await c.send('{"id": 3, "type": "ping", "pad": "')
        for _ in range(4):
            await c.send("y" * 500)
            await trio.sleep(0.01)
        await c.send('"}\n', {"id": 4, "type": "ping"})
        assert error_of(await c.recv()) == (None, None, "frame_too_large")
        assert await c.recv() == ok(4, "ping", {"pong": True})
        # Just under the limit is fine.
        pad = 1024 - len(json.dumps({"id": 5, "type": "ping", "pad": ""}))
        fits = json.dumps({"id": 5, "type": "ping", "pad": "z" * pad})
        assert len(fits) == 1024
        assert await c.request(fits + "\n") == ok(5, "ping", {"pong": True})


async def test_string_ids_are_echoed_as_strings(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    await start_daemon()
    async with raw(paths) as c:
        assert await c.request({"id": "1", "type": "ping"}) == ok("1", "ping", {"pong": True})
        await c.hello(project, rid="hello-1")
        assert await c.request({"id": "abc", "type": "list_tools"}) == ok(
            "abc", "list_tools", {"tools": []}
        )
        reply = await c.request({"id": "42", "type": "call_tool", "name": "nope"})
        assert reply == failed(
            "42", "call_tool", "not_found", reply["error"]["message"]
        ) and isinstance(reply["id"], str)
        assert await c.request({"id": "", "type": "ping"}) == ok("", "ping", {"pong": True})
        assert await c.request({"id": -5, "type": "ping"}) == ok(-5, "ping", {"pong": True})


# --- concurrency ---------------------------------------------------------------------


async def test_pipelined_requests_each_get_one_reply_fast_ones_first(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo,slow")
    await start_daemon()
    async with raw(paths) as c:
        frames: list[dict[str, Any]] = [
            {"id": 0, "type": "hello", "protocol_version": 1, "cwd": str(project)},
            {"id": 1, "type": "call_tool", "name": "slow", "args": {"seconds": 1.0}},
        ]
        frames += [
            {"id": i, "type": "call_tool", "name": "echo", "args": {"n": i}} for i in range(2, 21)
        ]
        start = trio.current_time()
        await c.send(*frames)  # hello and 20 requests in one write
        assert (await c.recv())["id"] == 0
        replies: dict[int, dict[str, Any]] = {}
        arrival: list[tuple[int, float]] = []
        for _ in range(20):
            reply = await c.recv()
            assert reply["id"] not in replies, f"two replies for id {reply['id']}"
            replies[reply["id"]] = reply
            arrival.append((reply["id"], trio.current_time() - start))
        assert sorted(replies) == list(range(1, 21))
        # The slow call comes last: none of the fast ones waited for it (the
        # order says so; how soon they came depends on the machine).
        assert arrival[-1][0] == 1, arrival
        assert arrival[-1][1] >= 1.0
        for i in range(2, 21):
            assert replies[i] == ok(
                i,
                "call_tool",
                {
                    "extension": "t",
                    "content": [{"type": "text", "text": json.dumps({"n": i})}],
                    "is_error": False,
                },
            )
        assert replies[1] == ok(
            1,
            "call_tool",
            {"extension": "t", "content": [{"type": "text", "text": "slept"}], "is_error": False},
        )
        # Nothing more is owed.
        await c.send({"id": 21, "type": "ping"})
        assert await c.recv() == ok(21, "ping", {"pong": True})


async def test_answered_calls_leave_nothing_behind(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo", "--intercept", "tool_call")
    daemon = await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        for i in range(20):
            await c.send({"id": i, "type": "call_tool", "name": "echo", "args": {"i": i}})
            await c.send({"id": f"g{i}", "type": "intercept", "tool_name": "bash"})
        replies = [await c.recv() for _ in range(40)]
        assert all(r["success"] for r in replies)
        (ws,) = daemon.workspaces.values()
        assert [ext.pending for ext in ws.extensions.values()] == [0]
        assert daemon.in_flight == 0


async def test_replies_after_half_close(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo,slow")
    await start_daemon()
    async with raw(paths) as c:
        await c.hello(project)
        await c.send(
            {"id": 2, "type": "call_tool", "name": "slow", "args": {"seconds": 0.2}},
            {"id": 3, "type": "ping"},
        )
        await c.stream.send_eof()
        assert await c.recv() == ok(3, "ping", {"pong": True})
        assert (await c.recv())["id"] == 2
        assert await c.at_eof()


async def test_calls_of_a_client_that_is_gone_are_withdrawn(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo,slow")
    daemon = await start_daemon()
    async with raw(paths) as leaver:
        await leaver.hello(project)
        await leaver.send(
            {"id": 2, "type": "call_tool", "name": "slow", "args": {"seconds": 0.5}},
            {"id": 3, "type": "call_tool", "name": "slow", "args": {"seconds": 30}},
        )
        with trio.fail_after(REPLY_TIMEOUT):  # until both calls are in flight
            while daemon.in_flight < 2:
                await trio.sleep(0.01)
    # The first reply cannot be written: the session ends, and the 30 s call
    # is withdrawn at once instead of counting against `busy` until it ends
    # (or until its deadline: the bound here is well inside it).
    with trio.fail_after(FAST.tool_timeout / 2):
        while daemon.sessions or daemon.in_flight:
            await trio.sleep(0.02)


async def test_client_disconnecting_mid_call_does_not_disturb_others(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo,slow")
    daemon = await start_daemon()
    async with raw(paths) as other:
        await other.hello(project, rid=1)
        async with raw(paths) as leaver:
            await leaver.hello(project)
            await leaver.send(
                {"id": 2, "type": "call_tool", "name": "slow", "args": {"seconds": 0.5}}
            )
            await other.send(
                {"id": 2, "type": "call_tool", "name": "slow", "args": {"seconds": 0.5}}
            )
            with trio.fail_after(REPLY_TIMEOUT):  # until both calls are in flight
                while daemon.in_flight < 2:
                    await trio.sleep(0.01)
        # The leaver is gone while its call runs; its reply has nowhere to go.
        await other.send({"id": 3, "type": "call_tool", "name": "echo", "args": {"a": 1}})
        # (In whichever order they come: that depends on the machine's speed.)
        replies = {reply["id"]: reply for reply in [await other.recv(), await other.recv()]}
        assert replies == {
            3: ok(
                3,
                "call_tool",
                {
                    "extension": "t",
                    "content": [{"type": "text", "text": '{"a": 1}'}],
                    "is_error": False,
                },
            ),
            2: ok(
                2,
                "call_tool",
                {
                    "extension": "t",
                    "content": [{"type": "text", "text": "slept"}],
                    "is_error": False,
                },
            ),
        }
        with trio.fail_after(REPLY_TIMEOUT):
            while len(daemon.sessions) > 1:
                await trio.sleep(0.02)
        reply = await other.request({"id": 4, "type": "list_extensions"})
        (info,) = reply["data"]["extensions"]
        assert (info["state"], info["restarts"], info["last_error"]) == ("ready", 0, "")
        status = await other.request({"id": 5, "type": "status"})
        assert [(w["path"], w["clients"]) for w in status["data"]["workspaces"]] == [
            (str(project), 1)
        ]


async def test_client_that_does_not_read_does_not_disturb_others(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    daemon = await start_daemon()
    async with raw(paths) as other:
        await other.hello(project)
        async with raw(paths) as hog:
            await hog.hello(None, attach=False)
            # About 3 MB of requests whose replies the hog never reads: once what
            # it is owed fills the buffers, the daemon stops reading from it.
            flood = b"".join(b'{"id": %d, "type": "ping"}\n' % i for i in range(100_000))
            async with trio.open_nursery() as nursery:

                async def hog_writes(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                    with trio.CancelScope() as scope:
                        task_status.started(scope)
                        await hog.send(flood)
                        raise AssertionError("the daemon read every request of a hog")

                writing = await nursery.start(hog_writes)
                # Answered while the hog still writes (its send never ends);
                # how soon depends on the machine: REPLY_TIMEOUT guards a hang.
                for i in range(10):
                    assert await other.request({"id": i, "type": "ping"}) == ok(
                        i, "ping", {"pong": True}
                    )
                await trio.sleep(1.0)
                writing.cancel()
        # The hog hung up with replies unread; its session ends, the other goes on.
        with trio.fail_after(REPLY_TIMEOUT):
            while len(daemon.sessions) > 1:
                await trio.sleep(0.02)
        assert await other.request({"id": 99, "type": "ping"}) == ok(99, "ping", {"pong": True})


async def test_client_that_does_not_read_its_call_replies_is_held_back(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # An extension fast enough that calls never pile up into `busy` replies:
    # only the outbox's bound can hold the client back.
    add_extension(paths.extensions_dir, "t", script=FAST_ECHO)
    (paths.extensions_dir / "t" / "extension.json").write_text(
        json.dumps({"name": "t", "exec": sys.executable, "args": [str(FAST_ECHO), "t"]})
    )
    daemon = await start_daemon()
    async with raw(paths) as hog:
        await hog.hello(project)
        call = b'{"id": %d, "type": "call_tool", "name": "echo", "args": {}}\n'
        async with trio.open_nursery() as nursery:

            async def hog_writes(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                # Small batches, so that calls never pile up into `busy`.
                with trio.CancelScope() as scope:
                    task_status.started(scope)
                    for batch in range(600):
                        await hog.send(b"".join(call % (batch * 100 + i) for i in range(100)))
                        await trio.sleep(0.001)
                    raise AssertionError("the daemon read every call of a hog")

            writing = await nursery.start(hog_writes)
            await trio.sleep(1.5)
            # What it is owed stays bounded: the outbox's limit, plus the calls
            # that may be in flight.
            (session,) = daemon.sessions
            assert len(session._outbox) <= session_module.OUTBOX_SIZE + FAST.max_client_requests
            writing.cancel()


# --- attach: false, shutdown -----------------------------------------------------------


async def test_unattached_hello(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    import os

    daemon = await start_daemon()
    async with raw(paths) as c:
        reply = await c.request({"id": 1, "type": "hello", "attach": False, "client": "op"})
        assert reply == ok(
            1,
            "hello",
            {
                "protocol_version": 1,
                "zotd_version": __version__,
                "workspace": None,
                "pid": os.getpid(),
            },
        )
        status = await c.request({"id": 2, "type": "status"})
        assert status["success"] is True
        data = status["data"]
        assert set(data) == {"pid", "zotd_version", "socket", "uptime_s", "workspaces", "shared"}
        assert (data["pid"], data["zotd_version"], data["socket"], data["workspaces"]) == (
            os.getpid(),
            __version__,
            str(paths.socket),
            [],
        )
        assert data["uptime_s"] >= 0
        message = "this connection joined no workspace (hello with attach=false)"
        for rid, kind in enumerate(["list_tools", "list_commands", "list_extensions"], start=3):
            assert await c.request({"id": rid, "type": kind}) == failed(
                rid, kind, "bad_request", message
            )
        reply = await c.request({"id": 6, "type": "invoke_command", "name": "x"})
        assert reply == failed(6, "invoke_command", "bad_request", message)
        assert await c.request({"id": 7, "type": "ping"}) == ok(7, "ping", {"pong": True})
        assert await c.request({"id": 8, "type": "subscribe"}) == ok(8, "subscribe", {})
    assert daemon.workspaces == {}


async def test_shutdown_request(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "t", "--tools", "echo")
    await start_daemon()
    async with raw(paths) as agent:
        await agent.hello(project)
        pid = (await agent.request({"id": 2, "type": "list_extensions"}))["data"]["extensions"][0][
            "pid"
        ]
        async with raw(paths) as op:
            await op.hello(None, attach=False)
            await op.send({"id": 9, "type": "shutdown"})
            assert await op.raw_line() == (
                b'{"type":"response","id":9,"command":"shutdown","success":true,"data":{}}'
            )
            assert await op.at_eof()
        assert await agent.at_eof()
    with trio.fail_after(REPLY_TIMEOUT):
        while paths.socket.exists():
            await trio.sleep(0.02)
    from tests.conftest import pid_alive

    assert not pid_alive(pid)
    assert "exited with code 0" in paths.extension_log("t").read_text()


async def test_requests_during_shutdown_get_shutting_down(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    # An extension that ignores `shutdown` holds the shutdown open for
    # shutdown_timeout + kill_timeout (1.5 s), a window in which the
    # connections are still served.
    add_extension(paths.extensions_dir, "stubborn", "--ignore-shutdown", "--tools", "slow")
    daemon = await start_daemon()
    async with raw(paths) as agent, raw(paths) as late, raw(paths) as op:
        await agent.hello(project)
        await agent.send({"id": 2, "type": "call_tool", "name": "slow", "args": {"seconds": 30}})
        await op.hello(None, attach=False)
        with trio.fail_after(REPLY_TIMEOUT):  # until the call is in flight
            while daemon.in_flight < 1:
                await trio.sleep(0.01)
        assert await op.request({"id": 3, "type": "shutdown"}) == ok(3, "shutdown", {})
        # Already attached: new work is refused, ping still answers.
        assert await agent.request({"id": 4, "type": "list_tools"}) == failed(
            4, "list_tools", "shutting_down", "zotd is shutting down"
        )
        assert await agent.request({"id": 5, "type": "ping"}) == ok(5, "ping", {"pong": True})
        # Connected before, hello after: refused too.
        reply = await late.request({"id": 1, "type": "hello", "cwd": str(project)})
        assert reply == failed(1, "hello", "shutting_down", "zotd is shutting down")
        # The call in flight is failed, not dropped.
        reply = await agent.recv()
        assert error_of(reply) == (2, "call_tool", "shutting_down")
        assert await agent.at_eof()
    with trio.fail_after(REPLY_TIMEOUT):
        while paths.socket.exists():
            await trio.sleep(0.02)


# --- busy ---------------------------------------------------------------------------------


def slow_call(rid: int, seconds: float = 1.0) -> dict[str, Any]:
    return {"id": rid, "type": "call_tool", "name": "slow", "args": {"seconds": seconds}}


async def test_busy_past_the_per_connection_limit(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "s", "--tools", "slow")
    await start_daemon(Config(ready_idle=0.1, max_client_requests=2))
    async with raw(paths) as c, raw(paths) as other:
        await c.hello(project)
        await other.hello(project)
        await c.send(slow_call(1), slow_call(2), slow_call(3))
        assert await c.recv() == failed(
            3,
            "call_tool",
            "busy",
            "this connection has 2 requests in flight, the most allowed; "
            "wait for some replies, then retry",
        )
        # Another connection is not affected.
        assert await other.request({"id": 9, "type": "ping"}) == ok(9, "ping", {"pong": True})
        replies = {(await c.recv())["id"] for _ in range(2)}
        assert replies == {1, 2}
        # Once replies are in, there is room again.
        assert await c.request({"id": 4, "type": "ping"}) == ok(4, "ping", {"pong": True})


async def test_busy_past_the_daemon_limit(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "s", "--tools", "slow")
    daemon = await start_daemon(Config(ready_idle=0.1, max_requests=3))
    async with raw(paths) as a, raw(paths) as b:
        await a.hello(project)
        await b.hello(project)
        await a.send(slow_call(1), slow_call(2))
        with trio.fail_after(REPLY_TIMEOUT):  # until a's two are in flight (1 s each)
            while daemon.in_flight < 2:
                await trio.sleep(0.01)
        await b.send(slow_call(3), slow_call(4))
        _, _, code = error_of(await b.recv())
        assert code == "busy"
        assert {(await b.recv())["id"]} == {3}
