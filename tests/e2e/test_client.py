"""zotd.client from both event loops it promises: asyncio and trio."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.conftest import StartDaemon, add_extension
from zotd.client import NotRunning, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol.agent import NotifyPush
from zotd.protocol.extension import TextBlock


def _answers(path: Path) -> bool:
    """Whether something accepts connections on the socket ``path``."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


@pytest.fixture
def daemon_process(paths: Paths, short_tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m zotd`` in a subprocess, with one fake extension, until the socket answers."""
    ext = add_extension(short_tmp / "exts", "e", "--tools", "echo", "--commands", "tell")
    env = dict(
        os.environ,
        ZOT_HOME=str(paths.home),
        ZOTD_SOCKET=str(paths.socket),
        ZOTD_CONFIG=str(short_tmp / "none.toml"),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "zotd", "--ext", str(ext)],
        env=env,
        cwd=short_tmp,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30  # a hang guard, generous for a busy machine
        while not _answers(paths.socket):  # the file exists from bind(), before listen()
            assert proc.poll() is None, "the daemon exited"
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.02)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_client_under_asyncio(
    daemon_process: subprocess.Popen[bytes], paths: Paths, project: Path
) -> None:
    async def agent() -> tuple[list[str], str, NotifyPush]:
        async with connect(paths.socket, cwd=project, client="asyncio-agent/1") as zot:
            tools = [t.name for t in await zot.list_tools()]
            result = await zot.call_tool("echo", {"city": "Berlin"})
            await zot.subscribe()
            await zot.invoke_command("tell", "from asyncio")
            async for frame in zot.notifications():
                assert isinstance(frame, NotifyPush)
                return tools, result.content[0].text, frame  # type: ignore[union-attr]
        raise AssertionError("no notification")

    tools, text, note = asyncio.run(agent())
    assert tools == ["echo"]
    assert text == '{"city": "Berlin"}'
    assert note == NotifyPush(extension="e", level="warn", message="told: from asyncio")


async def test_errors_carry_codes(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    add_extension(paths.extensions_dir, "e", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with pytest.raises(ZotdError) as err:
            await zot.call_tool("missing")
        assert err.value.code == "not_found"
        assert err.value.message == "no tool 'missing' in this workspace (`zot tools` lists them)"
        with pytest.raises(ZotdError) as err:
            await zot.request("frobnicate")
        assert err.value.code == "unknown_command"
        # The connection is still good.
        assert (await zot.call_tool("echo", {"x": 1})).content == [TextBlock('{"x": 1}')]


async def test_not_running(short_tmp: Path) -> None:
    with pytest.raises(NotRunning) as err:
        async with connect(short_tmp / "nothing.sock"):
            pass
    assert err.value.code == "not_running"
    assert "zotd start" in str(err.value)


async def test_connection_lost_fails_pending_calls(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "e", "--tools", "slow")
    daemon = await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        async with trio.open_nursery() as nursery:

            async def stop_soon() -> None:
                # Once the call is pending in the extension (not a guess at how long that takes).
                ext = next(iter(daemon.workspaces.values())).extensions["e"]
                while not ext.pending:
                    await trio.sleep(0.01)
                daemon.request_shutdown()

            nursery.start_soon(stop_soon)
            with trio.fail_after(30), pytest.raises(ZotdError) as err:  # a hang guard only
                await zot.call_tool("slow", {"seconds": 30})
        # The extension is stopped under the pending call: it is told why.
        assert err.value.code == "shutting_down"
        with pytest.raises(ZotdError) as err:
            await zot.ping()
        assert err.value.code == "connection_lost"


async def test_many_calls_at_once_and_a_cancelled_one(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "e", "--tools", "echo,slow")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        results: dict[int, str] = {}

        async def call(i: int) -> None:
            result = await zot.call_tool("echo", {"i": i})
            results[i] = result.content[0].text  # type: ignore[union-attr]

        # Requests from many tasks share the connection; each gets its own reply.
        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(call, i)
        assert results == {i: f'{{"i": {i}}}' for i in range(100)}
        # A call its caller gives up on: the client goes on, and the reply
        # that comes later is dropped.
        with trio.move_on_after(0.1) as scope:
            await zot.call_tool("slow", {"seconds": 0.3})
        assert scope.cancelled_caught
        assert (await zot.call_tool("echo", {"after": 1})).content == [TextBlock('{"after": 1}')]
        with trio.fail_after(30):  # a hang guard: until the late reply came and was dropped
            while (await zot.list_extensions())[0].late_replies == 0:
                await trio.sleep(0.02)
        assert (await zot.call_tool("echo", {"late": 1})).content == [TextBlock('{"late": 1}')]


async def test_a_reply_that_does_not_fit_is_a_bad_reply(short_tmp: Path) -> None:
    # A server that answers `hello` properly, then a call with the wrong data.
    path = short_tmp / "odd.sock"
    sock = trio.socket.socket(trio.socket.AF_UNIX)
    await sock.bind(str(path))
    sock.listen()
    listener = trio.SocketListener(sock)

    async def serve(stream: trio.SocketStream) -> None:
        buffer = b""
        replies = [
            {"protocol_version": 1, "zotd_version": "x", "workspace": None, "pid": 1},
            {"extension": "e", "content": "not a list"},
        ]
        while replies:
            buffer += await stream.receive_some(65536)
            while b"\n" in buffer and replies:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                reply = {"type": "response", "id": request["id"], "command": request["type"]}
                reply |= {"success": True, "data": replies.pop(0)}
                await stream.send_all(json.dumps(reply).encode() + b"\n")
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, serve, [listener])
        async with connect(path) as zot:
            with pytest.raises(ZotdError) as err:
                await zot.call_tool("echo")
            assert err.value.code == "bad_reply"
            assert "call_tool" in err.value.message
        nursery.cancel_scope.cancel()


async def test_oversized_request_fails_locally(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    add_extension(paths.extensions_dir, "e", "--tools", "echo")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        with trio.fail_after(5), pytest.raises(ZotdError) as err:
            await zot.call_tool("echo", {"text": "x" * (17 * 1024 * 1024)})
        assert err.value.code == "frame_too_large"
        assert (await zot.call_tool("echo", {})).content == [TextBlock("{}")]
