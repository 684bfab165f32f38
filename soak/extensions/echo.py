#!/usr/bin/env python3
"""The well-behaved one: tool `echo` returns its arguments; `/say ARGS` displays them.

It answers every call at once, in order, and exits on `shutdown`.
"""

from __future__ import annotations

from extlib import frames, send, start, tool_result

start("echo", tools=("echo",), commands=("say",), events=("turn_start", "turn_end"))
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        send(tool_result(msg["id"], msg.get("args") or {}))
    elif kind == "command_invoked":
        said = f"said {msg.get('args', '')}"
        send({"type": "command_response", "id": msg["id"], "action": "display", "display": said})
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        break
