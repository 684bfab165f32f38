#!/usr/bin/env python3
"""A tool-call guard that reads its stdin the way zot's SDKs do: a line
longer than ``--max-line`` bytes is dropped unread (and the question in it
goes unanswered, so it counts as silent).

    strict_guard.py --name NAME --log FILE --max-line BYTES
                    [--block-if TEXT] [--pad N] [--pattern-bait N]

- ``--block-if TEXT`` blocks every tool call whose frame contains TEXT
  (``""``: every one; reason: ``blocked by NAME``);
- ``--pad N`` rewrites every tool call's arguments into ``{"pad": "x" * N}``;
- ``--pattern-bait N`` rewrites them into ``{"x": "a" * N + "!"}``, which makes
  a ``^(a+)+$`` pattern backtrack for ages.

Each question it reads is appended to ``--log`` as ``{"asked": id}``, each
line it drops as ``{"dropped": size}``, one JSON line each.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--max-line", type=int, required=True)
p.add_argument("--block-if", default=None)
p.add_argument("--pad", type=int, default=None)
p.add_argument("--pattern-bait", type=int, default=None)
args = p.parse_args()


def emit(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def note(entry: dict[str, Any]) -> None:
    with open(args.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


emit({"type": "hello", "name": args.name, "version": "0.0.1", "capabilities": []})
emit({"type": "subscribe", "events": [], "intercept": ["tool_call"]})
emit({"type": "ready"})

for raw in sys.stdin.buffer:
    line = raw.rstrip(b"\n")
    if len(line) > args.max_line:
        note({"dropped": len(line)})
        continue
    frame = json.loads(line)
    if frame.get("type") == "shutdown":
        break
    if frame.get("type") != "event_intercept":
        continue
    note({"asked": frame["id"]})
    reply: dict[str, Any] = {"type": "event_intercept_response", "id": frame["id"]}
    if args.block_if is not None and args.block_if.encode() in line:
        reply.update(block=True, reason=f"blocked by {args.name}")
    elif args.pad is not None:
        reply["modified_args"] = {"pad": "x" * args.pad}
    elif args.pattern_bait is not None:
        reply["modified_args"] = {"x": "a" * args.pattern_bait + "!"}
    emit(reply)
