"""In-memory extension processes, for running the supervisor in virtual time.

A real subprocess would make ``MockClock(autojump_threshold=0)`` jump while
the daemon waits on the child's pipes, so deadline tests swap the spawner for
:class:`FakeSpawner`: each "process" is a coroutine in the test's nursery that
reads host frames and writes extension frames over in-memory streams.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio
import trio.testing

from zotd.protocol.extension import HostFrame, decode_host_frame
from zotd.protocol.frames import UnknownFrame
from zotd.protocol.lines import LineSplitter
from zotd.runtime.process import Process, Spawner


class FakeIO:
    """What a fake extension sees: frames in, JSON objects out."""

    def __init__(self, process: FakeProcess) -> None:
        self._process = process

    async def send(self, **obj: Any) -> None:
        """Writes one frame (``type=...`` and its fields)."""
        await self._process.out.send_all(msgspec.json.encode(obj) + b"\n")

    def frames(self) -> AsyncIterator[HostFrame]:
        """Host frames until stdin is closed (``async for``)."""
        return _Frames(self._process.inp)

    def close_stdout(self) -> None:
        """Closes its stdout and keeps running (as ``os.close(1)`` would)."""
        self._process.out.close()

    def crash(self, code: int = 1) -> None:
        """Ends the process now with exit code ``code`` (the behaviour is cancelled)."""
        self._process.exit(code)

    async def hello(self, name: str, *, ready: bool = True, **registrations: Any) -> None:
        """``hello``, then ``register_*``/``subscribe`` frames, then ``ready``."""
        await self.send(type="hello", name=name)
        for cmd in registrations.get("commands", ()):
            await self.send(type="register_command", name=cmd)
        for tool in registrations.get("tools", ()):
            await self.send(type="register_tool", name=tool, schema={"type": "object"})
        if "intercept" in registrations or "events" in registrations:
            await self.send(
                type="subscribe",
                events=registrations.get("events", []),
                intercept=registrations.get("intercept", []),
            )
        if ready:
            await self.send(type="ready")


class _Frames:
    # A plain async iterator, not a generator: a behaviour may stop iterating
    # at any point without leaving a generator for the GC to finalize.
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._splitter = LineSplitter()
        self._ready: list[HostFrame] = []

    def __aiter__(self) -> _Frames:
        return self

    async def __anext__(self) -> HostFrame:
        while not self._ready:
            chunk = await self._stream.receive_some()
            if not chunk:
                raise StopAsyncIteration
            for line in self._splitter.feed(chunk):
                assert isinstance(line, bytes)
                frame = decode_host_frame(line)
                assert not isinstance(frame, UnknownFrame)
                self._ready.append(frame)
        return self._ready.pop(0)


Behaviour = Callable[[FakeIO], Awaitable[None]]


class FakeProcess:
    """A :class:`zotd.runtime.process.Process` whose program is a coroutine."""

    def __init__(self, pid: int, *, lockstep: bool = False, ignore_sigterm: bool = False) -> None:
        self.pid = pid
        pair = (
            trio.testing.lockstep_stream_one_way_pair
            if lockstep
            else trio.testing.memory_stream_one_way_pair
        )
        self.stdin, self.inp = pair()
        self.out, self.stdout = trio.testing.memory_stream_one_way_pair()
        self.ignore_sigterm = ignore_sigterm
        self.signals: list[tuple[float, int]] = []
        self.code: int | None = None
        self._exited = trio.Event()
        self.cancel = trio.CancelScope()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.code is not None
        return self.code

    def signal_group(self, sig: int) -> None:
        if self._exited.is_set():
            return
        self.signals.append((trio.current_time(), sig))
        if sig == signal.SIGKILL or not self.ignore_sigterm:
            self.exit(-sig)

    def exit(self, code: int) -> None:
        if self._exited.is_set():
            return
        self.code = code
        self.cancel.cancel()
        self.out.close()
        self._exited.set()


class FakeSpawner:
    """A :class:`zotd.runtime.process.Spawner` that runs behaviours by extension name.

    The extension's name is read from its argv (``--name NAME``, as the
    manifests from ``tests.conftest.add_extension`` have it).
    """

    def __init__(
        self, nursery: trio.Nursery, behaviours: Mapping[str, Behaviour], **options: Any
    ) -> None:
        self.nursery = nursery
        self.behaviours = behaviours
        self.options = options
        self.processes: dict[str, FakeProcess] = {}
        #: (name, virtual time) of every spawn, in order.
        self.spawns: list[tuple[str, float]] = []

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: int
    ) -> FakeProcess:
        name = argv[list(argv).index("--name") + 1]
        self.spawns.append((name, trio.current_time()))
        process = FakeProcess(10_000 + len(self.processes), **self.options.get(name, {}))
        self.processes[name] = process
        self.nursery.start_soon(self._run, process, self.behaviours[name])
        return process

    async def _run(self, process: FakeProcess, behaviour: Behaviour) -> None:
        with process.cancel:
            await behaviour(FakeIO(process))
            # A behaviour that returns has exited normally; one that wants to
            # outlive its stdin (ignoring shutdown) just keeps sleeping.
        process.exit(0)


class FailingSpawner:
    """Wraps a spawner (a :class:`FakeSpawner`, or the real
    :func:`zotd.runtime.process.spawn`): its first ``times`` spawns raise
    ``OSError(code)`` as :func:`~zotd.runtime.process.spawn` would (too many
    open files, ...), and the rest spawn for real."""

    def __init__(self, spawner: Spawner, code: int = errno.EMFILE, times: int = 2) -> None:
        self.spawner = spawner
        self.code = code
        self.times = times
        #: The spawns refused so far.
        self.refused = 0

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stderr: int
    ) -> Process:
        if self.refused < self.times:
            self.refused += 1
            raise OSError(self.code, os.strerror(self.code))
        return self.spawner(argv, cwd=cwd, env=env, stderr=stderr)
