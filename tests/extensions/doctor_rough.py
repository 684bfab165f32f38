#!/usr/bin/env python3
"""An extension that works, roughly: its tools have problems zot ext doctor
reports (an unknown exposure, a schema that is not an object, one that is
not valid JSON Schema), it subscribes to an event zot does not send, asks to
intercept one that cannot be, writes a line that is not a frame, sends
``hello`` twice, never sends ``ready``, and needs SIGTERM to stop.

    doctor_rough.py --name NAME
"""

import json
import os
import signal
import sys
import time


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


name = sys.argv[sys.argv.index("--name") + 1]
print(f"doctor_rough: pid {os.getpid()}", file=sys.stderr, flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
emit({"type": "hello", "name": name})
emit({"type": "hello", "name": name})
print("debug: registering tools", flush=True)
emit(
    {
        "type": "register_tool",
        "name": "hidden_tool",
        "schema": {"type": "object"},
        "exposure": "sometimes",
    }
)
emit({"type": "register_tool", "name": "listy", "schema": [1, 2]})
emit({"type": "register_tool", "name": "odd_schema", "schema": {"type": "objekt"}})
emit({"type": "register_command", "name": "rough"})
emit({"type": "subscribe", "events": ["turn_begin"], "intercept": ["session_start"]})
for line in sys.stdin:
    if json.loads(line).get("type") == "shutdown":
        break
while True:  # still running after `shutdown`: only a signal ends it
    time.sleep(3600)
