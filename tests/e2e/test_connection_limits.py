"""Connections are bounded (issue 15, points 6 and 9): ``max_connections``
refuses a connection past it with one clear error, and a daemon out of file
descriptors waits and accepts again, logging once, instead of flooding its log."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from tests.conftest import FAST, StartDaemon
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths


async def test_past_max_connections_a_connection_gets_one_error(
    start_daemon: StartDaemon, paths: Paths, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = await start_daemon(msgspec.structs.replace(FAST, max_connections=3))
    refusal = (
        "zotd serves 3 connections, its limit (max_connections = 3 in zotd.toml); "
        "close some, or raise max_connections"
    )
    caplog.set_level(logging.WARNING, logger="zotd.runtime.daemon")
    with trio.fail_after(30):
        async with contextlib.AsyncExitStack() as stack:
            clients: list[Client] = [
                await stack.enter_async_context(connect(paths.socket, cwd=project))
                for _ in range(3)
            ]
            # The client library sees the refusal as the reply to its hello.
            with pytest.raises(ZotdError) as err:
                async with connect(paths.socket, cwd=project):
                    pass
            assert (err.value.code, err.value.message) == ("busy", refusal)
            # A raw connection gets exactly one frame, answering its first request.
            with socket.socket(socket.AF_UNIX) as raw:
                raw.settimeout(30)
                raw.connect(str(paths.socket))
                raw.sendall(b'{"id": 7, "type": "ping"}\n')
                data = b""
                while chunk := await trio.to_thread.run_sync(raw.recv, 4096):
                    data += chunk
            assert [json.loads(line) for line in data.splitlines()] == [
                {
                    "type": "response",
                    "id": 7,
                    "command": None,
                    "success": False,
                    "error": {"code": "busy", "message": refusal},
                }
            ]
            # The three others are unaffected.
            for zot in clients:
                assert await zot.ping()
            await stack.aclose()  # they go...
            while daemon.sessions:
                await trio.sleep(0.01)
        async with connect(paths.socket, cwd=project) as zot:  # ...and there is room again
            assert await zot.ping()
    warnings = [r.getMessage() for r in caplog.records if r.name == "zotd.runtime.daemon"]
    assert warnings == [
        "refusing new connections: 3 served, max_connections = 3",
        "accepting connections again: 2 were refused at max_connections = 3",
    ]


#: File descriptors the daemon may have: enough to start, too few for the
#: connections the test opens.
FD_LIMIT = 64


def _lowered() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


async def test_out_of_file_descriptors_the_daemon_waits_and_logs_once(
    paths: Paths, project: Path, short_tmp: Path
) -> None:
    log = short_tmp / "zotd.log"
    config = short_tmp / "zotd.toml"
    config.write_text("client_hello_timeout = 600.0\n")  # the test's connections stay
    env = dict(
        os.environ,
        ZOT_HOME=str(paths.home),
        ZOTD_SOCKET=str(paths.socket),
        ZOTD_CONFIG=str(config),
    )
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "zotd"],
            env=env,
            cwd=short_tmp,
            stdout=out,
            stderr=out,
            preexec_fn=_lowered,
        )
    held: list[socket.socket] = []
    try:
        with trio.fail_after(30):  # a hang guard
            while "listening on" not in log.read_text():
                assert daemon.poll() is None, log.read_text()
                await trio.sleep(0.02)
            # More connections than the daemon has descriptors for: the ones it
            # cannot accept wait in the backlog.
            for _ in range(FD_LIMIT + 8):
                conn = socket.socket(socket.AF_UNIX)
                conn.connect(str(paths.socket))
                held.append(conn)
            while "cannot accept connections" not in log.read_text():
                assert daemon.poll() is None, log.read_text()
                await trio.sleep(0.02)
            for conn in held:
                conn.close()
            held.clear()
            # Once descriptors are free, a client is served.
            async with connect(paths.socket, cwd=project) as zot:
                assert await zot.ping()
            while "accepting connections again" not in log.read_text():
                await trio.sleep(0.02)
        text = log.read_text()
        assert "open-file limit is 64 (hard limit 64)" in text
        assert text.count("cannot accept connections: Too many open files") == 1
        assert text.count("accepting connections again, after") == 1
    finally:
        for conn in held:
            conn.close()
        daemon.terminate()
        daemon.wait()
