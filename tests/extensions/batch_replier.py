#!/usr/bin/env python3
"""An extension that answers a read's tool calls in one write, some of them oddly.

``batch_replier.py --name NAME``: one tool, ``echo``, answered with its
``text`` argument. It reads whatever stdin has and writes the answers to
every whole line in one write, so that the daemon reads several replies at
once. A call's ``args`` choose what else goes into that write, before its
answer:

* ``"garble": true``: instead of the answer, a ``tool_result`` with a bad
  field (``content`` a string);
* ``"unknown": true``: a frame of a type zotd does not know;
* ``"blank": true``: an empty line;
* ``"notify": true``: a ``notify`` frame.

The answer is written as UTF-8, not with ``\\u`` escapes.
"""

from __future__ import annotations

import json
import os
import sys

name = sys.argv[sys.argv.index("--name") + 1]
opening = [
    {"type": "hello", "name": name},
    {"type": "register_tool", "name": "echo", "schema": {"type": "object"}},
    {"type": "ready"},
]
os.write(1, "".join(json.dumps(f) + "\n" for f in opening).encode())
tail = b""
while chunk := os.read(0, 1 << 16):
    *lines, tail = (tail + chunk).split(b"\n")
    out: list[str] = []
    for line in lines:
        frame = json.loads(line)
        if frame["type"] == "shutdown":
            sys.exit(0)
        if frame["type"] != "tool_call":
            continue
        args = frame["args"]
        rid = frame["id"]
        if args.get("unknown"):
            out.append(json.dumps({"type": "from_the_future", "id": rid}))
        if args.get("blank"):
            out.append("")
        if args.get("notify"):
            out.append(json.dumps({"type": "notify", "level": "info", "message": f"call {rid}"}))
        if args.get("garble"):
            out.append(json.dumps({"type": "tool_result", "id": rid, "content": "not a list"}))
            continue
        text = args.get("text", "")
        content = [{"type": "text", "text": text}]
        reply = {"type": "tool_result", "id": rid, "content": content}
        out.append(json.dumps(reply, ensure_ascii=False))  # (UTF-8 as it is)
    if out:
        os.write(1, ("\n".join(out) + "\n").encode())
