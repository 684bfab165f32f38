#!/usr/bin/env python3
"""A test extension that stops reading its stdin: after ``hello``, its tool
``echo`` and ``ready``, it reads nothing while the file named by ``--hold``
exists. Then it reads every frame, appends a line per frame to ``--log``
(``{"type", "id", "n"}``, ``n`` being a tool call's ``args.n``), and answers
each ``echo`` call with ``n``.

    stuck_stdin.py --name NAME --log FILE --hold FILE
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--hold", required=True)
args = p.parse_args()


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


emit({"type": "hello", "name": args.name, "version": "0.0.1"})
emit({"type": "register_tool", "name": "echo", "description": "echo", "schema": {"type": "object"}})
emit({"type": "ready"})
with open(args.log, "a") as log:
    log.write(json.dumps({"type": "started", "pid": os.getpid()}) + "\n")
while os.path.exists(args.hold):  # stdin is not read meanwhile
    time.sleep(0.01)
for line in sys.stdin:
    msg = json.loads(line)
    n = (msg.get("args") or {}).get("n") if msg.get("type") == "tool_call" else None
    with open(args.log, "a") as log:
        log.write(json.dumps({"type": msg.get("type"), "id": msg.get("id"), "n": n}) + "\n")
    if msg.get("type") == "tool_call":
        emit(
            {"type": "tool_result", "id": msg["id"], "content": [{"type": "text", "text": str(n)}]}
        )
    elif msg.get("type") == "shutdown":
        break
