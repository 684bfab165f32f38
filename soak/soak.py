#!/usr/bin/env python3
"""Fault-injection soak for zotd: many clients, misbehaving extensions, one table.

Starts a real daemon (``python -m zotd``) in a temporary directory with eight
extensions from ``soak/extensions/`` (a well-behaved echo, a crasher, a
hanger, a flooder, a garbage writer, a guard, a guard that rewrites, and one
written as newer zot's SDK writes them, with panels and tool progress), then
runs tens of clients (``zotd.client`` under trio, in this process) making
mixed requests while a fault injector reloads extensions, makes the crasher
crash, kills and freezes extension processes from outside, and hangs up
connections with calls in flight. At the end it stops the daemon with
SIGTERM, looks for processes left behind, and prints the figures.

Every request must end in exactly one reply: a success whose content is
the request's own (each carries a unique nonce that must come back), or a
clean error (``timeout``, ``extension_failed``, ``unavailable`` while an
extension restarts, ``not_found``, ``busy``). A request without a reply within twice its
deadline is *lost*; a success with another call's nonce or malformed content,
or a second reply to one request, is *wrong*. The same holds for what the
newer protocol adds: a guard's rewrite must be what that guard makes of this
request, every ``tool_progress`` push must carry its own call's nonce, a
panel's render must come (or its extension's end be told), with its own
nonce, and a call the client gives up (``cancel``) must still get exactly
one reply, and so must the ``cancel``.

Usage::

    python soak/soak.py [--quick] [--clients N] [--duration S] [--seed N] [--keep]

Exits 1 if any reply (or push frame) was lost or wrong, any process was left
behind, a request failed with an error other than those four (``internal``,
say), the daemon logged an error, it did not exit with 0 on SIGTERM, or the
newer extension still had a panel open at the end.
docs/reliability.md explains the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import msgspec
import trio

import zotd
from zotd.client import Client, ZotdError
from zotd.model.config import Config, ConfigError, load_config
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
EXT_SCRIPTS = HERE / "extensions"

#: Each extension's tools, and who must answer them.
TOOLS = {
    "echo": "echo",
    "crash_echo": "crasher",
    "hang_echo": "hanger",
    "flood_echo": "flooder",
    "garbage_echo": "garbage",
    "progress_echo": "newer",
}
EXTENSIONS = ("echo", "crasher", "hanger", "flooder", "garbage", "guard", "rewriter", "newer")
#: Who subscribes to which event (``emit_event`` may deliver to these only).
SUBSCRIBERS = {
    "turn_start": {"echo", "flooder"},
    "turn_end": {"echo"},
    "tool_call": {"guard"},
    "session_start": set(),
    "assistant_message": set(),
}
#: Clean errors: what a request may fail with while extensions misbehave.
CLEAN_ERRORS = {"timeout", "extension_failed", "not_found", "unavailable", "busy"}
#: The rewriter's block when it rewrites a tool call's arguments into a non-object.
NOT_AN_OBJECT = (
    "extension 'rewriter' rewrote the tool's arguments into something that is not a JSON object"
)
#: zotd's block when the rewriter breaks ``nonce`` in the arguments of ``echo``.
MISFIT = (
    "the arguments of tool 'echo' as rewritten by 'rewriter' do not fit its schema: "
    "$.nonce: expected a string, got an integer"
)
#: The two ways a ``cancel`` is answered (``cancelled`` true, false).
IN_FLIGHT = "the call was in flight: answered `cancelled`"
ANSWERED_ALREADY = "the call had been answered already"
#: What the newer extension's panels show below their lines.
PANEL_FOOTER = "q: close"

#: zotd.toml for the run: short deadlines so that waiting one out costs little.
SETTINGS: dict[str, Any] = {
    "tool_timeout": 2.0,
    "command_timeout": 2.0,
    "intercept_timeout": 1.0,
    "shutdown_timeout": 0.5,
    "kill_timeout": 0.5,
    "ready_grace": 2.0,
    "hello_timeout": 5.0,
    "max_frame_bytes": 65536,
    "extension_queue": 64,
    "log_level": "info",
    # The figures are counted from the extension logs: no rotation mid-run.
    "max_log_bytes": 1 << 30,
}
#: ``[restart]``, used if this zotd has a restart policy: restart crashed
#: extensions fast, and let a crash loop trip the intensity limit now and then.
RESTART: dict[str, Any] = {
    "policy": "on-failure",
    "backoff_initial": 0.1,
    "backoff_max": 1.0,
    "intensity": 8,
    "window": 10.0,
}

#: How long a client waits after a `busy` reply before its next request.
BUSY_BACKOFF = 0.1
#: A dead extension the daemon has not restarted for this long is reloaded.
REVIVE_AFTER = 1.5
#: Longest wait for the daemon to exit after SIGTERM.
EXIT_WAIT = 20.0
#: A panel the newer extension still lists this long after its client saw it
#: closed (or hung up with it open) was never closed for the extension.
LEAK_AFTER = 2.0
#: How long a client waits for a call to ``hang_echo`` it means to give up.
PATIENCE = (0.05, 0.3)

#: The requests clients make, and their shares (percent).
MIX: dict[str, int] = {
    **dict(zip(TOOLS, [18, 7, 5, 7, 8, 5], strict=True)),  # call_tool of each tool
    "give_up": 4,  # call_tool hang_echo, given up after PATIENCE
    "say": 8,  # invoke_command /say
    "panel": 4,  # invoke_command /panel, a size or a key, panel_close
    "intercept": 10,  # intercept tool_call
    "turn_start": 3,  # intercept turn_start
    "assistant_message": 3,  # intercept assistant_message
    "emit": 8,
    "list_tools": 3,
    "list_extensions": 2,
    "ping": 5,
}


@dataclass(frozen=True)
class Plan:
    """What one run does."""

    clients: int
    duration: float
    seed: int
    workers: int = 2  # concurrent requests per connection
    reload_every: float = 1.5
    crash_every: float = 2.0
    signal_every: float = 2.5
    hangup_every: float = 0.7
    quick: bool = False


# --- figures ------------------------------------------------------------------------


@dataclass
class KindStats:
    sent: int = 0
    ok: int = 0
    lost: int = 0
    wrong: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: Clean ends that are not error replies: ``abandoned`` (the client gave
    #: the call up), ``stopped`` (the panel's extension stopped instead of
    #: answering a key).
    other: Counter[str] = field(default_factory=Counter)


@dataclass
class Stats:
    kinds: defaultdict[str, KindStats] = field(default_factory=lambda: defaultdict(KindStats))
    lost_samples: list[str] = field(default_factory=list)
    wrong_samples: list[str] = field(default_factory=list)
    injected: Counter[str] = field(default_factory=Counter)
    pushes: Counter[str] = field(default_factory=Counter)
    bad_pushes: int = 0
    push_dropped: int = 0
    duplicates: int = 0
    idless: int = 0
    connections: int = 0
    intercepts: Counter[str] = field(default_factory=Counter)
    progress: Counter[str] = field(default_factory=Counter)
    cancels: Counter[str] = field(default_factory=Counter)
    panels: Counter[str] = field(default_factory=Counter)
    ext_pids: set[int] = field(default_factory=set)
    rss_start: float = 0.0
    rss_peak: float = 0.0
    rss_series: list[tuple[float, float]] = field(default_factory=list)  # (s into the load, MiB)
    rss_end: float = 0.0
    fds_start: Counter[str] = field(default_factory=Counter)
    fds_end: Counter[str] = field(default_factory=Counter)
    dangling_start: int = 0
    marked: bool = False  # whether the run's marker reached the extensions
    dangling_end: int = 0
    final_states: dict[str, str] = field(default_factory=dict)
    #: How long each ``hello`` took (it waits for the extensions to be settled).
    hello_waits: list[float] = field(default_factory=list)
    #: What ``/panels`` of the newer extension said at the end.
    panels_left: str = ""
    #: Panels newer still had open well after they were closed.
    leaked_panels: set[str] = field(default_factory=set)

    def kind(self, name: str) -> KindStats:
        return self.kinds[name]

    def sample(self, where: list[str], text: str) -> None:
        if len(where) < 20:
            where.append(text)


# --- /proc --------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` in MiB (0 if gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def open_fds(pid: int) -> Counter[str]:
    """What ``pid``'s open file descriptors point to (``pipe``, ``socket``, a path...)."""
    kinds: Counter[str] = Counter()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return kinds
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kinds[re.sub(r":\[\d+\]$", "", target)] += 1
    return kinds


def dangling_pipes(pid: int) -> int:
    """``pid``'s pipe fds whose other end no other process holds any more
    (the pipes of extensions that are gone)."""

    def pipes(p: int) -> set[str]:
        found: set[str] = set()
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            return found
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{p}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("pipe:"):
                found.add(target)
        return found

    mine = pipes(pid)
    for other in all_pids():
        if other != pid:
            mine -= pipes(other)
    return len(mine)


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    state: str
    start: int  # clock ticks after boot
    cmd: str


def proc_info(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return ProcInfo(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]), cmd)


def carries_marker(pid: int, marker: bytes) -> bool:
    """Whether ``pid``'s environment holds this run's marker (``ZOTD_SOAK_RUN=<id>``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


# --- the client connection ----------------------------------------------------------


class _Error(msgspec.Struct):
    code: str = ""


class _Response(msgspec.Struct):
    id: int | str | None = None
    error: _Error | None = None
    data: msgspec.Raw = msgspec.Raw()


class _Cancel(msgspec.Struct):
    type: str
    id: int | str | None = None
    request_id: int | str | None = None


class _CancelData(msgspec.Struct):
    cancelled: bool


_CANCEL = b'"type":"cancel"'


class TapStream(anyio.abc.ByteStream):
    """A connection that counts every response id passing by, so that a second
    reply to one request (which :class:`Client` would silently ignore) is seen.

    It also notes the ``cancel`` requests the client sends when a call is
    given up, and the replies to them and to the calls they name, which the
    client ignores: each must come, once (see :meth:`Soak.audit_cancels`).
    """

    def __init__(self, inner: anyio.abc.ByteStream) -> None:
        self.inner = inner
        self.ids: Counter[int | str | None] = Counter()
        #: ``cancel`` requests sent: their id -> the id of the call they give up.
        self.cancels: dict[int | str | None, int | str | None] = {}
        #: Replies to those: ``cancelled`` true (the call was in flight) or false.
        self.cancel_results: dict[int | str | None, bool] = {}
        #: Requests answered with a ``cancelled`` error.
        self.cancelled: set[int | str | None] = set()
        #: ``cancel`` replies saying true that came before the call's own reply.
        self.misordered: list[int | str | None] = []
        self._buf = b""
        self._arrived = trio.Event()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self.inner.receive(max_bytes)
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            if line.startswith(b'{"type":"response"'):
                try:
                    reply = msgspec.json.decode(line, type=_Response)
                except msgspec.DecodeError:
                    self.ids["<unreadable>"] += 1
                    continue
                rid = reply.id
                self.ids[rid] += 1
                if reply.error is not None and reply.error.code == "cancelled":
                    self.cancelled.add(rid)
                if rid in self.cancels:
                    try:
                        result = msgspec.json.decode(reply.data, type=_CancelData).cancelled
                    except msgspec.DecodeError:
                        continue  # a failed cancel: the audit says so
                    self.cancel_results[rid] = result
                    if result and not self.ids[self.cancels[rid]]:
                        self.misordered.append(rid)
        if lines:
            self._arrived.set()
            self._arrived = trio.Event()
        return data

    async def send(self, item: bytes) -> None:
        if _CANCEL in item:
            for line in item.split(b"\n"):
                if _CANCEL in line:
                    try:
                        frame = msgspec.json.decode(line, type=_Cancel)
                    except msgspec.DecodeError:
                        continue
                    if frame.type == "cancel":
                        self.cancels[frame.id] = frame.request_id
        await self.inner.send(item)

    async def settled(self) -> None:
        """Returns once every ``cancel`` sent has its reply, and so has its call."""
        while any(not self.ids[cid] or not self.ids[call] for cid, call in self.cancels.items()):
            await self._arrived.wait()

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


class Gone(Exception):
    """The connection to the daemon is gone."""


class Ended(Exception):
    """A request ended cleanly without a reply to check: ``abandoned`` (the
    client gave it up) or ``stopped`` (the panel's extension stopped)."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


PanelPush = ap.PanelRenderPush | ap.PanelClosePush


class PanelBoard:
    """The panels one connection opened, and the push frames that came for them.

    The connection's push reader hands each ``panel_render`` and
    ``panel_close`` to :meth:`route`; the worker that opened the panel takes
    them in order with :meth:`next`. A frame for a panel this connection
    never opened is wrong, and so is one for a panel it has finished with,
    unless it is the ``stopped`` close of a panel whose extension stopped as
    it was being closed (the reader may hand it over after the worker saw
    the close's reply).
    """

    def __init__(self) -> None:
        self.frames: dict[str, list[PanelPush]] = {}
        self.finished: set[str] = set()
        self.gone = False
        self._changed = trio.Event()

    def expect(self, panel_id: str) -> None:
        self.frames[panel_id] = []

    def finish(self, panel_id: str) -> list[PanelPush]:
        """Done with the panel; returns the frames it left untaken."""
        self.finished.add(panel_id)
        return self.frames.pop(panel_id, [])

    def route(self, frame: PanelPush) -> str | None:
        """Files a frame for its panel's worker; what is wrong with it, if anything."""
        frames = self.frames.get(frame.panel_id)
        if frames is not None:
            frames.append(frame)
            self._changed.set()
            self._changed = trio.Event()
            return None
        if frame.panel_id in self.finished:
            if isinstance(frame, ap.PanelClosePush) and frame.reason == "stopped":
                return None
            return f"{describe_panel(frame)} after the panel was closed"
        return f"{describe_panel(frame)}: not a panel this connection opened"

    def end(self) -> None:
        """The connection is gone: no frame will come."""
        self.gone = True
        self._changed.set()

    async def next(self, panel_id: str) -> PanelPush:
        """The panel's next frame; waits for it."""
        while True:
            frames = self.frames[panel_id]
            if frames:
                return frames.pop(0)
            if self.gone:
                raise ZotdError("connection_lost", "the connection closed")
            await self._changed.wait()


def describe_panel(frame: PanelPush) -> str:
    if isinstance(frame, ap.PanelClosePush):
        return f"panel_close of {frame.panel_id!r} ({frame.extension}, {frame.reason})"
    return f"panel_render of {frame.panel_id!r} ({frame.extension}): {frame.title!r} {frame.lines!r:.120}"


# --- the run ------------------------------------------------------------------------


class Soak:
    """One soak run against one daemon."""

    def __init__(self, plan: Plan, root: Path, config: Config, daemon_pid: int) -> None:
        self.plan = plan
        self.root = root
        self.config = config
        self.daemon_pid = daemon_pid
        self.socket = root / "run" / "zotd.sock"
        self.project = root / "proj"
        self.stats = Stats()
        self.stop = trio.Event()
        self.snapshot: dict[str, ap.ExtensionInfo] = {}
        self._nonces = 0
        self._rngs: dict[int, random.Random] = {}
        self._frozen: dict[int, int] = {}  # pid -> start ticks, while SIGSTOPped
        self.load_began = 0.0
        self.marker = b""
        #: When each panel the clients opened (or tried to) was closed for them.
        self.panel_closed: dict[str, float] = {}

    # --- bounds: twice the deadline that should end each kind of request --------

    @property
    def quick_bound(self) -> float:
        return 2 * self.config.tool_timeout

    @property
    def hello_bound(self) -> float:
        return 2 * max(self.config.ready_grace, self.config.tool_timeout)

    @property
    def reload_bound(self) -> float:
        return 2 * (self.config.stop_bound + self.config.ready_grace)

    def nonce(self, cid: int) -> str:
        self._nonces += 1
        return f"{cid}-{self._nonces}-{uuid.uuid4().hex[:8]}"

    # --- connections and tracked requests --------------------------------------------

    @asynccontextmanager
    async def connection(self, *, audit_cancels: bool = False) -> AsyncIterator[Client]:
        """A client connection (no ``hello`` yet); its response ids are audited on close.

        With ``audit_cancels``, a connection that ends normally first waits
        (up to the quick bound) for the replies to the ``cancel`` requests
        its client sent and to the calls they gave up, then checks them.
        """
        try:
            stream = await anyio.connect_unix(str(self.socket))
        except OSError as exc:
            raise Gone(f"cannot connect: {exc}") from None
        tap = TapStream(stream)
        self.stats.connections += 1
        try:
            async with tap, trio.open_nursery() as nursery:
                zot = Client(tap, max_frame_bytes=self.config.max_frame_bytes)
                nursery.start_soon(zot.run)
                try:
                    yield zot
                    if audit_cancels:
                        with trio.move_on_after(self.quick_bound):
                            await tap.settled()
                        self.audit_cancels(tap)
                finally:
                    nursery.cancel_scope.cancel()
                    self.stats.push_dropped += zot.dropped
        except BaseExceptionGroup as group:
            # The reader never raises: the group holds the body's own exception.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            for rid, n in tap.ids.items():
                if rid is None or isinstance(rid, str):
                    self.stats.idless += n
                    self.stats.sample(self.stats.wrong_samples, f"a reply with id {rid!r}")
                elif n > 1:
                    self.stats.duplicates += n - 1
                    self.stats.sample(self.stats.wrong_samples, f"{n} replies to request {rid}")

    def audit_cancels(self, tap: TapStream) -> None:
        """Each ``cancel`` the client sent got one reply, and so did the call it
        gave up: a ``cancelled`` error if the cancel says it was in flight
        (before the cancel's own reply), its own reply otherwise. A
        ``cancelled`` error for a call never given up is wrong."""
        ks = self.stats.kind("cancel")
        stats = self.stats
        for cid, call in tap.cancels.items():
            ks.sent += 1
            if not tap.ids[cid] or not tap.ids[call]:
                ks.lost += 1
                which = "the cancel" if not tap.ids[cid] else f"the call {call} it gave up"
                stats.sample(stats.lost_samples, f"cancel {cid}: no reply to {which}")
                continue
            result = tap.cancel_results.get(cid)
            problem = None
            if result is None:
                problem = "its reply is not {cancelled: bool}"
            elif result and call not in tap.cancelled:
                problem = f"says call {call} was in flight, but its reply is not `cancelled`"
            elif not result and call in tap.cancelled:
                problem = f"says call {call} was answered, but its reply is `cancelled`"
            elif cid in tap.misordered:
                problem = f"answered before the `cancelled` reply of call {call}"
            if problem is not None:
                ks.wrong += 1
                stats.sample(stats.wrong_samples, f"cancel {cid}: {problem}")
                continue
            ks.ok += 1
            stats.cancels[IN_FLIGHT if result else ANSWERED_ALREADY] += 1
        for rid in tap.cancelled - set(tap.cancels.values()):
            ks.wrong += 1
            stats.sample(stats.wrong_samples, f"request {rid}: `cancelled`, never given up")

    async def ask(
        self,
        kind: str,
        call: Callable[[], Awaitable[T]],
        check: Callable[[T], str | None],
        bound: float,
    ) -> tuple[T | None, str]:
        """Sends one request and sorts its outcome.

        Returns the reply's data (``None`` unless it passed ``check``) and
        ``"ok"``, an error code, ``"wrong"``, ``"lost"``, or the outcome of
        an :class:`Ended` that ``call`` raised. Raises :class:`Gone` if the
        connection broke.
        """
        ks = self.stats.kind(kind)
        ks.sent += 1
        started = time.monotonic()
        code = "lost"
        with trio.move_on_after(bound):
            try:
                result = await call()
            except ZotdError as exc:
                if exc.code == "connection_lost":
                    ks.lost += 1
                    self.stats.sample(self.stats.lost_samples, f"{kind}: {exc.message}")
                    raise Gone(exc.message) from None
                code = exc.code
            except Ended as end:
                ks.other[end.outcome] += 1
                return None, end.outcome
            except msgspec.ValidationError as exc:
                ks.wrong += 1
                self.stats.sample(self.stats.wrong_samples, f"{kind}: malformed data: {exc}")
                return None, "wrong"
            else:
                problem = check(result)
                if problem is not None:
                    ks.wrong += 1
                    self.stats.sample(self.stats.wrong_samples, f"{kind}: {problem}")
                    return None, "wrong"
                ks.ok += 1
                return result, "ok"
        if code == "lost":
            ks.lost += 1
            waited = time.monotonic() - started
            self.stats.sample(self.stats.lost_samples, f"{kind}: no reply after {waited:.1f} s")
            return None, "lost"
        ks.errors[code] += 1
        if code == "busy":  # as the daemon asks: retry a little later
            await trio.sleep(BUSY_BACKOFF)
        return None, code

    async def hello(self, zot: Client) -> bool:
        started = time.monotonic()
        _, outcome = await self.ask(
            "hello",
            lambda: zot.hello(cwd=self.project, client="soak"),
            lambda d: None if d.workspace == str(self.project) else f"workspace {d.workspace}",
            self.hello_bound,
        )
        waited = time.monotonic() - started
        self.stats.hello_waits.append(waited)
        return outcome == "ok"

    # --- the requests clients make ----------------------------------------------------

    async def call_tool(
        self, zot: Client, cid: int, rng: random.Random, tool: str, *, give_up: bool = False
    ) -> None:
        """Calls ``tool`` with a nonce; with ``give_up``, abandons the call (a
        cancel scope around it, which makes the client send ``cancel``) if it
        has not ended within a fraction of a second."""
        nonce = self.nonce(cid)
        args: dict[str, Any] = {
            "nonce": nonce,
            "client": cid,
            "pad": "x" * rng.choice([0, 0, 0, 16, 512, 4096]),
        }
        if tool == "progress_echo":
            args["steps"] = rng.randint(1, 4)
        steps = args.get("steps", 0)
        timeout_s = rng.choice([None, None, None, 0.5, 1.0])
        owner = TOOLS[tool]
        progress: list[ap.ToolProgressPush] = []

        def check(r: ap.CallData) -> str | None:
            if r.extension != owner:
                return f"{tool} answered by {r.extension}"
            if r.is_error or len(r.content) != 1 or not isinstance(r.content[0], ep.TextBlock):
                return f"{tool}: unexpected content {r.content!r:.200}"
            try:
                echoed = json.loads(r.content[0].text)
            except ValueError:
                return f"{tool}: content is not the echo: {r.content[0].text[:100]!r}"
            if echoed != args:
                return f"{tool}: sent {describe(args)}, got back {describe(echoed)}"
            if len(progress) != steps:
                return f"{tool} {nonce}: {len(progress)} tool_progress pushes before the result, not {steps}"
            return None

        async def call() -> ap.CallData:
            return await zot.call_tool(tool, args, timeout_s=timeout_s, on_progress=progress.append)

        async def impatient_call() -> ap.CallData:
            with trio.move_on_after(rng.uniform(*PATIENCE)):
                return await call()
            raise Ended("abandoned")

        _, outcome = await self.ask(
            f"call_tool {tool}" + (", given up" if give_up else ""),
            impatient_call if give_up else call,
            check,
            2 * (timeout_s or self.config.tool_timeout),
        )
        if outcome == "ok" and steps:
            self.stats.progress[f"{tool}: answered after all of its progress"] += 1
        self.check_progress(tool, nonce, steps, progress)

    def check_progress(
        self, tool: str, nonce: str, steps: int, progress: list[ap.ToolProgressPush]
    ) -> None:
        """Each progress push of a call, whatever its outcome, is the call's own:
        ``<nonce> <i>/<steps>``, in order, from the tool's owner."""
        self.stats.progress["tool_progress pushes received (on_progress)"] += len(progress)
        for i, p in enumerate(progress, 1):
            want = (TOOLS[tool], tool, f"{nonce} {i}/{steps}", i, steps)
            got = (p.extension, p.tool, p.message, p.progress, p.total)
            if got != want:
                self.stats.bad_pushes += 1
                self.stats.sample(
                    self.stats.wrong_samples,
                    f"tool_progress of call_tool {tool} {nonce}: got {got!r:.150}, want {want!r}",
                )

    async def invoke(self, zot: Client, cid: int, rng: random.Random) -> None:
        nonce = self.nonce(cid)

        def check(r: ap.InvokeData) -> str | None:
            if (r.extension, r.action, r.display, r.error) != (
                "echo",
                "display",
                f"said {nonce}",
                "",
            ):
                return f"/say {nonce} got {r!r:.200}"
            return None

        await self.ask(
            "invoke_command /say",
            lambda: zot.invoke_command("say", nonce),
            check,
            2 * self.config.command_timeout,
        )

    async def intercept(self, zot: Client, cid: int, rng: random.Random) -> None:
        """A ``tool_call`` for both guards: the rewriter (first) adds
        ``rewritten: <tool_id>`` when asked to (and breaks ``nonce`` when asked
        to: zotd must refuse that for a tool with a schema, ``echo``), the
        guard blocks ``rm -rf``."""
        nonce = self.nonce(cid)
        dangerous = rng.random() < 0.4
        tool = rng.choice(["bash", "bash", "echo"])
        how = rng.choices(["no", "yes", "break"], weights=[50, 35, 15])[0]
        rewrite = how != "no"
        command = f"rm -rf /tmp/{nonce}" if dangerous else f"ls /tmp/{nonce}"
        tool_args: dict[str, Any] = {"command": command}
        if rewrite:
            tool_args["rewrite"] = True if how == "yes" else how
        rewritten = {**tool_args, "rewritten": nonce}
        misfit = how == "break" and tool == "echo"
        if how == "break":
            rewritten["nonce"] = 0
        verdicts = self.stats.intercepts

        def check(r: ap.InterceptData) -> str | None:
            if r.block:
                if r.args is not None or r.text is not None or r.rewritten_by:
                    return f"intercept {nonce}: a block with a rewrite: {r!r:.200}"
                if r.extension == "guard" and dangerous and r.reason == f"guard blocked {nonce}":
                    verdicts["tool_call, dangerous: blocked by the guard"] += 1
                    verdicts["tool_call, rewrite asked: blocked, not rewritten"] += rewrite
                elif (
                    r.extension == "guard"
                    and dangerous
                    and rewrite
                    and r.reason == f"guard blocked {nonce} after rewrite {nonce}"
                ):
                    verdicts["tool_call, dangerous: blocked by the guard"] += 1
                    verdicts["tool_call, rewrite asked: rewritten, then blocked"] += 1
                elif r.extension == "rewriter" and rewrite and r.reason == NOT_AN_OBJECT:
                    verdicts["tool_call, rewrite asked: blocked: not an object"] += 1
                elif r.extension == "rewriter" and misfit and r.reason == MISFIT:
                    verdicts["tool_call, misfit for echo: blocked by its schema"] += 1
                else:
                    return f"intercept {nonce} ({command}, rewrite {rewrite}) got {r!r:.200}"
                return None
            if r.reason or r.extension or r.text is not None:
                return f"intercept {nonce} allowed with {r!r:.200}"
            if r.args is None:
                if r.rewritten_by:
                    return f"intercept {nonce}: rewritten by {r.rewritten_by}, without args"
                verdicts["tool_call, rewrite asked: not rewritten (faulty, away)"] += rewrite
            elif not rewrite or r.args != rewritten or r.rewritten_by != ["rewriter"]:
                return (
                    f"intercept {nonce} (rewrite {rewrite}): args {describe(r.args)} "
                    f"rewritten by {r.rewritten_by}"
                )
            else:
                verdicts["tool_call, rewrite asked: rewritten"] += 1
                verdicts["tool_call, misfit for echo: allowed (echo away)"] += misfit
            verdicts["tool_call, dangerous: allowed (a guard faulty, away)"] += dangerous
            verdicts["tool_call, harmless: allowed"] += not dangerous
            return None

        await self.ask(
            "intercept tool_call",
            lambda: zot.intercept(tool, tool_args, tool_id=nonce),
            check,
            2 * self.config.intercept_timeout,
        )

    async def intercept_turn(self, zot: Client, cid: int, rng: random.Random) -> None:
        """A ``turn_start``: the rewriter blocks steps that are multiples of 3."""
        nonce = self.nonce(cid)
        step = rng.randint(1, 30)
        blocks = step % 3 == 0
        verdicts = self.stats.intercepts

        def check(r: ap.InterceptData) -> str | None:
            if r.args is not None or r.text is not None or r.rewritten_by:
                return f"turn_start {nonce}: a rewrite: {r!r:.200}"
            if r.block:
                if (r.extension, r.reason) != ("rewriter", f"turn {nonce} blocked at step {step}"):
                    return f"turn_start {nonce} step {step} got {r!r:.200}"
                if not blocks:
                    return f"turn_start {nonce} step {step} blocked"
                verdicts["turn_start, step 3n: blocked"] += 1
            elif r.reason or r.extension:
                return f"turn_start {nonce} allowed with {r!r:.200}"
            elif blocks:
                verdicts["turn_start, step 3n: allowed (faulty, away)"] += 1
            else:
                verdicts["turn_start, other steps: allowed"] += 1
            return None

        await self.ask(
            "intercept turn_start",
            lambda: zot.intercept_event("turn_start", step=step, nonce=nonce),
            check,
            2 * self.config.intercept_timeout,
        )

    async def intercept_message(self, zot: Client, cid: int, rng: random.Random) -> None:
        """An ``assistant_message``: the rewriter redacts ``hunter2``, naming the nonce."""
        nonce = self.nonce(cid)
        secret = rng.random() < 0.5
        text = f"reply {nonce}: " + ("the password is hunter2" if secret else "nothing to hide")
        replaced = text.replace("hunter2", f"[redacted {nonce}]")
        verdicts = self.stats.intercepts

        def check(r: ap.InterceptData) -> str | None:
            if r.block or r.reason or r.extension or r.args is not None:
                return f"assistant_message {nonce} got {r!r:.200}"
            if r.text is None:
                if r.rewritten_by:
                    return f"assistant_message {nonce}: rewritten by {r.rewritten_by}, no text"
                verdicts[
                    "assistant_message, secret: shown (faulty, away)"
                    if secret
                    else "assistant_message, plain: unchanged"
                ] += 1
            elif not secret or r.text != replaced or r.rewritten_by != ["rewriter"]:
                return (
                    f"assistant_message {nonce}: text {r.text!r:.120} "
                    f"rewritten by {r.rewritten_by}, want {replaced!r}"
                )
            else:
                verdicts["assistant_message, secret: replaced"] += 1
            return None

        await self.ask(
            "intercept assistant_message",
            lambda: zot.intercept_event("assistant_message", text=text, nonce=nonce),
            check,
            2 * self.config.intercept_timeout,
        )

    async def panel(self, zot: Client, cid: int, rng: random.Random, board: PanelBoard) -> None:
        """``/panel NONCE`` opens a panel; the user looks at it for a moment,
        now and then resizes it, then presses a key (its render must come,
        with the nonce) or ``q`` (the extension's close must come); then the
        client closes the panel.

        The extension may stop meanwhile (killed, crashed, reloaded): then
        zotd closes the panel with a ``stopped`` push, which may come
        instead of a render, and a ``not_found`` for the panel's key, size
        or close must follow one. Either ends the panel: ``stopped``.
        """
        nonce = self.nonce(cid)
        panel_id = f"p-{nonce}"
        title = f"panel {panel_id}"
        board.expect(panel_id)  # before the command: a stopped close may beat its reply
        bound = 2 * self.config.command_timeout
        spec = ep.PanelSpec(panel_id, title, [f"opened {nonce}"], PANEL_FOOTER)
        stats = self.stats

        def check_open(r: ap.InvokeData) -> str | None:
            if (r.extension, r.action, r.error, r.open_panel) != ("newer", "noop", "", spec):
                return f"/panel {nonce} got {r!r:.200}"
            return None

        def render(line: str) -> Callable[[PanelPush | None], str | None]:
            def check(frame: PanelPush | None) -> str | None:
                want = ap.PanelRenderPush("newer", panel_id, title, [line], PANEL_FOOTER)
                if frame != want:
                    got = "nothing" if frame is None else describe_panel(frame)
                    return f"{got}, want a render of {panel_id} with the line {line!r}"
                stats.panels["rendered"] += 1
                return None

            return check

        def closed_by_q(frame: PanelPush | None) -> str | None:
            if frame != ap.PanelClosePush("newer", panel_id, "extension"):
                got = "nothing" if frame is None else describe_panel(frame)
                return f"{got}, want the close of {panel_id} by its extension"
            stats.panels["closed by the extension (`q`)"] += 1
            return None

        def closed_by_client(frame: PanelPush | None) -> str | None:
            if frame is not None:
                return f"panel_close of {panel_id}: not_found, then {describe_panel(frame)}"
            stats.panels["closed by the client"] += 1
            return None

        async def exchange(
            send: Callable[[], Awaitable[None]], answered: bool = True
        ) -> PanelPush | None:
            """Sends a request about the panel, then takes the frame that answers
            it (if it is ``answered`` by one). ``not_found`` means the panel is
            gone: the ``stopped`` close must have come, and is taken instead."""
            try:
                await send()
            except ZotdError as exc:
                if exc.code != "not_found":
                    raise
            else:
                if not answered:
                    return None
            frame = await board.next(panel_id)
            if isinstance(frame, ap.PanelClosePush) and frame.reason == "stopped":
                raise Ended("stopped")
            return frame

        is_open = False
        try:
            _, outcome = await self.ask(
                "invoke_command /panel",
                lambda: zot.invoke_command("panel", nonce),
                check_open,
                bound,
            )
            if outcome != "ok":
                return
            stats.panels["opened"] += 1
            is_open = True
            await trio.sleep(rng.uniform(0, 0.4))  # the user reads it
            inputs: list[tuple[str, Callable[[], Awaitable[None]], Any]] = []
            if rng.random() < 0.25:
                width, height = rng.randint(20, 120), rng.randint(5, 40)
                inputs.append(
                    (
                        "panel_resize",
                        partial(zot.panel_resize, panel_id, width, height),
                        render(f"size {width}x{height}"),
                    )
                )
            key = rng.choice(["q", "x", "enter", "down"])
            inputs.append(
                (
                    "panel_key",
                    partial(zot.panel_key, panel_id, key, text=nonce),
                    closed_by_q if key == "q" else render(f"key {key}: {nonce}"),
                )
            )
            for kind, send, check in inputs:
                _, outcome = await self.ask(kind, partial(exchange, send), check, bound)
                if outcome == "stopped" or (kind, key, outcome) == ("panel_key", "q", "ok"):
                    is_open = False
                if outcome != "ok":
                    break
        finally:
            if is_open:
                for _ in range(20):  # again after `busy`: the panel must not stay open
                    _, outcome = await self.ask(
                        "panel_close",
                        partial(exchange, partial(zot.panel_close, panel_id), False),
                        closed_by_client,
                        bound,
                    )
                    if outcome != "busy":
                        break
            self.panel_closed[panel_id] = trio.current_time()
            for frame in board.finish(panel_id):
                if not (isinstance(frame, ap.PanelClosePush) and frame.reason == "stopped"):
                    stats.bad_pushes += 1
                    stats.sample(stats.wrong_samples, f"{describe_panel(frame)}: not expected")

    async def emit(self, zot: Client, cid: int, rng: random.Random) -> None:
        event = rng.choice(sorted(SUBSCRIBERS))
        nonce = self.nonce(cid)

        def check(delivered: list[str]) -> str | None:
            if len(set(delivered)) != len(delivered) or not set(delivered) <= SUBSCRIBERS[event]:
                return f"{event} delivered to {delivered}"
            return None

        await self.ask(
            "emit_event",
            lambda: zot.emit_event(event, step=cid, nonce=nonce),
            check,
            self.quick_bound,
        )

    async def list_tools(self, zot: Client, cid: int, rng: random.Random) -> None:
        def check(tools: list[ap.ToolInfo]) -> str | None:
            names = [t.name for t in tools]
            if len(set(names)) != len(names) or any(
                TOOLS.get(t.name) != t.extension for t in tools
            ):
                return f"tools {[(t.name, t.extension) for t in tools]}"
            return None

        await self.ask("list_tools", zot.list_tools, check, self.quick_bound)

    async def list_extensions(self, zot: Client, cid: int, rng: random.Random) -> None:
        await self.ask("list_extensions", zot.list_extensions, check_extensions, self.quick_bound)

    async def ping(self, zot: Client, cid: int, rng: random.Random) -> None:
        await self.ask(
            "ping", zot.ping, lambda pong: None if pong is True else "no pong", self.quick_bound
        )

    async def one_request(
        self, zot: Client, cid: int, rng: random.Random, board: PanelBoard
    ) -> None:
        what = rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if what in TOOLS:
            await self.call_tool(zot, cid, rng, what)
        elif what == "give_up":
            await self.call_tool(zot, cid, rng, "hang_echo", give_up=True)
        elif what == "say":
            await self.invoke(zot, cid, rng)
        elif what == "panel":
            await self.panel(zot, cid, rng, board)
        elif what == "intercept":
            await self.intercept(zot, cid, rng)
        elif what == "turn_start":
            await self.intercept_turn(zot, cid, rng)
        elif what == "assistant_message":
            await self.intercept_message(zot, cid, rng)
        elif what == "emit":
            await self.emit(zot, cid, rng)
        elif what == "list_tools":
            await self.list_tools(zot, cid, rng)
        elif what == "list_extensions":
            await self.list_extensions(zot, cid, rng)
        else:
            await self.ping(zot, cid, rng)

    # --- tasks ------------------------------------------------------------------------

    async def persist(self, lane: Callable[[], Awaitable[None]]) -> None:
        """Runs ``lane`` until the load stops, again after a lost connection."""
        while not self.stop.is_set():
            try:
                await lane()
            except Gone:
                await trio.sleep(0.2)

    async def client(self, cid: int) -> None:
        """One agent: connects, works for a while, hangs up, connects again."""
        rng = self._rngs.setdefault(cid, random.Random(self.plan.seed * 1000 + cid))
        subscribe = cid % 4 == 0
        board = PanelBoard()
        async with self.connection(audit_cancels=True) as zot:
            if not await self.hello(zot):
                await trio.sleep(0.2)
                return
            if subscribe:
                await self.ask("subscribe", zot.subscribe, lambda _: None, self.quick_bound)
            budget = rng.randint(50, 400)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.read_pushes, zot, subscribe, board)
                async with trio.open_nursery() as workers:
                    for _ in range(self.plan.workers):
                        workers.start_soon(self.work, zot, cid, rng, budget, board)
                nursery.cancel_scope.cancel()

    async def work(
        self, zot: Client, cid: int, rng: random.Random, budget: int, board: PanelBoard
    ) -> None:
        try:
            for _ in range(budget // self.plan.workers):
                if self.stop.is_set():
                    return
                await self.one_request(zot, cid, rng, board)
                await trio.sleep(rng.uniform(0, 0.03))
        except Gone:
            return  # the other worker sees it too; the client reconnects

    async def read_pushes(self, zot: Client, subscribed: bool, board: PanelBoard) -> None:
        """Reads a client connection's push frames: the workspace's news if it
        subscribed (and none if not), its panels' frames (handed to the worker
        that opened the panel). A ``tool_progress`` push should never come
        here: every call the soak makes has ``on_progress``."""
        stats = self.stats
        try:
            async for frame in zot.notifications():
                stats.pushes[type(frame).__name__] += 1
                problem = None
                if frame.extension not in EXTENSIONS:
                    problem = f"push from {frame.extension!r}"
                elif isinstance(frame, ap.PanelRenderPush | ap.PanelClosePush):
                    problem = board.route(frame)
                elif isinstance(frame, ap.ToolProgressPush):
                    problem = f"tool_progress of request {frame.request_id} outside its call"
                elif not subscribed:
                    problem = f"{type(frame).__name__} on a connection that did not subscribe"
                if problem is not None:
                    stats.bad_pushes += 1
                    stats.sample(stats.wrong_samples, problem)
        finally:
            board.end()

    async def monitor(self) -> None:
        """Watches the extensions (pids, states) and the daemon's memory."""
        async with self.connection() as zot:
            await self.hello(zot)
            while not self.stop.is_set():
                reply = await self.ask(
                    "list_extensions", zot.list_extensions, check_extensions, self.quick_bound
                )
                infos = reply[0]
                if infos is not None:
                    self.snapshot = {i.name: i for i in infos}
                    self.stats.ext_pids.update(i.pid for i in infos if i.pid)
                rss = rss_mib(self.daemon_pid)
                self.stats.rss_peak = max(self.stats.rss_peak, rss)
                self.stats.rss_series.append((trio.current_time() - self.load_began, rss))
                await trio.sleep(0.2)

    async def paused(self, seconds: float) -> bool:
        """Sleeps ``seconds``, or until the load stops; whether it has stopped
        (no fault is injected once the load is over: the end figures are
        taken once every extension is ready again)."""
        with trio.move_on_after(seconds):
            await self.stop.wait()
        return self.stop.is_set()

    async def reload_one(self, zot: Client, name: str | None, why: str) -> None:
        def check(infos: list[ap.ExtensionInfo]) -> str | None:
            names = [i.name for i in infos]
            if name is not None and names not in ([name], []):
                return f"reload {name} returned {names}"
            return check_extensions(infos)

        _, outcome = await self.ask(
            "ext_reload", lambda: zot.ext_reload(name), check, self.reload_bound
        )
        if outcome == "ok":
            self.stats.injected[why] += 1

    async def reloader(self) -> None:
        """Reloads a random extension (now and then all of them) on a schedule, and
        revives an extension the daemon has left dead for a while."""
        rng = random.Random(self.plan.seed + 1)
        async with self.connection() as zot:
            await self.hello(zot)
            dead_since: dict[str, float] = {}
            next_reload = trio.current_time() + jitter(rng, self.plan.reload_every)
            while not await self.paused(0.1):
                now = trio.current_time()
                for name, info in self.snapshot.items():
                    if info.state in ("failed", "exited"):
                        dead_since.setdefault(name, now)
                    else:
                        dead_since.pop(name, None)
                for name, since in list(dead_since.items()):
                    if now - since > REVIVE_AFTER:
                        del dead_since[name]
                        await self.reload_one(zot, name, "ext_reload: revive one left dead")
                if now >= next_reload:
                    if rng.random() < 0.15:
                        await self.reload_one(zot, None, "ext_reload: all extensions")
                    else:
                        name = rng.choice(EXTENSIONS)
                        await self.reload_one(zot, name, "ext_reload: one extension")
                    next_reload = trio.current_time() + jitter(rng, self.plan.reload_every)

    async def crash_orders(self) -> None:
        """Invokes ``/crash``: the crasher dies without answering."""
        rng = random.Random(self.plan.seed + 2)
        async with self.connection() as zot:
            await self.hello(zot)
            while not await self.paused(jitter(rng, self.plan.crash_every)):
                _, outcome = await self.ask(
                    "invoke_command /crash",
                    lambda: zot.invoke_command("crash"),
                    lambda r: f"/crash answered {r!r:.100}",
                    2 * self.config.command_timeout,
                )
                if outcome == "extension_failed":
                    self.stats.injected["/crash: the crasher told to die"] += 1

    async def signals(self) -> None:
        """Kills (SIGKILL) or freezes (SIGSTOP, later SIGCONT) a random extension process."""
        rng = random.Random(self.plan.seed + 3)
        while not await self.paused(jitter(rng, self.plan.signal_every)):
            running = [i for i in self.snapshot.values() if i.pid and i.state == "ready"]
            if not running:
                continue
            target = rng.choice(running)
            assert target.pid is not None
            info = proc_info(target.pid)
            if info is None or not (
                info.ppid == self.daemon_pid or carries_marker(target.pid, self.marker)
            ):
                continue  # gone already, and its pid is not ours to signal
            if rng.random() < 0.5:
                os.kill(target.pid, signal.SIGKILL)
                self.stats.injected["SIGKILL to an extension, from outside"] += 1
                continue
            os.kill(target.pid, signal.SIGSTOP)
            self._frozen[target.pid] = info.start
            self.stats.injected["SIGSTOP to an extension for 0.5-2.5 s"] += 1
            try:
                await self.paused(rng.uniform(0.5, 2.5))
            finally:
                self.thaw()

    def thaw(self) -> None:
        """SIGCONTs every process this run froze, if it is still the same process."""
        for pid, start in self._frozen.items():
            info = proc_info(pid)
            if info is not None and info.start == start:
                os.kill(pid, signal.SIGCONT)
        self._frozen.clear()

    async def hangups(self) -> None:
        """Connections that send a few requests and hang up before the replies;
        a third of them also open a panel or two, and hang up with them open."""
        rng = random.Random(self.plan.seed + 4)
        while not await self.paused(jitter(rng, self.plan.hangup_every)):
            opened: list[str] = []
            try:
                async with self.connection() as zot:
                    with trio.move_on_after(self.hello_bound):
                        await zot.hello(cwd=self.project, client="soak-hangup")
                    async with trio.open_nursery() as nursery:
                        for _ in range(rng.randint(2, 6)):
                            nursery.start_soon(self.abandoned, zot, rng.choice(list(TOOLS)))
                        if rng.random() < 1 / 3:
                            for _ in range(rng.randint(1, 2)):
                                nursery.start_soon(self.left_open, zot, opened)
                        await trio.sleep(rng.uniform(0, 0.3))
                        nursery.cancel_scope.cancel()
                self.stats.injected["client hung up with calls in flight"] += 1
                if opened:
                    self.stats.injected["client hung up with panels open"] += 1
            except (Gone, ZotdError):
                pass
            for panel_id in opened:
                self.panel_closed[panel_id] = trio.current_time()

    async def abandoned(self, zot: Client, tool: str) -> None:
        try:
            await zot.call_tool(tool, {"nonce": "abandoned"})
        except ZotdError:
            pass

    async def left_open(self, zot: Client, opened: list[str]) -> None:
        """Opens a panel (and presses a key in it) that its client will leave open.

        ``opened`` gets its id before the command is sent: whether or not its
        reply comes before the hang-up, the panel must end up closed for the
        extension (by zotd's ``panel_close``, or its ``cancel`` of the command).
        """
        self._nonces += 1
        nonce = f"hangup-{self._nonces}"
        opened.append(f"p-{nonce}")
        try:
            reply = await zot.invoke_command("panel", nonce)
            if reply.open_panel is not None:
                await zot.panel_key(reply.open_panel.id, "x", text=nonce)
        except ZotdError:
            pass

    def audit_panels(self, shown: str, asked: float) -> None:
        """Flags the panels ``/panels`` (asked at ``asked``) lists that were
        closed for their client more than :data:`LEAK_AFTER` before: zotd
        never told the extension (it queues ``panel_close`` before it answers
        the client's close, and before the ``/panels`` sent later)."""
        m = re.match(r"open \d+:(.*)", shown)
        if m is None:
            return
        stats = self.stats
        for panel_id in m.group(1).split():
            closed = self.panel_closed.get(panel_id)
            if closed is None or closed + LEAK_AFTER > asked or panel_id in stats.leaked_panels:
                continue
            stats.leaked_panels.add(panel_id)
            stats.sample(
                stats.wrong_samples,
                f"newer still had panel {panel_id} open {asked - closed:.1f} s after it closed",
            )

    async def panel_watch(self) -> None:
        """Asks the newer extension which panels it has open (``/panels``),
        about once a second, and flags those closed for their client a while
        ago (see :meth:`audit_panels`)."""
        rng = random.Random(self.plan.seed + 5)

        def check(r: ap.InvokeData) -> str | None:
            if r.extension != "newer" or not r.display.startswith("open "):
                return f"/panels got {r!r:.200}"
            return None

        async with self.connection() as zot:
            await self.hello(zot)
            while not await self.paused(jitter(rng, 1.0)):
                asked = trio.current_time()
                reply = await self.ask(
                    "invoke_command /panels",
                    lambda: zot.invoke_command("panels"),
                    check,
                    2 * self.config.command_timeout,
                )
                if reply[0] is not None:
                    self.audit_panels(reply[0].display, asked)

    async def panels_left(self, zot: Client) -> str:
        """What the newer extension says it has open (``/panels``) once no other
        client is connected: ``open 0:`` unless zotd failed to tell it of a
        panel that closed. Asked again for a few seconds, as the closes of
        the last clients' panels may still be on their way. (``no answer``
        if newer is not running then, as after a crash loop: a new process
        would have nothing open anyway.)"""
        shown = "no answer"
        with trio.move_on_after(5):
            while True:
                asked = trio.current_time()
                try:
                    shown = (await zot.invoke_command("panels")).display
                except ZotdError as exc:
                    shown = f"no answer ({exc.code})"
                if shown.startswith("open 0:"):
                    break
                await trio.sleep(0.25)
        self.audit_panels(shown, asked)
        return shown

    async def wait_until_ready(self, zot: Client, within: float) -> None:
        with trio.move_on_after(within):
            while True:
                infos = await zot.list_extensions()
                if sorted(i.name for i in infos if i.state == "ready") == sorted(EXTENSIONS):
                    return
                await trio.sleep(0.1)

    async def run(self) -> None:
        """Waits for the daemon, runs the load and the faults, takes the figures."""
        with trio.fail_after(15):
            while True:
                try:
                    async with self.connection() as zot:
                        await zot.ping()
                        break
                except (Gone, ZotdError):
                    await trio.sleep(0.05)
        async with self.connection() as zot:
            await self.hello(zot)
            await self.wait_until_ready(zot, 10)
            pids = [i.pid for i in await zot.list_extensions() if i.pid]
            self.stats.marked = all(carries_marker(pid, self.marker) for pid in pids)
            self.stats.rss_start = rss_mib(self.daemon_pid)
            self.stats.fds_start = open_fds(self.daemon_pid)
            self.stats.dangling_start = dangling_pipes(self.daemon_pid)
            self.load_began = trio.current_time()
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self.persist, self.monitor)
                    for cid in range(self.plan.clients):
                        nursery.start_soon(self.persist, partial(self.client, cid))
                    nursery.start_soon(self.persist, self.reloader)
                    nursery.start_soon(self.persist, self.crash_orders)
                    nursery.start_soon(self.signals)
                    nursery.start_soon(self.persist, self.hangups)
                    nursery.start_soon(self.persist, self.panel_watch)
                    await trio.sleep(self.plan.duration)
                    self.stop.set()
            finally:
                self.thaw()
            # Quiet again: once every extension runs, take the end figures.
            await self.wait_until_ready(zot, 10)
            self.stats.rss_end = rss_mib(self.daemon_pid)
            self.stats.fds_end = open_fds(self.daemon_pid)
            self.stats.dangling_end = dangling_pipes(self.daemon_pid)
            self.stats.final_states = {i.name: i.state for i in await zot.list_extensions()}
            self.stats.ext_pids.update(i.pid for i in self.snapshot.values() if i.pid)
            self.stats.panels_left = await self.panels_left(zot)


def check_extensions(infos: list[ap.ExtensionInfo]) -> str | None:
    names = [i.name for i in infos]
    if len(set(names)) != len(names) or not set(names) <= set(EXTENSIONS):
        return f"extensions {names}"
    return None


def describe(value: Any) -> str:
    """A short account of an echo's arguments (the padding by its length)."""
    if not isinstance(value, dict) or "pad" not in value:
        return f"{value!r:.160}"
    pad = value.get("pad")
    short = {k: v for k, v in value.items() if k != "pad"}
    return f"{short!r:.120} + pad of {len(pad) if isinstance(pad, str) else pad!r}"


def jitter(rng: random.Random, mean: float) -> float:
    return rng.uniform(0.5 * mean, 1.5 * mean)


# --- setting up and tearing down ----------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)


def write_config(path: Path, plan: Plan) -> list[str]:
    """Writes zotd.toml with the keys this zotd knows; returns the ones it does not."""
    known = set(Config.__struct_fields__)
    lines, skipped = [], []
    # Below the most requests the clients can have in flight, so that `busy` is
    # answered whenever many of them wait on a frozen or hanging extension.
    busy_at = max(8, plan.clients * plan.workers * 4 // 5)
    for key, value in {**SETTINGS, "max_requests": busy_at}.items():
        if key in known:
            lines.append(f"{key} = {toml_value(value)}")
        else:
            skipped.append(key)
    policy = getattr(Config(), "restart", None)
    if isinstance(policy, msgspec.Struct):
        lines.append("\n[restart]")
        fields = set(policy.__struct_fields__)
        lines += [f"{k} = {toml_value(v)}" for k, v in RESTART.items() if k in fields]
        skipped += [f"restart.{k}" for k in RESTART if k not in fields]
    else:
        skipped.append("[restart] (no restart policy in this zotd)")
    path.write_text("\n".join(lines) + "\n")
    return skipped


def write_extensions(root: Path, config: Config, env: dict[str, str]) -> list[Path]:
    """One directory with an extension.json per extension, running soak/extensions/*.py.

    ``env`` goes into each manifest's ``env``: zotd gives extensions an
    allowlisted environment, and this run's marker and seed must reach them.
    """
    extra = {"hanger": ["--late", str(config.tool_timeout + 1.0)]}
    # The rewriter's verdicts count before the guard's: the guard is asked
    # about the arguments as rewritten.
    priority = {"rewriter": -1}
    dirs = []
    for name in EXTENSIONS:
        directory = root / "ext" / name
        directory.mkdir(parents=True)
        manifest = {
            "name": name,
            "version": "1.0.0",
            "description": f"soak: {name}",
            "language": "python",
            "exec": sys.executable,
            "args": [str(EXT_SCRIPTS / f"{name}.py"), *extra.get(name, [])],
            "env": env,
            "priority": priority.get(name, 0),
        }
        (directory / "extension.json").write_text(json.dumps(manifest, indent=2))
        dirs.append(directory)
    return dirs


def start_daemon(root: Path, dirs: list[Path], marks: dict[str, str]) -> subprocess.Popen[bytes]:
    """``python -m zotd --ext DIR...`` in its own session, everything under ``root``."""
    env = {k: v for k, v in os.environ.items() if k != "ZOTD_TOKEN"}
    package_root = str(Path(zotd.__file__).resolve().parent.parent)
    env.update(
        marks,
        ZOT_HOME=str(root / "home"),
        ZOTD_SOCKET=str(root / "run" / "zotd.sock"),
        ZOTD_CONFIG=str(root / "zotd.toml"),
        PYTHONPATH=os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p),
        PYTHONUNBUFFERED="1",
    )
    argv = [sys.executable, "-m", "zotd"]
    for d in dirs:
        argv += ["--ext", str(d)]
    with open(root / "daemon.log", "wb") as log:
        return subprocess.Popen(
            argv,
            cwd=root / "proj",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@dataclass
class Ending:
    exit_code: int | None = None
    exit_seconds: float = 0.0
    orphans: list[ProcInfo] = field(default_factory=list)


def stop_daemon(daemon: subprocess.Popen[bytes]) -> tuple[int | None, float]:
    """SIGTERM, then wait; SIGKILL if it does not exit. Returns (exit code or None, seconds)."""
    started = time.monotonic()
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
    try:
        code: int | None = daemon.wait(EXIT_WAIT)
    except subprocess.TimeoutExpired:
        code = None
        daemon.kill()
        daemon.wait()
    return code, time.monotonic() - started


def find_orphans(marker: bytes, daemon_pid: int, pgids: set[int], since: int) -> list[ProcInfo]:
    """Processes still alive that the daemon or its extensions started.

    Anything whose environment carries this run's marker (every extension
    and grandchild inherits it), and anything started during the run whose
    parent was the daemon or whose process group was an extension's.
    """
    found = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        info = proc_info(pid)
        if info is None or info.state in ("Z", "X"):
            continue
        recent = info.start >= since
        if carries_marker(pid, marker) or (
            recent and (info.ppid == daemon_pid or info.pgid in pgids)
        ):
            found.append(info)
    return found


def settle_orphans(marker: bytes, daemon_pid: int, pgids: set[int], since: int) -> list[ProcInfo]:
    """Orphans that are still there half a second after the daemon exited
    (a SIGKILLed process may take a moment to go); they are then killed."""
    deadline = time.monotonic() + 0.5
    while True:
        orphans = find_orphans(marker, daemon_pid, pgids, since)
        if not orphans or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for o in orphans:  # leave nothing behind: ours, by pid
        try:
            os.kill(o.pid, signal.SIGKILL)
        except OSError:
            pass
    return orphans


# --- logs ---------------------------------------------------------------------------

_NOTES = [
    ("skipped a malformed line", "malformed lines skipped"),
    ("no such request pending", "replies to no pending call dropped"),
    ("-byte line: longer than", "oversized lines dropped"),
    ("sending SIGTERM", "stops escalated to SIGTERM"),
    ("sending SIGKILL", "stops escalated to SIGKILL"),
    ("stdin queue full", "frames dropped: stdin queue full"),
    ("; restarting in", "restarts by the restart policy"),
    ("left stopped until", "crash loops stopped by the intensity limit"),
    ("] refused:", "extensions refused (protocol error)"),
    ("no `ready` frame; ready after", "no `ready`: ready after a moment of quiet"),
    ("no `ready` within", "no `ready`: ready only at `ready_grace`"),
    ("dropped `tool_progress` for id", "tool_progress for no pending call dropped"),
    ("` for panel ", "panel frames for a panel not open dropped"),
    ("in its answer about", "rewrites for the wrong event ignored"),
    ("rewrite refused:", "rewrites refused (not an object, or a misfit)"),
]


@dataclass
class LogFigures:
    faults: Counter[str] = field(default_factory=Counter)
    reactions: Counter[str] = field(default_factory=Counter)
    flood_frames: int = 0
    pids: set[int] = field(default_factory=set)
    noise_dropped: int = 0
    push_dropped: int = 0
    daemon_errors: list[str] = field(default_factory=list)
    #: ``cancel`` frames received (``CANCEL`` lines), by extension.
    cancels: Counter[str] = field(default_factory=Counter)
    #: Calls the hanger dropped on ``cancel`` (``DROPPED`` lines).
    dropped_work: int = 0
    #: Keys and sizes for a panel the newer extension had not opened.
    unknown_panels: int = 0
    #: Frames dropped because an extension's stdin queue was full, by extension.
    queue_full: Counter[str] = field(default_factory=Counter)


def read_logs(root: Path) -> LogFigures:
    figures = LogFigures()
    started = re.compile(r"\] started pid (\d+)")
    noise = re.compile(r"\] dropped (\d+) notify frames and bad lines")
    for path in sorted((root / "home" / "logs").glob("ext-*.log*")):  # rotated ones too
        name = path.name.partition(".log")[0].removeprefix("ext-")
        for line in path.read_text("utf-8", "replace").splitlines():
            if line.startswith("CANCEL "):
                figures.cancels[name] += 1
            elif line.startswith("DROPPED "):
                figures.dropped_work += 1
            elif line.startswith("UNKNOWN-PANEL "):
                figures.unknown_panels += 1
            elif line.startswith("FAULT "):
                kind, _, detail = line[6:].partition(" ")
                if kind == "flood":
                    figures.flood_frames += int(detail.removeprefix("frames=") or 0)
                    figures.faults[f"{name}: flood bursts"] += 1
                elif kind in ("crash", "garbage", "guard", "rewriter", "progress", "panel"):
                    figures.faults[f"{name}: {kind} ({detail.partition(' ')[0]})"] += 1
                elif kind in ("hang", "late"):
                    figures.faults[f"{name}: {kind} (call never answered)"] += kind == "hang"
                    figures.faults[f"{name}: {kind} (answer after the deadline)"] += kind == "late"
                elif kind == "grandchild":
                    figures.faults[f"{name}: grandchild left in its group"] += 1
                else:
                    figures.faults[f"{name}: {kind}"] += 1
            elif line.startswith("[zotd "):
                m = started.search(line)
                if m:
                    figures.pids.add(int(m.group(1)))
                m = noise.search(line)
                if m:
                    figures.noise_dropped += int(m.group(1))
                for needle, label in _NOTES:
                    if needle in line:
                        figures.reactions[label] += 1
                if "stdin queue full" in line:
                    figures.queue_full[name] += 1
    figures.faults = Counter({k: v for k, v in figures.faults.items() if v})
    daemon_log = (root / "daemon.log").read_text("utf-8", "replace").splitlines()
    for line in daemon_log:
        m = re.search(r"dropped (\d+) push frame", line)
        if m:
            figures.push_dropped += int(m.group(1))
    figures.daemon_errors = [
        line for line in daemon_log if " ERROR " in line or line.startswith("Traceback")
    ]
    return figures


# --- the table ----------------------------------------------------------------------


def render(
    plan: Plan, stats: Stats, logs: LogFigures, ending: Ending, seconds: float, skipped: list[str]
) -> tuple[str, list[str]]:
    """The table, and the reasons the run failed (none if it passed)."""
    kinds = stats.kinds
    sent = sum(k.sent for k in kinds.values())
    lost = sum(k.lost for k in kinds.values())
    errors: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for k in kinds.values():
        errors.update(k.errors)
        others.update(k.other)
    received = sent - lost
    wrong = sum(k.wrong for k in kinds.values()) + stats.duplicates + stats.idless
    unexpected = {c: n for c, n in errors.items() if c not in CLEAN_ERRORS}
    orphans = len(ending.orphans)

    rows: list[tuple[str, str]] = []

    def row(label: str, value: object = "") -> None:
        rows.append((label, f"{value:,}" if isinstance(value, int) else str(value)))

    row("requests sent", sent)
    row("replies received", received)
    row("replies lost", lost)
    row("wrong replies", wrong)
    if stats.duplicates or stats.idless:
        row("  of which second replies", stats.duplicates)
        row("  of which replies with no id", stats.idless)
    row("successful replies", sum(k.ok for k in kinds.values()))
    row("error replies by code", sum(errors.values()))
    for code, n in sorted(errors.items(), key=lambda kv: -kv[1]):
        row(f"  {code}", n)
    row("clean ends with no reply to check", sum(others.values()))
    row("  abandoned: the client gave the call up", others["abandoned"])
    row("  stopped: the panel's extension stopped instead", others["stopped"])
    row("faults injected by kind", sum(stats.injected.values()) + sum(logs.faults.values()))
    row("  by the soak", "")
    for what, n in sorted(stats.injected.items()):
        row(f"    {what}", n)
    row("  by the extensions (FAULT lines in their logs)", "")
    for what, n in sorted(logs.faults.items()):
        row(f"    {what}", n)
    row("    flooder: notify frames written", logs.flood_frames)
    row("daemon reactions (notes in the extension logs)", "")
    for _, label in _NOTES:
        row(f"  {label}", logs.reactions[label])
    row("  noise dropped (notify frames, bad lines)", logs.noise_dropped)
    row("push frames received (notifications())", sum(stats.pushes.values()))
    for what, n in sorted(stats.pushes.items()):
        row(f"  {what}", n)
    row("  dropped by zotd: client not reading fast enough", logs.push_dropped)
    row("  dropped by zotd.client: buffer full", stats.push_dropped)
    row("intercept verdicts", "")
    for what, n in sorted(stats.intercepts.items()):
        row(f"  {what}", n)
    row("tool progress (call_tool with on_progress)", "")
    for what, n in sorted(stats.progress.items()):
        row(f"  {what}", n)
    row("cancellation", "")
    row(
        "  `cancel` requests sent (calls given up)",
        kinds.get("cancel", KindStats()).sent,
    )
    row("    answered, as were the calls they gave up", kinds.get("cancel", KindStats()).ok)
    for what in (IN_FLIGHT, ANSWERED_ALREADY):
        row(f"    {what}", stats.cancels[what])
    row("  `cancel` frames received by the extensions", sum(logs.cancels.values()))
    for name, n in sorted(logs.cancels.items()):
        row(f"    {name}", n)
    row("  hanger: calls it dropped on `cancel`", logs.dropped_work)
    row("panels (newer: /panel)", "")
    for what in ("opened", "rendered", "closed by the client", "closed by the extension (`q`)"):
        row(f"  {what}", stats.panels[what])
    row("  closed by zotd: its extension stopped", others["stopped"])
    row("  keys and sizes for panels newer had not opened", logs.unknown_panels)
    row(f"  still open in newer {LEAK_AFTER:g} s after they closed", len(stats.leaked_panels))
    left = re.match(r"open (\d+):", stats.panels_left)
    row("  open in newer at the end (`/panels`)", left.group(1) if left else stats.panels_left)
    row("connections opened", stats.connections)
    waits = sorted(stats.hello_waits)
    if waits:
        slow = sum(1 for w in waits if w >= 0.5)
        row(
            "  hello: median / slowest (s), 0.5 s or more",
            f"{waits[len(waits) // 2]:.3f} / {waits[-1]:.2f}, {slow}",
        )
    row("extension processes started", len(logs.pids | stats.ext_pids))
    row(
        "daemon RSS start / end (MiB)",
        f"{stats.rss_start:.1f} / {stats.rss_end:.1f} (peak {stats.rss_peak:.1f})",
    )
    fds_start, fds_end = sum(stats.fds_start.values()), sum(stats.fds_end.values())
    series = stats.rss_series
    if series:
        marks = [
            min(series, key=lambda sample: abs(sample[0] - plan.duration * q))[1]
            for q in (0.25, 0.5, 0.75)
        ]
        row(
            "  at 25% / 50% / 75% of the load",
            " / ".join(f"{m:.1f}" for m in marks),
        )
    row("daemon open fds start / end", f"{fds_start} / {fds_end}")
    row(
        "  pipes to no live process start / end",
        f"{stats.dangling_start} / {stats.dangling_end}",
    )
    code = "none (killed)" if ending.exit_code is None else str(ending.exit_code)
    row("daemon exit code after SIGTERM", f"{code} in {ending.exit_seconds:.2f} s")
    row("daemon errors logged", len(logs.daemon_errors))
    row("orphans left", orphans)
    row("  run marker in the extensions' environment", "yes" if stats.marked else "NO")
    row("duration", f"{seconds:.1f} s ({plan.duration:g} s of load)")

    width = max(len(label) for label, _ in rows) + 2
    vwidth = max(len(value) for _, value in rows)
    title = (
        f"zotd soak: {plan.clients} clients x {plan.workers} workers, "
        f"{plan.duration:g} s of load, seed {plan.seed}{' (quick)' if plan.quick else ''}"
    )
    rule = "-" * max(width + vwidth, len(title))
    out = [title, rule]
    out += [f"{label:<{width}}{value:>{vwidth}}" for label, value in rows]
    out.append(rule)
    codes = sorted(errors, key=lambda c: -errors[c])
    ends = sorted(others, key=lambda c: -others[c])
    header = ["requests by kind", "sent", "ok", *codes, *ends, "lost", "wrong"]
    table = [header] + [
        [
            k,
            str(s.sent),
            str(s.ok),
            *(str(s.errors[c]) for c in codes),
            *(str(s.other[c]) for c in ends),
            str(s.lost),
            str(s.wrong),
        ]
        for k, s in sorted(kinds.items())
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        cells = "".join(f"{c:>{w + 2}}" for c, w in zip(r[1:], widths[1:], strict=True))
        out.append(f"{r[0]:<{widths[0]}}{cells}")
    out.append(rule)
    if skipped:
        out.append("zotd.toml keys this zotd does not know (skipped): " + ", ".join(skipped))

    failures = []
    if lost:
        failures.append(f"{lost} replies lost")
    if wrong or stats.bad_pushes:
        failures.append(f"{wrong} wrong replies, {stats.bad_pushes} bad push frames")
    if orphans:
        failures.append(f"{orphans} processes left behind")
    if unexpected:
        failures.append(f"unexpected error replies: {unexpected}")
    if ending.exit_code != 0:
        failures.append(f"daemon exit code after SIGTERM: {code}")
    if logs.daemon_errors:
        failures.append(f"{len(logs.daemon_errors)} errors in the daemon log")
    leftover = stats.panels_left.startswith("open ") and not stats.panels_left.startswith("open 0:")
    if (stats.leaked_panels or leftover) and not logs.queue_full["newer"]:
        # A `panel_close` (or the `cancel` of a `/panel`) dropped from a full
        # stdin queue would explain it; nothing else does.
        failures.append(
            f"{len(stats.leaked_panels)} panels left open in newer after they closed; "
            f"at the end: {stats.panels_left}"
        )
    for sample in stats.lost_samples:
        out.append(f"lost: {sample}")
    for sample in stats.wrong_samples:
        out.append(f"wrong: {sample}")
    for o in ending.orphans:
        out.append(f"orphan: pid {o.pid} pgid {o.pgid} ppid {o.ppid} {o.cmd[:100]}")
    states = " ".join(f"{n}={s}" for n, s in stats.final_states.items())
    out.append(f"extension states at the end: {states}")
    if fds_end != fds_start:
        grown = (stats.fds_end - stats.fds_start) + Counter(
            {f"-{k}": v for k, v in (stats.fds_start - stats.fds_end).items()}
        )
        out.append(f"daemon fds that differ (end - start): {dict(grown)}")
    for line in logs.daemon_errors[:10]:
        out.append(f"daemon log: {line[:200]}")
    out.append("FAIL: " + "; ".join(failures) if failures else "PASS")
    return "\n".join(out), failures


# --- main ---------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> tuple[Plan, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (under a minute)")
    parser.add_argument("--clients", type=int, help="client connections (default 40, quick 20)")
    parser.add_argument("--duration", type=float, help="seconds of load (default 180, quick 30)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the soak's choices")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    clients = args.clients or (20 if args.quick else 40)
    duration = args.duration or (30.0 if args.quick else 180.0)
    if clients < 1 or duration <= 0:
        parser.error("--clients and --duration must be positive")
    return Plan(clients=clients, duration=duration, seed=args.seed, quick=args.quick), args.keep


def print_tail(path: Path, lines: int = 30) -> None:
    try:
        text = path.read_text("utf-8", "replace").splitlines()[-lines:]
    except OSError:
        return
    print(f"--- last lines of {path}:", *text, sep="\n", file=sys.stderr)


def self_start_ticks() -> int:
    info = proc_info(os.getpid())
    assert info is not None
    return info.start


def main(argv: list[str] | None = None) -> int:
    plan, keep = parse_args(argv)
    began = time.monotonic()
    since = self_start_ticks()
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="zsoak", dir="/tmp")))
    run_id = uuid.uuid4().hex
    marker = f"ZOTD_SOAK_RUN={run_id}".encode()
    daemon: subprocess.Popen[bytes] | None = None
    try:
        (root / "proj").mkdir()
        (root / "run").mkdir(mode=0o700)
        skipped = write_config(root / "zotd.toml", plan)
        try:
            config = load_config(root / "zotd.toml")
        except ConfigError as exc:
            print(f"soak: this zotd refuses the soak's config: {exc}", file=sys.stderr)
            return 2
        marks = {"ZOTD_SOAK_RUN": run_id, "ZOTD_SOAK_SEED": str(plan.seed)}
        dirs = write_extensions(root, config, marks)
        daemon = start_daemon(root, dirs, marks)
        soak = Soak(plan, root, config, daemon.pid)
        soak.marker = marker
        print(
            f"soak: daemon pid {daemon.pid}, {plan.clients} clients, "
            f"{plan.duration:g} s of load, in {root}",
            file=sys.stderr,
        )
        try:
            trio.run(soak.run)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) or (
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt)
            ):
                print("soak: interrupted", file=sys.stderr)
                return 130
            print_tail(root / "daemon.log")
            raise
        ending = Ending()
        ending.exit_code, ending.exit_seconds = stop_daemon(daemon)
        pgids = soak.stats.ext_pids | read_logs(root).pids
        ending.orphans = settle_orphans(marker, daemon.pid, pgids, since)
        logs = read_logs(root)
        table, failures = render(plan, soak.stats, logs, ending, time.monotonic() - began, skipped)
        print(table)
        if keep:
            print(f"kept {root}", file=sys.stderr)
        return 1 if failures else 0
    finally:
        if daemon is not None and daemon.poll() is None:
            stop_daemon(daemon)
            settle_orphans(marker, daemon.pid, set(), since)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
