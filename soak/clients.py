"""The clients: each one an agent that connects, says ``hello``, makes a mix
of requests from two workers at once, reads its push frames, hangs up and
connects again; and the monitor that watches the extensions and the
daemon's memory.
"""

from __future__ import annotations

import random

import trio

from soak.intercepts import intercept, intercept_message, intercept_turn
from soak.panels import PanelBoard, panel
from soak.plan import EXTENSIONS, MIX, TOOLS
from soak.procfs import rss_mib
from soak.requests import call_tool, emit, invoke, list_extensions, list_tools, ping
from soak.state import Gone, Soak, check_extensions
from zotd.client import Client
from zotd.protocol import agent as ap


async def one_request(
    soak: Soak, zot: Client, cid: int, rng: random.Random, board: PanelBoard
) -> None:
    what = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    if what in TOOLS:
        await call_tool(soak, zot, cid, rng, what)
    elif what == "give_up":
        await call_tool(soak, zot, cid, rng, "hang_echo", give_up=True)
    elif what == "say":
        await invoke(soak, zot, cid, rng)
    elif what == "panel":
        await panel(soak, zot, cid, rng, board)
    elif what == "intercept":
        await intercept(soak, zot, cid, rng)
    elif what == "turn_start":
        await intercept_turn(soak, zot, cid, rng)
    elif what == "assistant_message":
        await intercept_message(soak, zot, cid, rng)
    elif what == "emit":
        await emit(soak, zot, cid, rng)
    elif what == "list_tools":
        await list_tools(soak, zot, cid, rng)
    elif what == "list_extensions":
        await list_extensions(soak, zot, cid, rng)
    else:
        await ping(soak, zot, cid, rng)


async def client(soak: Soak, cid: int) -> None:
    """One agent: connects, works for a while, hangs up, connects again."""
    rng = soak.rngs.setdefault(cid, random.Random(soak.plan.seed * 1000 + cid))
    subscribe = cid % 4 == 0
    board = PanelBoard()
    async with soak.connection(audit_cancels=True) as zot:
        if not await soak.hello(zot):
            await trio.sleep(0.2)
            return
        if subscribe:
            await soak.ask("subscribe", zot.subscribe, lambda _: None, soak.quick_bound)
        budget = rng.randint(50, 400)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_pushes, soak, zot, subscribe, board)
            async with trio.open_nursery() as workers:
                for _ in range(soak.plan.workers):
                    workers.start_soon(work, soak, zot, cid, rng, budget, board)
            nursery.cancel_scope.cancel()


async def work(
    soak: Soak, zot: Client, cid: int, rng: random.Random, budget: int, board: PanelBoard
) -> None:
    try:
        for _ in range(budget // soak.plan.workers):
            if soak.stop.is_set():
                return
            await one_request(soak, zot, cid, rng, board)
            await trio.sleep(rng.uniform(0, 0.03))
    except Gone:
        return  # the other worker sees it too; the client reconnects


async def read_pushes(soak: Soak, zot: Client, subscribed: bool, board: PanelBoard) -> None:
    """Reads a client connection's push frames: the workspace's news if it
    subscribed (and none if not), its panels' frames (handed to the worker
    that opened the panel). A ``tool_progress`` push should never come
    here: every call the soak makes has ``on_progress``."""
    stats = soak.stats
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


async def monitor(soak: Soak) -> None:
    """Watches the extensions (pids, states) and the daemon's memory."""
    async with soak.connection() as zot:
        await soak.hello(zot)
        while not soak.stop.is_set():
            reply = await soak.ask(
                "list_extensions", zot.list_extensions, check_extensions, soak.quick_bound
            )
            infos = reply[0]
            if infos is not None:
                soak.snapshot = {i.name: i for i in infos}
                soak.stats.ext_pids.update(i.pid for i in infos if i.pid)
            rss = rss_mib(soak.daemon_pid)
            soak.stats.rss_peak = max(soak.stats.rss_peak, rss)
            soak.stats.rss_series.append((trio.current_time() - soak.load_began, rss))
            await trio.sleep(0.2)
