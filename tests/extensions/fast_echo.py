"""A fast extension for backpressure tests: one tool, ``echo``, answered in batches.

``python fast_echo.py NAME``. It reads whatever stdin has and answers every
whole line in one write, so it keeps up with a flood that would make a
line-at-a-time extension the bottleneck.
"""

import json
import os
import sys

name = sys.argv[1]
opening = [
    {"type": "hello", "name": name},
    {"type": "register_tool", "name": "echo", "schema": {"type": "object"}},
    {"type": "ready"},
]
os.write(1, "".join(json.dumps(f) + "\n" for f in opening).encode())
tail = b""
while chunk := os.read(0, 1 << 16):
    *lines, tail = (tail + chunk).split(b"\n")
    out = []
    for line in lines:
        frame = json.loads(line)
        if frame["type"] == "tool_call":
            content = [{"type": "text", "text": "ok"}]
            out.append(json.dumps({"type": "tool_result", "id": frame["id"], "content": content}))
        elif frame["type"] == "shutdown":
            sys.exit(0)
    if out:
        os.write(1, ("\n".join(out) + "\n").encode())
