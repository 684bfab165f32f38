#!/usr/bin/env python3
"""An extension with an "ask the user" interactive tool, and current zot's
one-way frames, for compatibility tests. Plain Python and JSON lines.

    interactive.py --name NAME --log FILE [--no-tool-cancel] [--guard]

Every frame it reads is appended to ``--log`` as one JSON line, so a test
can see what it was sent (and in which order). Its ``hello`` lists
``tool_cancel`` (as current zot's SDK does) unless ``--no-tool-cancel``.

- ``NAME-ask {question}`` (``interactive: true``): opens the panel
  ``ask-<id>`` with a spontaneous ``open_panel`` frame and answers only when
  a ``panel_key`` comes for it (``the user said: <text or key>``), then closes
  the panel; a ``panel_close`` for it answers with an error. ``tool_cancel``
  (or ``cancel``) for the call closes the panel and answers nothing.
- ``NAME-hang {}``: never answers.
- ``NAME-emit {frames: [...]}``: writes each frame as it is, then answers
  ``emitted N``: one-way frames sent while serving a tool call.
- ``/NAME-emit [frames]`` (a JSON array as the arguments): the same from a
  command, which serves no tool call; answers ``noop``.
- ``/NAME-wait``: never answers.
- ``--guard``: intercepts ``tool_call`` and never answers.
- ``shutdown``: exits at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--no-tool-cancel", action="store_true")
p.add_argument("--guard", action="store_true")
args = p.parse_args()
name: str = args.name


def emit(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def result(rid: str, text: str, *, is_error: bool = False) -> None:
    emit(
        {
            "type": "tool_result",
            "id": rid,
            "content": [{"type": "text", "text": text}],
            "is_error": is_error,
        }
    )


capabilities = ["tools", "commands", "panels", "events"]
if not args.no_tool_cancel:
    capabilities.append("tool_cancel")
emit({"type": "hello", "name": name, "version": "1.0.0", "capabilities": capabilities})
emit(
    {
        "type": "register_tool",
        "name": f"{name}-ask",
        "description": "asks the user a question",
        "schema": {"type": "object", "properties": {"question": {"type": "string"}}},
        "interactive": True,
    }
)
emit({"type": "register_tool", "name": f"{name}-hang", "description": "never answers"})
emit({"type": "register_tool", "name": f"{name}-emit", "description": "writes frames"})
emit({"type": "register_command", "name": f"{name}-emit", "description": "writes frames"})
emit({"type": "register_command", "name": f"{name}-wait", "description": "never answers"})
if args.guard:
    emit({"type": "subscribe", "events": [], "intercept": ["tool_call"]})
emit({"type": "ready"})

#: Open questions: panel id -> the tool call waiting for its answer.
asking: dict[str, str] = {}

with open(args.log, "a", encoding="utf-8") as log:
    for line in sys.stdin:
        log.write(line if line.endswith("\n") else line + "\n")
        log.flush()
        frame = json.loads(line)
        kind = frame.get("type")
        if kind == "shutdown":
            break
        if kind == "tool_call":
            rid, tool, call_args = frame["id"], frame["name"], frame.get("args") or {}
            if tool == f"{name}-ask":
                panel_id = f"ask-{rid}"
                asking[panel_id] = rid
                panel = {
                    "id": panel_id,
                    "title": "Question",
                    "lines": [str(call_args.get("question", ""))],
                    "footer": "type your answer",
                }
                emit({"type": "open_panel", "panel": panel})
            elif tool == f"{name}-emit":
                for out in call_args.get("frames", []):
                    emit(out)
                result(rid, f"emitted {len(call_args.get('frames', []))}")
            # `hang`: never answers
        elif kind == "command_invoked":
            if frame["name"] == f"{name}-emit":
                for out in json.loads(frame.get("args") or "[]"):
                    emit(out)
                emit({"type": "command_response", "id": frame["id"], "action": "noop"})
            # `wait`: never answers
        elif kind == "panel_key":
            panel_id = frame["panel_id"]
            rid = asking.pop(panel_id, "")
            if rid:
                result(rid, f"the user said: {frame.get('text') or frame['key']}")
                emit({"type": "panel_close", "panel_id": panel_id})
        elif kind in ("tool_cancel", "cancel"):
            for panel_id, rid in list(asking.items()):
                if rid == frame["id"]:
                    del asking[panel_id]
                    emit({"type": "panel_close", "panel_id": panel_id})
        elif kind == "panel_close":
            rid = asking.pop(frame["panel_id"], "")
            if rid:  # the user closed it unanswered
                result(rid, "the user closed the question", is_error=True)
