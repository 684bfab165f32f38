#!/usr/bin/env python3
"""An extension that calls tools through the host (current zot's ``call_tool``).

Plain Python and JSON lines, like current zot's SDK on the wire: it sends
``hello`` (listing ``call_tool`` unless ``--caps`` says otherwise), reads
``hello_ack`` first, then registers and says ``ready``. Every frame it
reads is appended to ``--log`` as one JSON line.

    caller.py --name NAME --log FILE [--caps a,b] [--tools t1,t2]

- Each tool of ``--tools`` relays: called with ``{"name": N, "args": {..}}``
  it sends ``call_tool`` N (with ``parent_id`` = the tool call's id) and
  answers with the host's result (its content and ``is_error``). More keys:
  ``no_parent`` (send no ``parent_id``), ``parent_id`` (send this one),
  ``id`` (the call's id; default ``<tool call id>-c``), ``count`` (send that
  many calls, ids ``<id>-0``, ``<id>-1``, ...), ``no_wait`` (answer at once,
  ``sent``, without waiting for the result; with ``when``, once the file
  ``when`` exists), ``cancel_after`` (seconds: then send
  ``call_tool_cancel`` and answer ``cancelled``).
- ``/call NAME JSON`` sends ``call_tool`` without ``parent_id`` and answers
  ``display`` with the host's result frame as JSON.
- ``/fire NAME JSON`` sends it and answers ``noop`` at once.
- ``/send LINE`` writes LINE to stdout as it is and answers ``noop``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

out_lock = threading.Lock()
waiting: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
waiting_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def split(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--caps", type=split, default=["commands", "tools", "tool_cancel", "call_tool"])
p.add_argument("--tools", type=split, default=[])
opts = p.parse_args()


def record(line: str) -> None:
    with open(opts.log, "a") as f:
        f.write(line if line.endswith("\n") else line + "\n")


def expect(cid: str) -> threading.Event:
    event = threading.Event()
    with waiting_lock:
        waiting[cid] = (event, [])
    return event


def result_of(cid: str) -> dict[str, Any]:
    with waiting_lock:
        return waiting.pop(cid)[1][0]


def call(cid: str, name: str, args: Any, parent_id: str | None) -> None:
    frame: dict[str, Any] = {"type": "call_tool", "id": cid, "name": name, "args": args}
    if parent_id is not None:
        frame["parent_id"] = parent_id
    emit(frame)


def relay(msg: dict[str, Any]) -> None:
    a, rid = msg.get("args") or {}, msg["id"]
    parent = None if a.get("no_parent") else a.get("parent_id", rid)
    base = a.get("id", f"{rid}-c")
    count = int(a.get("count", 1))
    ids = [base] if count == 1 else [f"{base}-{i}" for i in range(count)]
    events = [expect(cid) for cid in ids]
    for cid in ids:
        call(cid, a.get("name", ""), a.get("args", {}), parent)
    if a.get("no_wait"):
        while "when" in a and not os.path.exists(a["when"]):
            time.sleep(0.01)
        emit({"type": "tool_result", "id": rid, "content": [{"type": "text", "text": "sent"}]})
        return
    if "cancel_after" in a:
        time.sleep(float(a["cancel_after"]))
        for cid in ids:
            emit({"type": "call_tool_cancel", "id": cid})
        emit({"type": "tool_result", "id": rid, "content": [{"type": "text", "text": "cancelled"}]})
        return
    for event in events:
        event.wait()
    results = [result_of(cid) for cid in ids]
    content = [block for r in results for block in r.get("content", [])]
    is_error = any(r.get("is_error") for r in results)
    emit({"type": "tool_result", "id": rid, "content": content, "is_error": is_error})


def command(msg: dict[str, Any]) -> None:
    name, text, rid = msg["name"], msg.get("args", ""), msg["id"]
    if name == "send":
        emit({"type": "command_response", "id": rid, "action": "noop"})
        with out_lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        return
    tool, _, raw_args = text.partition(" ")
    cid = f"cmd-{rid}"
    event = expect(cid)
    call(cid, tool, json.loads(raw_args or "{}"), None)
    if name == "fire":
        emit({"type": "command_response", "id": rid, "action": "noop"})
        return
    event.wait()
    shown = json.dumps(result_of(cid))
    emit({"type": "command_response", "id": rid, "action": "display", "display": shown})


emit({"type": "hello", "name": opts.name, "version": "0.0.1", "capabilities": opts.caps})
first = sys.stdin.readline()
record(first)
if json.loads(first).get("type") != "hello_ack":
    sys.exit(2)
for cmd in ("call", "fire", "send"):
    emit({"type": "register_command", "name": cmd, "description": f"the {cmd} command"})
for tool in opts.tools:
    emit(
        {
            "type": "register_tool",
            "name": tool,
            "description": "calls a tool through the host",
            "schema": {"type": "object"},
        }
    )
emit({"type": "ready"})

for line in sys.stdin:
    record(line)
    msg = json.loads(line)
    kind = msg.get("type")
    if kind == "tool_result":  # the host's answer to a call_tool of ours
        with waiting_lock:
            entry = waiting.get(msg.get("id"))
        if entry is not None:
            entry[1].append(msg)
            entry[0].set()
    elif kind == "tool_call":
        threading.Thread(target=relay, args=(msg,), daemon=True).start()
    elif kind == "command_invoked":
        threading.Thread(target=command, args=(msg,), daemon=True).start()
    elif kind == "shutdown":
        emit({"type": "shutdown_ack"})
        break
