"""The faults of peers that stall or pile up (issue 15), besides the stuck
extension (``extensions/stuck.py``, which stalls on its own): clients that
send many requests and do not read their replies for a while, and bursts
of registrations after ``ready`` (the latecomer's ``/register``).

What must hold: the client that stopped reading gets every reply once it
reads again, each its own (the daemon may stop reading its requests
meanwhile, never drop a reply or hang up); a burst's tools are all in
``list_tools`` as soon as ``/register`` is answered, and subscribers get
an ``extension_state`` push with all of them soon after.
"""

from __future__ import annotations

import random
import time
import uuid

import trio

from soak.plan import LATE_PREFIX, UNREAD
from soak.requests import call_tool
from soak.state import Gone, Soak, check_extensions, jitter
from zotd.client import Client, ZotdError
from zotd.protocol import agent as ap

#: After the ``/register`` reply, how long subscribers may wait for the
#: ``extension_state`` push with all of the burst.
LATE_PUSH_WAIT = 5.0


async def non_reading(soak: Soak) -> None:
    """A connection that sends a burst of requests with big replies, reads
    nothing for a while, then reads: every reply must come (lost otherwise)."""
    rng = random.Random(soak.plan.seed + 5)
    plan = soak.plan
    cid = -1
    while not await soak.paused(jitter(rng, plan.unread_every)):
        async with soak.tapped(audit_cancels=True) as (zot, tap):
            if not await soak.hello(zot):
                continue
            count = rng.randint(*plan.unread_requests)
            pause = rng.uniform(*plan.unread_pause)
            wait = pause + soak.quick_bound
            before = tap.sent_bytes
            outcomes: list[str] = []
            tap.hold()
            try:
                async with trio.open_nursery() as nursery:
                    for _ in range(count):
                        # Spread over the pause: the later ones find the outbox full.
                        delay = rng.uniform(0, pause)
                        nursery.start_soon(unread_one, soak, zot, cid, rng, delay, wait, outcomes)
                    await trio.sleep(pause)
                    taken = tap.sent_bytes - before
                    tap.release()
            finally:
                tap.release()
            stats = soak.stats
            stats.injected[UNREAD] += 1
            stats.unread["requests sent"] += count
            stats.unread["replies received once it read again"] += sum(
                o not in ("lost", "wrong") for o in outcomes
            )
            stats.unread["KiB of requests taken while it did not read"] += taken // 1024
            stats.unread["KiB of requests written in all"] += (tap.sent_bytes - before) // 1024


async def unread_one(
    soak: Soak,
    zot: Client,
    cid: int,
    rng: random.Random,
    delay: float,
    wait: float,
    outcomes: list[str],
) -> None:
    """One request of a client that is not reading, ``delay`` seconds into
    its pause: most are ``echo`` with a big pad."""
    await trio.sleep(delay)
    draw = rng.random()
    try:
        if draw < 0.8:
            pad = rng.randint(*soak.plan.unread_pad)
            outcome = await call_tool(
                soak, zot, cid, rng, "echo", pad=pad, kind="unread: call_tool echo", wait=wait
            )
        elif draw < 0.9:
            _, outcome = await soak.ask(
                "unread: list_extensions", zot.list_extensions, check_extensions, wait + 4
            )
        else:
            _, outcome = await soak.ask(
                "unread: ping", zot.ping, lambda p: None if p is True else "no pong", wait + 4
            )
    except Gone:
        outcome = "lost"
    outcomes.append(outcome)


async def late_registrations(soak: Soak) -> None:
    """Makes the latecomer register hundreds of tools at once, after ``ready``,
    and checks ``list_tools`` and the ``extension_state`` pushes."""
    rng = random.Random(soak.plan.seed + 6)
    async with soak.connection() as zot:
        if not await soak.hello(zot):
            return
        while True:  # `busy` now and then: until it is taken
            _, outcome = await soak.ask(
                "subscribe", zot.subscribe, lambda _: None, soak.quick_bound
            )
            if outcome == "ok":
                break
            if outcome not in ("busy", "timeout") or await soak.paused(0.2):
                return
        states: list[tuple[float, ap.ExtensionStatePush]] = []
        changed = [trio.Event()]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect_states, zot, states, changed)
            while not await soak.paused(jitter(rng, soak.plan.late_every)):
                await one_burst(soak, zot, rng, states, changed)
            nursery.cancel_scope.cancel()


async def collect_states(
    zot: Client, states: list[tuple[float, ap.ExtensionStatePush]], changed: list[trio.Event]
) -> None:
    """Keeps the latecomer's ``extension_state`` pushes (the rest is not checked here)."""
    async for frame in zot.notifications():
        if isinstance(frame, ap.ExtensionStatePush) and frame.extension == "latecomer":
            states.append((trio.current_time(), frame))
            changed[0].set()
            changed[0] = trio.Event()


def has_burst(
    tools: list[ap.ToolInfo], commands: list[ap.CommandInfo] | None, gen: str, n: int
) -> bool:
    """Whether the burst ``gen`` of ``n`` tools (and ``n // 10`` commands,
    unless ``commands`` is ``None``) is all there, with its descriptions."""
    want = {f"{LATE_PREFIX}{i}": f"late {i} of {gen}" for i in range(n)}
    got = {t.name: t.description for t in tools if t.extension == "latecomer"}
    if any(got.get(k) != v for k, v in want.items()):
        return False
    if commands is None:
        return True
    cmds = {c.name: c.description for c in commands if c.extension == "latecomer"}
    return all(cmds.get(f"{LATE_PREFIX}{i}") == f"late {i} of {gen}" for i in range(n // 10))


async def one_burst(
    soak: Soak,
    zot: Client,
    rng: random.Random,
    states: list[tuple[float, ap.ExtensionStatePush]],
    changed: list[trio.Event],
) -> None:
    stats = soak.stats
    gen = f"g{uuid.uuid4().hex[:8]}"
    n = rng.randint(*soak.plan.late_tools)
    prefix = f"registered {n} tools, {n // 10} commands for {gen} (pid "
    del states[:]  # the pushes from here on
    began = time.monotonic()
    reply, outcome = await soak.ask(
        "invoke_command /register",
        lambda: zot.invoke_command("register", f"{gen} {n}"),
        lambda r: (
            None
            if r.extension == "latecomer" and r.display.startswith(prefix)
            else f"/register {gen} {n} got {r!r:.200}"
        ),
        2 * soak.config.command_timeout,
    )
    if outcome != "ok" or reply is None:
        return
    stats.injected["latecomer: tools and commands registered after `ready`, 100-300"] += 1
    stats.late["bursts answered"] += 1
    stats.late["tools registered"] += n
    stats.late["/register answered within (ms, slowest)"] = max(
        stats.late["/register answered within (ms, slowest)"],
        int(1000 * (time.monotonic() - began)),
    )
    pid = int(reply.display.removeprefix(prefix).rstrip(")"))
    answered = trio.current_time()

    async def same_process() -> bool:
        """Whether the latecomer that answered still runs, ready (no restart,
        no stop under way: a stopping extension's tools leave the registry)."""
        try:
            infos = await zot.list_extensions()
        except ZotdError:
            return False
        return any(i.name == "latecomer" and i.pid == pid and i.state == "ready" for i in infos)

    tools, _ = await soak.ask(
        "list_tools after /register", zot.list_tools, lambda _: None, soak.quick_bound
    )
    if tools is not None:
        if has_burst(tools, None, gen, n):
            stats.late["list_tools: all of the burst"] += 1
        elif await same_process():
            stats.late["list_tools: some of the burst missing"] += 1
            stats.kind("list_tools after /register").wrong += 1
            stats.sample(
                stats.wrong_samples,
                f"list_tools after /register {gen} {n}: not all of its tools "
                f"(latecomer pid {pid} still runs)",
            )
        else:
            stats.late["list_tools: the latecomer restarted meanwhile"] += 1
    # The push with all of it: among those already here, or soon.
    ks = stats.kind("extension_state after /register")
    ks.sent += 1
    found: tuple[float, ap.ExtensionStatePush] | None = None
    with trio.move_on_after(LATE_PUSH_WAIT):
        while found is None:
            found = next(
                (
                    (t, f)
                    for t, f in states
                    if f.state == "ready" and has_burst(f.tools, f.commands, gen, n)
                ),
                None,
            )
            if found is None:
                await changed[0].wait()
    if found is not None:
        ks.ok += 1
        stats.late_push_waits.append(max(0.0, found[0] - answered))
        stats.late_push_counts.append(sum(1 for t, _ in states if t <= found[0]))
    elif await same_process():
        ks.lost += 1
        stats.sample(
            stats.lost_samples,
            f"extension_state with the {n} tools of /register {gen}: none within "
            f"{LATE_PUSH_WAIT:g} s ({len(states)} pushes of latecomer came; this "
            f"connection's client library has dropped {zot.dropped} push frames so far)",
        )
    else:
        ks.other["restarted"] += 1
    # And one of the new tools answers, as any soak tool.
    tool = f"{LATE_PREFIX}{rng.randrange(n)}"
    await call_tool(soak, zot, -2, rng, tool, kind="call_tool late_<i>")
