#!/usr/bin/env python3
"""A zot extension with one of each thing ``zot mcp`` maps to the newest MCP
revision, for tests/e2e/test_mcp_bridge_current.py. Plain Python and JSON lines.

    mcp_current.py --name NAME --log FILE

Every frame it reads is appended to ``--log`` as one JSON line; it notes
what ``wait`` does there too, as ``{"noted": "started wait"}`` and
``{"noted": "cancelled wait"}`` (on a ``tool_cancel``: its ``hello`` lists
that capability).

Tools (named ``NAME-TOOL``):

- ``forecast {city}``: an ``output_schema``, a ``title`` and MCP annotations;
  answers a text and the same forecast as ``structured_content``;
- ``snapshot``: a text and a 1x1 PNG image;
- ``steps {n}``: ``n`` ``tool_progress`` frames, then its result;
- ``wait``: answers only when cancelled (with nothing: zotd has given up).

Command: ``/NAME-note`` prompts with its arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
FORECAST_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}

out_lock = threading.Lock()
cancelled: set[str] = set()

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
args = p.parse_args()
log = open(args.log, "a")  # noqa: SIM115 (open for the extension's life)


def emit(obj: dict[str, Any]) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def note(what: str) -> None:
    with out_lock:
        log.write(json.dumps({"noted": what}) + "\n")
        log.flush()


emit({"type": "hello", "name": args.name, "version": "1.0.0",
      "capabilities": ["commands", "tools", "tool_cancel"]})  # fmt: skip
emit({"type": "register_command", "name": f"{args.name}-note", "description": "Take a note"})
emit(
    {
        "type": "register_tool",
        "name": f"{args.name}-forecast",
        "description": "The weather in a city",
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "output_schema": FORECAST_SCHEMA,
        "title": "Forecast",
        "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
    }
)
for tool, description in [("snapshot", "A picture"), ("steps", "Counts"), ("wait", "Waits")]:
    emit({"type": "register_tool", "name": f"{args.name}-{tool}", "description": description,
          "schema": {"type": "object"}})  # fmt: skip
emit({"type": "ready"})


def text(id: str, value: str) -> dict[str, Any]:
    return {"type": "tool_result", "id": id, "content": [{"type": "text", "text": value}]}


def run_tool(msg: dict[str, Any]) -> None:
    id, tool, targs = msg["id"], msg["name"].removeprefix(f"{args.name}-"), msg["args"]
    if tool == "forecast":
        city = targs.get("city", "nowhere")
        emit({**text(id, f"{city}: 21.5 C"), "structured_content": {"city": city, "celsius": 21.5}})
    elif tool == "snapshot":
        emit({"type": "tool_result", "id": id, "content": [
            {"type": "text", "text": "a snapshot"},
            {"type": "image", "mime_type": "image/png", "data": PNG},
        ]})  # fmt: skip
    elif tool == "steps":
        n = int(targs.get("n", 3))
        for i in range(n):
            emit({"type": "tool_progress", "id": id, "message": f"step {i + 1}",
                  "progress": i + 1, "total": n})  # fmt: skip
        emit(text(id, f"{n} steps"))
    elif tool == "wait":
        note(f"started {tool}")
        while id not in cancelled:
            time.sleep(0.01)
        note(f"cancelled {tool}")


for line in sys.stdin:
    with out_lock:
        log.write(line if line.endswith("\n") else line + "\n")
        log.flush()
    msg = json.loads(line)
    kind = msg.get("type")
    if kind == "tool_call":
        threading.Thread(target=run_tool, args=(msg,), daemon=True).start()
    elif kind == "tool_cancel":
        cancelled.add(msg["id"])
    elif kind == "command_invoked":
        emit({"type": "command_response", "id": msg["id"], "action": "prompt",
              "prompt": f"note: {msg['args']}"})  # fmt: skip
    elif kind == "shutdown":
        emit({"type": "shutdown_ack"})
        break
