"""One run's state and its plumbing: the :class:`Soak` object every task gets
(the plan, the config, the figures, the stop event, the extensions as last
seen), its audited connections to the daemon, and :meth:`Soak.ask`, which
sends one request and sorts its outcome (ok, a clean error, wrong, lost).

Also the checks and helpers more than one kind of request uses.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
import trio

from soak.figures import Stats
from soak.plan import ANSWERED_ALREADY, BUSY_BACKOFF, EXTENSIONS, IN_FLIGHT, Plan
from soak.tap import TapStream
from zotd.client import Client, ZotdError
from zotd.model.config import Config
from zotd.protocol import agent as ap

T = TypeVar("T")


class Gone(Exception):
    """The connection to the daemon is gone."""


class Ended(Exception):
    """A request ended cleanly without a reply to check: ``abandoned`` (the
    client gave it up) or ``stopped`` (the panel's extension stopped)."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


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
        self.rngs: dict[int, random.Random] = {}
        self.frozen: dict[int, int] = {}  # pid -> start ticks, while SIGSTOPped
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
        async with self.tapped(audit_cancels=audit_cancels) as (zot, _):
            yield zot

    @asynccontextmanager
    async def tapped(
        self, *, audit_cancels: bool = False
    ) -> AsyncIterator[tuple[Client, TapStream]]:
        """As :meth:`connection`, with the tap under the client (to stop reading, say)."""
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
                    yield zot, tap
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

    async def persist(self, lane: Callable[[], Awaitable[None]]) -> None:
        """Runs ``lane`` until the load stops, again after a lost connection."""
        while not self.stop.is_set():
            try:
                await lane()
            except Gone:
                await trio.sleep(0.2)

    async def paused(self, seconds: float) -> bool:
        """Sleeps ``seconds``, or until the load stops; whether it has stopped
        (no fault is injected once the load is over: the end figures are
        taken once every extension is ready again)."""
        with trio.move_on_after(seconds):
            await self.stop.wait()
        return self.stop.is_set()

    def hangup_nonce(self) -> str:
        """A nonce for a panel a hang-up leaves open: ``hangup-<n>``, from the same count."""
        self._nonces += 1
        return f"hangup-{self._nonces}"


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
