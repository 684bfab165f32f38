#!/usr/bin/env python3
"""An extension that registers thousands of tools after ``ready``, as an
extension in the wild might (one ``register_tool`` line at a time, each
flushed).

    late_tools.py --name NAME

``/burst N`` (answered at once) registers the tools ``t0`` ... ``t{N/2-1}``,
then waits for ``/resume``, then registers the rest up to ``t{N-1}``. So a
test knows that the daemon is answering others while a burst is under way.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

out_lock = threading.Lock()
resumed = threading.Event()


def emit(obj: dict) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def register(start: int, stop: int) -> None:
    for i in range(start, stop):
        emit(
            {
                "type": "register_tool",
                "name": f"t{i}",
                "description": "",
                "schema": {"type": "object"},
            }
        )


def burst(count: int) -> None:
    register(0, count // 2)
    resumed.wait()
    register(count // 2, count)


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
args = p.parse_args()

emit({"type": "hello", "name": args.name, "version": "0.0.1"})
emit({"type": "register_command", "name": "burst"})
emit({"type": "register_command", "name": "resume"})
emit({"type": "ready"})

for line in sys.stdin:
    msg = json.loads(line)
    kind = msg.get("type")
    if kind == "command_invoked":
        emit({"type": "command_response", "id": msg["id"], "action": "noop"})
        if msg["name"] == "burst":
            threading.Thread(target=burst, args=(int(msg["args"]),), daemon=True).start()
        elif msg["name"] == "resume":
            resumed.set()
    elif kind == "shutdown":
        emit({"type": "shutdown_ack"})
        break
