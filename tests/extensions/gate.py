#!/usr/bin/env python3
"""A test extension that can be held at the gate: at its start, while the file
named by ``--hold`` exists, it waits before saying ``hello`` (so it stays
``starting`` for as long as a test needs). Then it registers its tools and
answers every call with its arguments.

    gate.py --name NAME [--tools a,b] [--hold FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--tools", default="")
p.add_argument("--hold")
args = p.parse_args()

while args.hold and os.path.exists(args.hold):
    time.sleep(0.01)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


emit({"type": "hello", "name": args.name, "version": "0.0.1"})
for tool in filter(None, args.tools.split(",")):
    emit({"type": "register_tool", "name": tool, "description": tool, "schema": {"type": "object"}})
emit({"type": "ready"})
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "tool_call":
        text = json.dumps(msg.get("args") or {}, sort_keys=True)
        emit({"type": "tool_result", "id": msg["id"], "content": [{"type": "text", "text": text}]})
    elif msg.get("type") == "shutdown":
        break
