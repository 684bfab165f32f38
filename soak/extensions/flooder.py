#!/usr/bin/env python3
"""Floods: writes `notify` frames as fast as it can, in bursts.

A thread alternates bursts (`--burst MIN,MAX` seconds of writing notify
frames with no pause, in batches of 64 per write) with pauses (`--pause
MIN,MAX`). Tool `flood_echo` echoes its arguments; its replies queue behind
the flood on the same pipe.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

from extlib import fault, frames, rng, send, start, tool_result, write

parser = argparse.ArgumentParser()
parser.add_argument("--burst", default="0.3,1.0", help="burst length range, seconds")
parser.add_argument("--pause", default="1.0,2.5", help="pause length range, seconds")
opts = parser.parse_args()
LEVELS = ["info", "success", "warn", "error", "shout"]  # the last is not a known level


def span(text: str) -> float:
    low, high = (float(x) for x in text.split(","))
    return rng.uniform(low, high)


def flood() -> None:
    burst_no = 0
    while True:
        time.sleep(span(opts.pause))
        burst_no += 1
        end = time.monotonic() + span(opts.burst)
        sent = 0
        while time.monotonic() < end:
            batch = [
                json.dumps(
                    {
                        "type": "notify",
                        "level": LEVELS[(sent + i) % len(LEVELS)],
                        "message": f"flood {os.getpid()}/{burst_no}/{sent + i}",
                    }
                )
                for i in range(64)
            ]
            write(("\n".join(batch) + "\n").encode())
            sent += len(batch)
        fault("flood", f"frames={sent}")


start("flooder", tools=("flood_echo",), events=("turn_start",))
threading.Thread(target=flood, daemon=True).start()
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        send(tool_result(msg["id"], msg.get("args") or {}))
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        break
