#!/usr/bin/env python3
"""An extension whose every piece of text carries terminal control sequences:
ESC (clear screen, an OSC 52 clipboard write), BEL, backspace, a CR that
overwrites, C1 controls and bidi overrides. The CLI must show them as escapes.

    hostile_text.py --name NAME

Commands ``boom`` (a notify, then a display), ``board`` (a panel), ``say``
(a prompt), ``oops`` (an error); tool ``zap``; a line on stderr at start.
"""

from __future__ import annotations

import argparse
import json
import sys

#: The payload every text carries (tests/e2e/test_terminal_escapes.py has the same).
EVIL = (
    "\x1b[2J\x1b]52;c;SGVsbG8=\x07 bell\x07 back\x08 cr\rOVER"
    " c1\x9b31m\x85 bidi\u202egnp.exe\u2066x\u2069\u202a end"
)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    args = p.parse_args()

    print(f"stderr says {EVIL}", file=sys.stderr, flush=True)
    emit(
        {
            "type": "hello",
            "name": args.name,
            "version": "1.0.0",
            "capabilities": ["commands", "tools"],
        }
    )
    for name in ("boom", "board", "say", "oops"):
        emit({"type": "register_command", "name": name, "description": f"{name} {EVIL}"})
    emit(
        {
            "type": "register_tool",
            "name": "zap",
            "description": f"zap {EVIL}",
            "schema": {"type": "object", "properties": {}},
        }
    )
    emit({"type": "ready"})

    for line in sys.stdin:
        msg = json.loads(line)
        kind, rid = msg.get("type"), msg.get("id")
        if kind == "command_invoked":
            name = msg["name"]
            reply: dict = {"type": "command_response", "id": rid, "action": "noop"}
            if name == "boom":
                emit({"type": "notify", "level": "warn", "message": f"note {EVIL}"})
                reply.update(action="display", display=f"first line {EVIL}\nsecond\tline {EVIL}")
            elif name == "board":
                panel = {"id": "p1", "title": f"title {EVIL}", "lines": [f"row {EVIL}"]}
                reply["open_panel"] = {**panel, "footer": f"footer {EVIL}"}
            elif name == "say":
                reply.update(action="prompt", prompt=f"prompt {EVIL}")
            else:
                reply["error"] = f"error {EVIL}"
            emit(reply)
        elif kind == "tool_call":
            content = [{"type": "text", "text": f"tool said {EVIL}"}]
            emit({"type": "tool_result", "id": rid, "content": content})
        elif kind == "shutdown":
            emit({"type": "shutdown_ack"})
            break


if __name__ == "__main__":
    main()
