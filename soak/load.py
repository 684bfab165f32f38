"""The run itself: waits for the daemon, takes the starting figures, runs
the clients, the monitor and the faults for the plan's duration, then waits
for the extensions to be ready again and takes the end figures.
"""

from __future__ import annotations

import sys
from functools import partial

import trio

from soak.clients import client, monitor
from soak.faults import crash_orders, hangups, reloader, signals, thaw
from soak.panels import panel_watch, panels_left
from soak.plan import EXTENSIONS
from soak.procfs import carries_marker, dangling_pipes, open_fds, rss_mib
from soak.stalls import late_registrations, non_reading
from soak.state import Gone, Soak
from zotd.client import Client, ZotdError


async def wait_until_ready(zot: Client, within: float) -> None:
    """Returns once every extension is ready, or after ``within`` seconds."""
    with trio.move_on_after(within):
        while True:
            infos = await zot.list_extensions()
            if sorted(i.name for i in infos if i.state == "ready") == sorted(EXTENSIONS):
                return
            await trio.sleep(0.1)


def take_rss(soak: Soak, at: float) -> None:
    """One sample of the RSS table (and a line on stderr, to follow a long run)."""
    rss, sent = rss_mib(soak.daemon_pid), soak.stats.requests_sent()
    soak.stats.rss_samples.append((at, rss, sent))
    print(f"soak: {at / 60:5.1f} min, daemon RSS {rss:.1f} MiB, {sent:,} requests", file=sys.stderr)


async def sample_rss(soak: Soak) -> None:
    """Samples the daemon's RSS every ``rss_every`` seconds of the load."""
    every = soak.plan.rss_every
    k = 1
    while not await soak.paused(soak.load_began + k * every - trio.current_time()):
        take_rss(soak, k * every)
        k += 1


async def run(soak: Soak) -> None:
    """Waits for the daemon, runs the load and the faults, takes the figures."""
    with trio.fail_after(15):
        while True:
            try:
                async with soak.connection() as zot:
                    await zot.ping()
                    break
            except (Gone, ZotdError):
                await trio.sleep(0.05)
    async with soak.connection() as zot:
        await soak.hello(zot)
        await wait_until_ready(zot, 10)
        pids = [i.pid for i in await zot.list_extensions() if i.pid]
        soak.stats.marked = all(carries_marker(pid, soak.marker) for pid in pids)
        soak.stats.rss_start = rss_mib(soak.daemon_pid)
        soak.stats.fds_start = open_fds(soak.daemon_pid)
        soak.stats.dangling_start = dangling_pipes(soak.daemon_pid)
        soak.load_began = trio.current_time()
        take_rss(soak, 0.0)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(soak.persist, partial(monitor, soak))
                for cid in range(soak.plan.clients):
                    nursery.start_soon(soak.persist, partial(client, soak, cid))
                nursery.start_soon(soak.persist, partial(reloader, soak))
                nursery.start_soon(soak.persist, partial(crash_orders, soak))
                nursery.start_soon(signals, soak)
                nursery.start_soon(soak.persist, partial(hangups, soak))
                nursery.start_soon(soak.persist, partial(panel_watch, soak))
                nursery.start_soon(soak.persist, partial(non_reading, soak))
                nursery.start_soon(soak.persist, partial(late_registrations, soak))
                nursery.start_soon(sample_rss, soak)
                await trio.sleep(soak.plan.duration)
                soak.stop.set()
        finally:
            thaw(soak)
        # Quiet again: once every extension runs, take the end figures.
        await wait_until_ready(zot, 10)
        soak.stats.rss_end = rss_mib(soak.daemon_pid)
        take_rss(soak, trio.current_time() - soak.load_began)
        soak.stats.fds_end = open_fds(soak.daemon_pid)
        soak.stats.dangling_end = dangling_pipes(soak.daemon_pid)
        soak.stats.final_states = {i.name: i.state for i in await zot.list_extensions()}
        soak.stats.ext_pids.update(i.pid for i in soak.snapshot.values() if i.pid)
        soak.stats.panels_left = await panels_left(soak, zot)
