#!/usr/bin/env python3
"""A real extension process for tests, configured by its argv.

Plain Python and JSON lines, like an extension in the wild. Each tool call and
command is handled in its own thread, so a slow one does not block others.

    fake.py --name NAME [--commands a,b] [--tools echo,slow] [--no-ready]
            [--events e1,e2] [--intercept tool_call] [--events-log FILE]
            [--ignore-shutdown] [--garbage] [--first-frame register]
            [--exit-after-ready CODE] [--notify MSG]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import sys
import threading
import time

out_lock = threading.Lock()


def emit(obj: dict) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def raw(line: str) -> None:
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def split(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--commands", type=split, default=[])
p.add_argument("--tools", type=split, default=[])
p.add_argument("--no-ready", action="store_true")
p.add_argument("--events", type=split, default=[])
p.add_argument("--intercept", type=split, default=[])
p.add_argument("--events-log")
p.add_argument("--ignore-shutdown", action="store_true")
p.add_argument("--garbage", action="store_true")
p.add_argument("--first-frame", default="hello")
p.add_argument("--exit-after-ready", type=int)
p.add_argument("--notify")
p.add_argument("--no-read", action="store_true")
p.add_argument(
    "--flood",
    help="KIND:N: the command NAME-flood writes N notify (or garbage) lines at once, then "
    "registers the command NAME-flooded (so a test knows when zotd has read every one)",
)
args = p.parse_args()
if args.flood:
    args.commands.append(f"{args.name}-flood")

if args.ignore_shutdown:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

print(f"fake {args.name} starting, pid {os.getpid()}", file=sys.stderr, flush=True)

if args.first_frame == "register":
    emit({"type": "register_command", "name": "early"})
emit(
    {"type": "hello", "name": args.name, "version": "0.0.1", "capabilities": ["commands", "tools"]}
)
if args.garbage:
    raw("this is not json")
    raw("[1, 2, 3]")
    raw(json.dumps({"type": "from_the_future", "x": 1}))
    raw(json.dumps({"type": "notify", "level": 3}))
    raw("x" * 70000)
for name in args.commands:
    emit({"type": "register_command", "name": name, "description": f"the {name} command"})
for name in args.tools:
    emit(
        {
            "type": "register_tool",
            "name": name,
            "description": f"the {name} tool",
            "schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
    )
if args.events or args.intercept:
    emit({"type": "subscribe", "events": args.events, "intercept": args.intercept})
if not args.no_ready:
    emit({"type": "ready"})
if args.notify:
    emit({"type": "notify", "level": "info", "message": args.notify})
if args.flood:
    # Not `kind`: the read loop below reuses that name at module level.
    flood_kind, flood_count = args.flood.split(":")

    def flood() -> None:
        line = (
            json.dumps({"type": "notify", "level": "info", "message": "flood"})
            if flood_kind == "notify"
            else "not json at all, just noise"
        )
        block = "\n".join([line] * 1000) + "\n"
        for _ in range(int(flood_count) // 1000):
            with out_lock:
                sys.stdout.write(block)
                sys.stdout.flush()
        emit({"type": "register_command", "name": f"{args.name}-flooded"})


if args.exit_after_ready is not None:
    time.sleep(0.2)
    sys.exit(args.exit_after_ready)
if args.no_read:
    while True:
        time.sleep(3600)


def tool(msg: dict) -> None:
    name, a, rid = msg["name"], msg.get("args") or {}, msg["id"]
    if name == "slow":
        time.sleep(float(a.get("seconds", 30)))
        emit({"type": "tool_result", "id": rid, "content": [{"type": "text", "text": "slept"}]})
    elif name == "crash":
        os._exit(3)
    elif name == "image":
        data = base64.b64encode(b"\x89PNG fake").decode()
        emit(
            {
                "type": "tool_result",
                "id": rid,
                "content": [
                    {"type": "text", "text": "a picture"},
                    {"type": "image", "mime_type": "image/png", "data": data},
                ],
            }
        )
    elif name == "fail":
        emit(
            {
                "type": "tool_result",
                "id": rid,
                "is_error": True,
                "content": [{"type": "text", "text": "no luck"}],
            }
        )
    elif name == "bad":
        emit({"type": "tool_result", "id": rid, "content": "not a list"})
    elif name == "environ":
        text = json.dumps(dict(os.environ), sort_keys=True)
        emit({"type": "tool_result", "id": rid, "content": [{"type": "text", "text": text}]})
    elif name == "wrongkind":
        emit({"type": "command_response", "id": rid, "action": "noop"})
    else:
        text = json.dumps(a, sort_keys=True)
        emit({"type": "tool_result", "id": rid, "content": [{"type": "text", "text": text}]})


def command(msg: dict) -> None:
    name, a, rid = msg["name"], msg.get("args", ""), msg["id"]
    if name == "show":
        emit({"type": "command_response", "id": rid, "action": "display", "display": f"shown: {a}"})
    elif name == "put":
        emit(
            {"type": "command_response", "id": rid, "action": "insert", "insert": f"inserted: {a}"}
        )
    elif name == "nothing":
        emit({"type": "command_response", "id": rid, "action": "noop"})
    elif name == "oops":
        emit({"type": "command_response", "id": rid, "action": "noop", "error": "it broke"})
    elif name == "tell":
        emit({"type": "notify", "level": "warn", "message": f"told: {a}"})
        emit({"type": "command_response", "id": rid, "action": "noop"})
    elif args.flood and name == f"{args.name}-flood":
        emit({"type": "command_response", "id": rid, "action": "noop"})
        threading.Thread(target=flood, daemon=True).start()
    elif name == "boom":
        os._exit(7)
    elif name == "sleep":
        time.sleep(float(a or 30))
        emit({"type": "command_response", "id": rid, "action": "noop"})
    else:
        emit(
            {
                "type": "command_response",
                "id": rid,
                "action": "prompt",
                "prompt": f"ran /{name} with {a!r}",
            }
        )


def guard(msg: dict) -> None:
    cmd = str((msg.get("tool_args") or {}).get("command", ""))
    if "hang" in cmd:
        return
    if "slowallow" in cmd:
        time.sleep(1.0)
    block = "rm -rf" in cmd
    reply = {"type": "event_intercept_response", "id": msg["id"], "block": block}
    if block:
        reply["reason"] = f"{args.name} refused: matches danger pattern"
    emit(reply)


for line in sys.stdin:
    msg = json.loads(line)
    kind = msg.get("type")
    if kind == "tool_call":
        threading.Thread(target=tool, args=(msg,), daemon=True).start()
    elif kind == "command_invoked":
        threading.Thread(target=command, args=(msg,), daemon=True).start()
    elif kind == "event_intercept":
        threading.Thread(target=guard, args=(msg,), daemon=True).start()
    elif kind in ("event", "hello_ack") and args.events_log:
        with open(args.events_log, "a") as f:
            f.write(line)
    elif kind == "shutdown":
        if args.ignore_shutdown:
            continue
        emit({"type": "shutdown_ack"})
        break
if args.ignore_shutdown:
    while True:
        time.sleep(3600)
