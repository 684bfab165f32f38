"""An extension that counts its starts: each start appends its pid to the
file named by ``ZOT_TEST_PIDS`` (one line each). One tool, ``whoami``,
answered with ``pid N``; it exits on ``shutdown`` or at the end of stdin.

``python counted.py NAME`` (its manifest's ``env`` sets ``ZOT_TEST_PIDS``).
"""

import json
import os
import sys

name = sys.argv[1]
with open(os.environ["ZOT_TEST_PIDS"], "a") as pids:
    pids.write(f"{os.getpid()}\n")


def send(frame: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


send({"type": "hello", "name": name})
send(
    {
        "type": "register_tool",
        "name": "whoami",
        "description": "its pid",
        "schema": {"type": "object"},
    }
)
send({"type": "ready"})
for line in sys.stdin:
    frame = json.loads(line)
    if frame["type"] == "tool_call":
        text = [{"type": "text", "text": f"pid {os.getpid()}"}]
        send({"type": "tool_result", "id": frame["id"], "content": text})
    elif frame["type"] == "shutdown":
        break
