#!/usr/bin/env python3
"""Hangs: never answers some calls, answers others after their deadline.

Tool `hang_echo` echoes its arguments after a short random delay, except
that some calls are never answered and some are answered too late
(`--late S` seconds, past the daemon's tool deadline). Half of its
processes are also stubborn: they ignore SIGTERM and `shutdown`, and keep
running after end of file on stdin, so only SIGKILL stops them.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from typing import Any

from extlib import fault, frames, rng, send, start, tool_result

parser = argparse.ArgumentParser()
parser.add_argument("--late", type=float, default=3.0, help="delay of a late answer, seconds")
parser.add_argument("--hang", type=float, default=0.25, help="chance a call is never answered")
parser.add_argument("--late-chance", type=float, default=0.1)
opts = parser.parse_args()

stubborn = rng.random() < 0.5
if stubborn:
    fault("stubborn", "ignores SIGTERM and shutdown")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def answer_after(delay: float, reply: dict[str, Any]) -> None:
    time.sleep(delay)
    send(reply)


start("hanger", tools=("hang_echo",))
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        draw = rng.random()
        if draw < opts.hang:
            fault("hang", str(msg["id"]))
            continue
        if draw < opts.hang + opts.late_chance:
            fault("late", str(msg["id"]))
            delay = opts.late
        else:
            delay = rng.uniform(0, 0.2)
        reply = tool_result(msg["id"], msg.get("args") or {})
        threading.Thread(target=answer_after, args=(delay, reply), daemon=True).start()
    elif kind == "shutdown":
        if stubborn:
            fault("ignored-shutdown")
            continue
        send({"type": "shutdown_ack"})
        break
while stubborn:
    time.sleep(3600)
