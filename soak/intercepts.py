"""The intercept requests clients make, and the verdicts they must get from
the two guards (the rewriter first, then the guard): ``tool_call`` (blocked,
rewritten, refused as not an object or a misfit for the tool's schema),
``turn_start`` (steps that are multiples of 3 blocked) and
``assistant_message`` (``hunter2`` redacted).
"""

from __future__ import annotations

import random
from typing import Any

from soak.plan import MISFIT, NOT_AN_OBJECT, UNCHECKED
from soak.state import Soak, describe
from zotd.client import Client
from zotd.protocol import agent as ap


async def intercept(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    """A ``tool_call`` for both guards: the rewriter (first) adds
    ``rewritten: <tool_id>`` when asked to (and breaks ``nonce`` when asked
    to: zotd must refuse that for a tool with a schema, ``echo``), the
    guard blocks ``rm -rf``."""
    nonce = soak.nonce(cid)
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
    verdicts = soak.stats.intercepts

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
            elif rewrite and tool == "echo" and r.reason.startswith(UNCHECKED):
                # zotd fails closed when the schema check cannot finish in time.
                verdicts["tool_call, rewrite asked: blocked: its check did not finish"] += 1
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

    await soak.ask(
        "intercept tool_call",
        lambda: zot.intercept(tool, tool_args, tool_id=nonce),
        check,
        2 * soak.config.intercept_timeout,
    )


async def intercept_turn(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    """A ``turn_start``: the rewriter blocks steps that are multiples of 3."""
    nonce = soak.nonce(cid)
    step = rng.randint(1, 30)
    blocks = step % 3 == 0
    verdicts = soak.stats.intercepts

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

    await soak.ask(
        "intercept turn_start",
        lambda: zot.intercept_event("turn_start", step=step, nonce=nonce),
        check,
        2 * soak.config.intercept_timeout,
    )


async def intercept_message(soak: Soak, zot: Client, cid: int, rng: random.Random) -> None:
    """An ``assistant_message``: the rewriter redacts ``hunter2``, naming the nonce."""
    nonce = soak.nonce(cid)
    secret = rng.random() < 0.5
    text = f"reply {nonce}: " + ("the password is hunter2" if secret else "nothing to hide")
    replaced = text.replace("hunter2", f"[redacted {nonce}]")
    verdicts = soak.stats.intercepts

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

    await soak.ask(
        "intercept assistant_message",
        lambda: zot.intercept_event("assistant_message", text=text, nonce=nonce),
        check,
        2 * soak.config.intercept_timeout,
    )
