"""The faults the soak injects from outside: reloads (and revivals of an
extension left dead), ``/crash``, SIGKILL and SIGSTOP to extension
processes, and connections that hang up with calls in flight and panels
open.
"""

from __future__ import annotations

import os
import random
import signal

import trio

from soak.plan import EXTENSIONS, REVIVE_AFTER, TOOLS
from soak.procfs import carries_marker, proc_info
from soak.state import Gone, Soak, check_extensions, jitter
from zotd.client import Client, ZotdError
from zotd.protocol import agent as ap


async def reload_one(soak: Soak, zot: Client, name: str | None, why: str) -> None:
    def check(infos: list[ap.ExtensionInfo]) -> str | None:
        names = [i.name for i in infos]
        if name is not None and names not in ([name], []):
            return f"reload {name} returned {names}"
        return check_extensions(infos)

    _, outcome = await soak.ask(
        "ext_reload", lambda: zot.ext_reload(name), check, soak.reload_bound
    )
    if outcome == "ok":
        soak.stats.injected[why] += 1


async def reloader(soak: Soak) -> None:
    """Reloads a random extension (now and then all of them) on a schedule, and
    revives an extension the daemon has left dead for a while."""
    rng = random.Random(soak.plan.seed + 1)
    async with soak.connection() as zot:
        await soak.hello(zot)
        dead_since: dict[str, float] = {}
        next_reload = trio.current_time() + jitter(rng, soak.plan.reload_every)
        while not await soak.paused(0.1):
            now = trio.current_time()
            for name, info in soak.snapshot.items():
                if info.state in ("failed", "exited"):
                    dead_since.setdefault(name, now)
                else:
                    dead_since.pop(name, None)
            for name, since in list(dead_since.items()):
                if now - since > REVIVE_AFTER:
                    del dead_since[name]
                    await reload_one(soak, zot, name, "ext_reload: revive one left dead")
            if now >= next_reload:
                if rng.random() < 0.15:
                    await reload_one(soak, zot, None, "ext_reload: all extensions")
                else:
                    name = rng.choice(EXTENSIONS)
                    await reload_one(soak, zot, name, "ext_reload: one extension")
                next_reload = trio.current_time() + jitter(rng, soak.plan.reload_every)


async def crash_orders(soak: Soak) -> None:
    """Invokes ``/crash``: the crasher dies without answering."""
    rng = random.Random(soak.plan.seed + 2)
    async with soak.connection() as zot:
        await soak.hello(zot)
        while not await soak.paused(jitter(rng, soak.plan.crash_every)):
            _, outcome = await soak.ask(
                "invoke_command /crash",
                lambda: zot.invoke_command("crash"),
                lambda r: f"/crash answered {r!r:.100}",
                2 * soak.config.command_timeout,
            )
            if outcome == "extension_failed":
                soak.stats.injected["/crash: the crasher told to die"] += 1


async def signals(soak: Soak) -> None:
    """Kills (SIGKILL) or freezes (SIGSTOP, later SIGCONT) a random extension process."""
    rng = random.Random(soak.plan.seed + 3)
    while not await soak.paused(jitter(rng, soak.plan.signal_every)):
        running = [i for i in soak.snapshot.values() if i.pid and i.state == "ready"]
        if not running:
            continue
        target = rng.choice(running)
        assert target.pid is not None
        info = proc_info(target.pid)
        if info is None or not (
            info.ppid == soak.daemon_pid or carries_marker(target.pid, soak.marker)
        ):
            continue  # gone already, and its pid is not ours to signal
        if rng.random() < 0.5:
            os.kill(target.pid, signal.SIGKILL)
            soak.stats.injected["SIGKILL to an extension, from outside"] += 1
            continue
        os.kill(target.pid, signal.SIGSTOP)
        soak.frozen[target.pid] = info.start
        soak.stats.injected["SIGSTOP to an extension for 0.5-2.5 s"] += 1
        try:
            await soak.paused(rng.uniform(0.5, 2.5))
        finally:
            thaw(soak)


def thaw(soak: Soak) -> None:
    """SIGCONTs every process this run froze, if it is still the same process."""
    for pid, start in soak.frozen.items():
        info = proc_info(pid)
        if info is not None and info.start == start:
            os.kill(pid, signal.SIGCONT)
    soak.frozen.clear()


async def hangups(soak: Soak) -> None:
    """Connections that send a few requests and hang up before the replies;
    a third of them also open a panel or two, and hang up with them open."""
    rng = random.Random(soak.plan.seed + 4)
    while not await soak.paused(jitter(rng, soak.plan.hangup_every)):
        opened: list[str] = []
        try:
            async with soak.connection() as zot:
                with trio.move_on_after(soak.hello_bound):
                    await zot.hello(cwd=soak.project, client="soak-hangup")
                async with trio.open_nursery() as nursery:
                    for _ in range(rng.randint(2, 6)):
                        nursery.start_soon(abandoned, soak, zot, rng.choice(list(TOOLS)))
                    if rng.random() < 1 / 3:
                        for _ in range(rng.randint(1, 2)):
                            nursery.start_soon(left_open, soak, zot, opened)
                    await trio.sleep(rng.uniform(0, 0.3))
                    nursery.cancel_scope.cancel()
            soak.stats.injected["client hung up with calls in flight"] += 1
            if opened:
                soak.stats.injected["client hung up with panels open"] += 1
        except (Gone, ZotdError):
            pass
        for panel_id in opened:
            soak.panel_closed[panel_id] = trio.current_time()


async def abandoned(soak: Soak, zot: Client, tool: str) -> None:
    try:
        await zot.call_tool(tool, {"nonce": "abandoned"})
    except ZotdError:
        pass


async def left_open(soak: Soak, zot: Client, opened: list[str]) -> None:
    """Opens a panel (and presses a key in it) that its client will leave open.

    ``opened`` gets its id before the command is sent: whether or not its
    reply comes before the hang-up, the panel must end up closed for the
    extension (by zotd's ``panel_close``, or its ``cancel`` of the command).
    """
    nonce = soak.hangup_nonce()
    opened.append(f"p-{nonce}")
    try:
        reply = await zot.invoke_command("panel", nonce)
        if reply.open_panel is not None:
            await zot.panel_key(reply.open_panel.id, "x", text=nonce)
    except ZotdError:
        pass
