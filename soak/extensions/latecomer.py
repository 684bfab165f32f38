#!/usr/bin/env python3
"""Late registrations: registers hundreds of tools and commands after `ready`.

At start it registers tool `late_echo` and says ready, as extensions do.
Then, on `/register GEN N`, it writes, all at once, N `register_tool`
frames (`late_0` .. `late_<N-1>`, each described `late <i> of GEN`) and
N // 10 `register_command` frames (`late_0` .. , described the same way),
and only then its reply: `registered N tools, C commands for GEN (pid P)`.
zotd reads its stdout in order, so by the time that reply reaches the
agent every registration has been taken: `list_tools` must show all of
them, and subscribers must get an `extension_state` with all of them
(a line `FAULT late-registration N` marks each burst).

Every `late_*` tool echoes its arguments, as every soak tool does.
"""

from __future__ import annotations

import json
import os

from extlib import fault, frames, send, start, tool_result, write

#: A small schema: a burst of 300 tools must fit one frame of 64 KiB.
SCHEMA = {"type": "object"}


def register(gen: str, count: int) -> str:
    commands = count // 10
    lines = [
        {
            "type": "register_tool",
            "name": f"late_{i}",
            "description": f"late {i} of {gen}",
            "schema": SCHEMA,
        }
        for i in range(count)
    ] + [
        {"type": "register_command", "name": f"late_{i}", "description": f"late {i} of {gen}"}
        for i in range(commands)
    ]
    fault("late-registration", str(count))
    write(b"".join(json.dumps(x, separators=(",", ":")).encode() + b"\n" for x in lines))
    return f"registered {count} tools, {commands} commands for {gen} (pid {os.getpid()})"


start("latecomer", tools=("late_echo",), commands=("register",), capabilities=("tools", "commands"))
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        send(tool_result(msg["id"], msg.get("args") or {}))
    elif kind == "command_invoked":
        gen, _, count = str(msg.get("args", "")).partition(" ")
        if msg.get("name") != "register":
            said = f"{msg.get('name')} is a late command"
        elif count.isdigit():
            said = register(gen, int(count))
        else:
            said = f"usage: /register GEN N, not {msg.get('args')!r}"
        send({"type": "command_response", "id": msg["id"], "action": "display", "display": said})
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        break
