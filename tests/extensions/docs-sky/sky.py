"""An extension that registers a tool ``forecast``, as the weather extension
of docs/cli.md does: the name is the first one's, and this one's is hidden
(tests/test_cli_docs.py copies it to ~/src/sky)."""

import json
import sys


def emit(frame: dict) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


emit({"type": "hello", "name": "sky", "version": "0.2.0", "capabilities": ["tools"]})
emit(
    {
        "type": "register_tool",
        "name": "forecast",
        "description": "Seven days of weather.",
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
)
emit({"type": "ready"})
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "tool_call":
        content = [{"type": "text", "text": "sunny all week"}]
        emit({"type": "tool_result", "id": msg["id"], "content": content})
    elif msg["type"] == "shutdown":
        emit({"type": "shutdown_ack"})
        break
