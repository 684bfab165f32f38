"""``zot ext doctor``'s dry run: an extension started as zotd starts it, its
handshake watched, then stopped; and its interpreter asked its version.

:func:`trials` runs each extension given once, side by side (at most
:data:`AT_ONCE` at a time), with what zotd gives it: its environment (the
allowlist, its passthrough and grants), its directory as its cwd, its own
process group, ``hello_ack`` after its ``hello``. It then waits for its
handshake as the daemon's :class:`~zotd.protocol.handshake.Handshake` has
it, up to ``ready`` (or its quiet, or the grace), and at most
``ready_grace`` for ``hello``; an MCP server gets ``initialize`` and is
listed, up to ``mcp_initialize_timeout``. Then it is stopped as zotd stops one:
``shutdown`` (an MCP server: its stdin closed), ``shutdown_timeout``,
SIGTERM to its group, ``kill_timeout``, SIGKILL. What it did is a
:class:`~zotd.model.doctor.Trial`.

No process is left behind: every child's group is SIGKILLed and reaped
before its dry run returns (cancelled too), and a :class:`~.process.Watchdog`
ends whatever left its group, also if doctor itself is killed. Every wait
is bounded.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from .. import EXTENSION_PROTOCOL_VERSION, __version__
from ..model.config import Config
from ..model.doctor import Trial
from ..model.environment import extension_env, passthrough_for, with_own_python
from ..model.manifest import Found, Kind, Scope, kind_of
from ..model.restart import spawn_error
from ..protocol import extension as ep
from ..protocol.frames import FrameError, UnknownFrame
from ..protocol.handshake import Action, Greet, Handshake, Ignore, Ready, Refuse, Settle
from ..protocol.lines import Oversized
from . import stopping
from .process import Process, Spawner, Watchdog
from .streams import LineReader

log = logging.getLogger(__name__)

#: How many extensions are dry-run at once.
AT_ONCE = 8

#: How much of the end of a dry run's stderr is kept, and how many lines shown.
STDERR_BYTES = 8192
STDERR_LINES = 5

#: After its stdout ends, how long a process may take to exit (as zotd's EOF_GRACE).
EOF_GRACE = 0.5

#: The most registrations and unknown frame types a dry run keeps.
MAX_KEPT = 1024
MAX_TYPES = 8


@dataclass(frozen=True, slots=True)
class Subject:
    """One extension to dry-run, with the workspace it runs for."""

    found: Found
    workspace: Path


def environment(found: Found, home: Path, config: Config) -> dict[str, str]:
    """What the daemon would give ``found``'s process: see :func:`~.keeper.build`."""
    daemon_env = with_own_python(os.environ)
    passthrough = passthrough_for(home, config, found.name, found.manifest)
    env = extension_env(daemon_env, found.manifest, str(home), passthrough)
    if found.scope == Scope.PROJECT:
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


async def trials(subjects: Sequence[Subject], *, config: Config, home: Path) -> dict[str, Trial]:
    """A dry run of each of ``subjects``, by name, side by side; every
    process is gone when it returns (see the module docstring)."""
    results: dict[str, Trial] = {}
    if not subjects:
        return results
    limiter = trio.CapacityLimiter(AT_ONCE)
    watchdog = Watchdog()
    try:

        async def one(subject: Subject) -> None:
            async with limiter:
                env = environment(subject.found, home, config)
                results[subject.found.name] = await dry_run(
                    subject.found,
                    workspace=subject.workspace,
                    config=config,
                    env=env,
                    home=home,
                    spawner=watchdog,
                )

        async with trio.open_nursery() as nursery:
            for subject in subjects:
                nursery.start_soon(one, subject)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(watchdog.close)
    return results


def bound(config: Config, kind: str) -> float:
    """The longest a dry run of one extension may take, its stop included."""
    talk = config.mcp_initialize_timeout if kind == Kind.MCP else config.ready_grace
    return talk + config.ready_idle + config.shutdown_timeout + 2 * config.kill_timeout + 1.0


async def dry_run(
    found: Found,
    *,
    workspace: Path,
    config: Config,
    env: Mapping[str, str],
    home: Path,
    spawner: Spawner,
) -> Trial:
    """Starts ``found`` (sound, enabled, trusted, with a program), watches its
    handshake, and stops it; never raises ``Exception``, and its process
    group is gone when it returns."""
    trial = Trial()
    read_err, write_err = os.pipe()
    try:
        process = spawner(found.argv, cwd=found.dir, env=env, stderr=write_err)
    except OSError as exc:
        os.close(read_err)
        trial.spawn_error = spawn_error(found.argv[0], exc)[0]
        return trial
    finally:
        os.close(write_err)
    stderr = trio.lowlevel.FdStream(read_err)
    tail: deque[bytes] = deque()
    exited = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_tail, stderr, tail)
            with trio.move_on_after(bound(config, kind_of(found))):
                try:
                    await _watch(found, process, trial, exited, config, workspace, home)
                except Exception as exc:  # a bug of ours: said, and the process still reaped
                    log.exception("dry run of %s", found.name)
                    trial.error = f"the dry run could not finish: {exc!r}"
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if not exited.is_set():
                await stopping.kill_and_reap(process, config)
            await process.stdout.aclose()
            await stderr.aclose()
    trial.stderr_tail = _lines(b"".join(tail))
    return trial


async def _watch(
    found: Found,
    process: Process,
    trial: Trial,
    exited: trio.Event,
    config: Config,
    workspace: Path,
    home: Path,
) -> None:
    """The handshake, then the stop; the process's exit is awaited beside
    them (an exit before it was asked to stop is the trial's ``exit_code``)."""
    asked = trio.Event()  # set just before it is asked to stop

    async def wait() -> None:
        code = await process.wait()
        if not asked.is_set():
            trial.exit_code = code
        exited.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        ended = True  # its stdout ended (the handshake cut short counts too)
        with trio.CancelScope() as talk:
            nursery.start_soon(_cut_on_exit, exited, talk)
            if kind_of(found) == Kind.MCP:  # (it asks it to stop: closes its stdin)
                from .dry_run_mcp import talk_mcp  # (the mcp package takes a while to import)

                ended = await talk_mcp(found, process, trial, config, asked)
            else:
                ended = await _talk(found, process, trial, config, workspace, home)
        if ended:  # an exit of its own may be on its way: let it say so
            with trio.move_on_after(EOF_GRACE):
                await exited.wait()
        if trial.refused and not exited.is_set():
            asked.set()
            stopping.kill(process)
            await exited.wait()  # (bounded by the dry run's bound)
        elif not exited.is_set():
            asked.set()
            if kind_of(found) != Kind.MCP:
                await _shutdown(process.stdin, config)
            signals: list[str] = []

            def note(line: str) -> None:  # "... sending SIGTERM"
                signals.append(line.rsplit(" ", 1)[-1])

            await stopping.wind_down(process, exited, config, note)
            trial.stop = signals[-1] if signals else ""
            if not exited.is_set():  # past SIGKILL's wait too: the caller reaps it
                return
        nursery.cancel_scope.cancel()


async def _shutdown(stdin: trio.abc.SendStream, config: Config) -> None:
    """``shutdown``, then its stdin closed (a full pipe waits ``shutdown_timeout`` at most)."""
    with trio.move_on_after(config.shutdown_timeout):
        try:
            await stdin.send_all(ep.encode(ep.Shutdown()))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    with trio.CancelScope(shield=True):
        await stdin.aclose()


async def _cut_on_exit(exited: trio.Event, talk: trio.CancelScope) -> None:
    """Ends the handshake once the process has exited (and its last frames
    have had ``EOF_GRACE`` to be read)."""
    await exited.wait()
    await trio.sleep(EOF_GRACE)
    talk.cancel()


async def _talk(
    found: Found, process: Process, trial: Trial, config: Config, workspace: Path, home: Path
) -> bool:
    """zot's handshake: until ready, refused, settled without ``hello``, or
    its stdout's end (then it returns ``True``)."""
    hs = Handshake(
        found.name,
        spawned=trio.current_time(),
        hello_timeout=config.hello_timeout,
        ready_grace=config.ready_grace,
        ready_idle=config.ready_idle,
        strict_name=config.strict_hello_name,
    )
    spawned = trio.current_time()
    trial.hello_bound = min(config.ready_grace, config.hello_timeout)
    record = trial.handshake
    reader = LineReader(process.stdout, config.max_frame_bytes)
    stdin = process.stdin

    async def send(frame: ep.HostFrame) -> None:
        try:
            await stdin.send_all(ep.encode(frame))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # it closed its stdin or died: its exit says why

    done = False
    while not done:
        lines: list[bytes | Oversized] | None = None
        with trio.move_on_at(hs.deadline):
            try:
                lines = await reader.__anext__()
            except StopAsyncIteration:
                trial.settled = hs.settled
                return True
        now = trio.current_time()
        actions: list[tuple[ep.ExtensionFrame | UnknownFrame | None, Action]] = []
        if lines is None:  # a deadline of the handshake
            tick = hs.tick(now)
            if tick is not None:
                actions.append((None, tick))
        else:
            for line in lines:
                if isinstance(line, Oversized):
                    trial.oversized += 1
                elif line.strip():
                    frame = _frame(line, trial)
                    if frame is not None:
                        actions.append((frame, hs.receive(frame, now)))
        for frame, action in actions:
            at = round(now - spawned, 3)
            if isinstance(action, Greet):
                record.hello_s = at
                trial.hello_name = action.hello.name
                await send(_hello_ack(found, workspace, home, config))
            elif isinstance(action, Ready):
                record.ready_s = at
                record.auto_ready = action.note is not None
                done = True
            elif isinstance(action, Settle) or (isinstance(action, Refuse) and frame is None):
                trial.settled = False  # no hello by ready_grace (or hello_timeout, if sooner)
                done = True
            elif isinstance(action, Refuse):
                trial.refused = action.reason
                if frame is not None and not isinstance(frame, ep.Hello):
                    record.out_of_order = [f"{_tag(frame)} before hello"]
                return False
            elif isinstance(action, Ignore) and isinstance(frame, ep.Hello | ep.Ready):
                if len(record.out_of_order) < MAX_TYPES:
                    record.out_of_order.append(f"{_tag(frame)} again")
            elif frame is not None:
                _keep(frame, trial)
    return False


def _frame(line: bytes, trial: Trial) -> ep.ExtensionFrame | UnknownFrame | None:
    try:
        return ep.decode_extension_frame(line)
    except FrameError as exc:
        trial.bad_lines += 1
        if not trial.first_bad:
            preview = line[:80].decode("utf-8", "replace")
            trial.first_bad = f"{preview!r}: {exc.message}"[:200]
        return None


def _tag(frame: ep.ExtensionFrame | UnknownFrame) -> str:
    return str(type(frame).__struct_config__.tag) if isinstance(frame, ep.Frame) else frame.type


def _keep(frame: ep.ExtensionFrame | UnknownFrame, trial: Trial) -> None:
    """What a frame passed on registers."""
    if isinstance(frame, ep.RegisterCommand | ep.RegisterTool):
        if len(trial.registrations) < MAX_KEPT:
            trial.registrations.append(frame)
    elif isinstance(frame, ep.Subscribe):
        trial.events = sorted({*trial.events, *frame.events})[:MAX_KEPT]
        trial.intercepts = sorted({*trial.intercepts, *frame.intercept})[:MAX_KEPT]
    elif isinstance(frame, UnknownFrame):
        kind = str(frame.type)[:40]
        if kind not in trial.unknown_types and len(trial.unknown_types) < MAX_TYPES:
            trial.unknown_types.append(kind)


def _hello_ack(found: Found, workspace: Path, home: Path, config: Config) -> ep.HelloAck:
    """As a workspace answers ``hello`` (no agent: no provider or model)."""
    shared = config.sharing_for(found.name, found.sharing) == "shared"
    data = home / "data" / found.name
    return ep.HelloAck(
        protocol_version=EXTENSION_PROTOCOL_VERSION,
        zot_version=__version__,
        provider="",
        model="",
        cwd=str(found.dir if shared else workspace),
        extension_dir=str(found.dir),
        data_dir=str(data) if data.is_dir() else "",
        capabilities=[ep.CALL_TOOL],
    )


async def _keep_tail(stream: trio.lowlevel.FdStream, tail: deque[bytes]) -> None:
    """Reads ``stream`` to its end, keeping its last :data:`STDERR_BYTES`."""
    kept = 0
    try:
        while chunk := await stream.receive_some(STDERR_BYTES):
            tail.append(chunk)
            kept += len(chunk)
            while kept - len(tail[0]) >= STDERR_BYTES:
                kept -= len(tail.popleft())
    except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
        pass


def _lines(data: bytes) -> list[str]:
    text = data[-STDERR_BYTES:].decode("utf-8", "replace")
    return [line[:300] for line in text.splitlines() if line.strip()][-STDERR_LINES:]
