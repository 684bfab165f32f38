#!/usr/bin/env python3
"""A guard: blocks tool calls whose `command` contains `rm -rf`, naming the call.

Its `reason` carries the call's `tool_id`, so a verdict delivered to the
wrong intercept is detectable; when the arguments it was asked about had
been rewritten by the `rewriter` (which runs first), the reason says so
with the `rewritten` value it saw (`guard blocked ID after rewrite X`).
Some of its answers are faulty on purpose: never sent (the decision waits
for `intercept_timeout`, then allows), malformed (counts as allow), or
slow.
"""

from __future__ import annotations

import time
from typing import Any

from extlib import fault, rng, send, serve, start


def judge(msg: dict[str, Any]) -> None:
    rid, tool_id = msg["id"], msg.get("tool_id")
    args = msg.get("tool_args") if isinstance(msg.get("tool_args"), dict) else {}
    draw = rng.random()
    if draw < 0.08:
        fault("guard", "silent")
        return
    if draw < 0.13:
        fault("guard", "malformed")
        send({"type": "event_intercept_response", "id": rid, "block": "maybe"})
        return
    if draw < 0.23:
        fault("guard", "slow")
        time.sleep(rng.uniform(0.1, 0.5))
    block = "rm -rf" in str(args.get("command", ""))
    reply: dict[str, Any] = {"type": "event_intercept_response", "id": rid, "block": block}
    if block:
        reply["reason"] = f"guard blocked {tool_id}"
        if "rewritten" in args:
            reply["reason"] += f" after rewrite {args['rewritten']}"
    send(reply)


start("guard", events=("tool_call",), intercept=("tool_call",))
serve("event_intercept", judge)
