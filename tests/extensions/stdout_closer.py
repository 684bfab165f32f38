"""An extension that closes its stdout and stays alive.

``python stdout_closer.py --name NAME``: registers the tool ``close`` and is
ready; on a call of it, it closes its stdout (``os.close(1)``) and sleeps
forever, reading nothing more (``shutdown`` included: SIGTERM ends it).
"""

import json
import os
import sys
import time

name = sys.argv[sys.argv.index("--name") + 1]
opening = [
    {"type": "hello", "name": name},
    {"type": "register_tool", "name": "close", "schema": {"type": "object"}},
    {"type": "ready"},
]
os.write(1, "".join(json.dumps(f) + "\n" for f in opening).encode())
for line in sys.stdin:
    frame = json.loads(line)
    if frame["type"] == "tool_call":
        os.close(1)
        while True:
            time.sleep(3600)
    elif frame["type"] == "shutdown":
        sys.exit(0)
