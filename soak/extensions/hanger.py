#!/usr/bin/env python3
"""Hangs: never answers some calls, answers others after their deadline.

Tool `hang_echo` echoes its arguments after a short random delay, except
that some calls are never answered and some are answered too late
(`--late S` seconds, past the daemon's tool deadline). Half of its
processes are also stubborn: they ignore SIGTERM and `shutdown`, and keep
running after end of file on stdin, so only SIGKILL stops them.

When zotd sends `cancel` for a call it is still working on, it drops that
work (a line `DROPPED <id>` in its log), as a well-written tool does; a late
answer is sent whatever happens (zotd drops it).
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from typing import Any

from extlib import fault, frames, note, rng, send, start, tool_result

parser = argparse.ArgumentParser()
parser.add_argument("--late", type=float, default=3.0, help="delay of a late answer, seconds")
parser.add_argument("--hang", type=float, default=0.25, help="chance a call is never answered")
parser.add_argument("--late-chance", type=float, default=0.1)
opts = parser.parse_args()

stubborn = rng.random() < 0.5
if stubborn:
    fault("stubborn", "ignores SIGTERM and shutdown")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


cancelled: set[str] = set()
lock = threading.Lock()


def answer_after(delay: float, reply: dict[str, Any], late: bool) -> None:
    time.sleep(delay)
    rid = str(reply["id"])
    with lock:
        dropped = rid in cancelled and not late
        cancelled.discard(rid)
    if dropped:
        note(f"DROPPED {rid}")
        return
    send(reply)


start("hanger", tools=("hang_echo",))
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        draw = rng.random()
        if draw < opts.hang:
            fault("hang", str(msg["id"]))
            continue
        late = draw < opts.hang + opts.late_chance
        if late:
            fault("late", str(msg["id"]))
            delay = opts.late
        else:
            delay = rng.uniform(0, 0.2)
        reply = tool_result(msg["id"], msg.get("args") or {})
        threading.Thread(target=answer_after, args=(delay, reply, late), daemon=True).start()
    elif kind == "cancel":
        with lock:
            cancelled.add(str(msg.get("id")))
    elif kind == "shutdown":
        if stubborn:
            fault("ignored-shutdown")
            continue
        send({"type": "shutdown_ack"})
        break
while stubborn:
    time.sleep(3600)
