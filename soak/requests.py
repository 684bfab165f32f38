"""The plain requests clients make, each checked against what it sent: tool
calls (their echo and their progress pushes, given up or not), ``/say``,
``emit_event``, ``list_tools``, ``list_extensions`` and ``ping``.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import trio

from soak.plan import PATIENCE, STUCK_PAD, SUBSCRIBERS, owner_of
from soak.state import Ended, Soak, check_extensions, describe
from zotd.client import Client
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep


async def call_tool(
    soak: Soak,
    zot: Client,
    cid: int,
    rng: random.Random,
    tool: str,
    *,
    give_up: bool = False,
    pad: int | None = None,
    kind: str = "",
    wait: float = 0.0,
) -> str:
    """Calls ``tool`` with a nonce; with ``give_up``, abandons the call (a
    cancel scope around it, which makes the client send ``cancel``) if it
    has not ended within a fraction of a second. ``pad`` chooses the
    padding's length, ``kind`` the row of the table, ``wait`` is added to
    the bound (a client that does not read for a while). Returns the outcome.

    A call to ``stuck_echo`` carries ``sent`` (the wall clock) and its
    ``timeout``: the stuck extension notes a call it reads after that; the
    moment its ``timeout`` reply came is kept (``stats.stuck_timeouts``)."""
    nonce = soak.nonce(cid)
    if pad is None:
        pad = rng.choice([0, 0, 0, 16, 512, 4096])
    timeout_s = rng.choice([None, None, None, 0.5, 1.0])
    args: dict[str, Any] = {"nonce": nonce, "client": cid, "pad": "x" * pad}
    if tool == "progress_echo":
        args["steps"] = rng.randint(1, 4)
    if tool == "stuck_echo":
        args["pad"] = args["pad"][:STUCK_PAD]
        args["sent"] = time.time()
        args["timeout"] = timeout_s or soak.config.tool_timeout
    steps = args.get("steps", 0)
    owner = owner_of(tool)
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

    _, outcome = await soak.ask(
        kind or f"call_tool {tool}" + (", given up" if give_up else ""),
        impatient_call if give_up else call,
        check,
        2 * (timeout_s or soak.config.tool_timeout) + wait,
    )
    if outcome == "ok" and steps:
        soak.stats.progress[f"{tool}: answered after all of its progress"] += 1
    if tool == "stuck_echo" and outcome == "timeout":
        soak.stats.stuck_timeouts[nonce] = time.time()
    check_progress(soak, tool, nonce, steps, progress)
    return outcome


def check_progress(
    soak: Soak, tool: str, nonce: str, steps: int, progress: list[ap.ToolProgressPush]
) -> None:
    """Each progress push of a call, whatever its outcome, is the call's own:
    ``<nonce> <i>/<steps>``, in order, from the tool's owner."""
    soak.stats.progress["tool_progress pushes received (on_progress)"] += len(progress)
    for i, p in enumerate(progress, 1):
        want = (owner_of(tool), tool, f"{nonce} {i}/{steps}", i, steps)
        got = (p.extension, p.tool, p.message, p.progress, p.total)
        if got != want:
            soak.stats.bad_pushes += 1
            soak.stats.sample(
                soak.stats.wrong_samples,
                f"tool_progress of call_tool {tool} {nonce}: got {got!r:.150}, want {want!r}",
            )


async def invoke(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    nonce = soak.nonce(cid)

    def check(r: ap.InvokeData) -> str | None:
        if (r.extension, r.action, r.display, r.error) != (
            "echo",
            "display",
            f"said {nonce}",
            "",
        ):
            return f"/say {nonce} got {r!r:.200}"
        return None

    await soak.ask(
        "invoke_command /say",
        lambda: zot.invoke_command("say", nonce),
        check,
        2 * soak.config.command_timeout,
    )


async def emit(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    event = rng.choice(sorted(SUBSCRIBERS))
    nonce = soak.nonce(cid)

    def check(delivered: list[str]) -> str | None:
        if len(set(delivered)) != len(delivered) or not set(delivered) <= SUBSCRIBERS[event]:
            return f"{event} delivered to {delivered}"
        return None

    await soak.ask(
        "emit_event",
        lambda: zot.emit_event(event, step=cid, nonce=nonce),
        check,
        soak.quick_bound,
    )


async def list_tools(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    def check(tools: list[ap.ToolInfo]) -> str | None:
        names = [t.name for t in tools]
        if len(set(names)) != len(names) or any(owner_of(t.name) != t.extension for t in tools):
            return f"tools {[(t.name, t.extension) for t in tools]}"
        return None

    await soak.ask("list_tools", zot.list_tools, check, soak.quick_bound)


async def list_extensions(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    await soak.ask("list_extensions", zot.list_extensions, check_extensions, soak.quick_bound)


async def ping(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    await soak.ask(
        "ping", zot.ping, lambda pong: None if pong is True else "no pong", soak.quick_bound
    )
