#!/usr/bin/env python3
"""An extension written the way newer zot's own SDK behaves, for compatibility tests.

Plain Python and JSON lines. Like that SDK it writes ``hello`` and every
registration at once, before ``hello_ack`` arrives; lists ``panels`` among
its capabilities; and never sends ``ready``. It uses the frames that go
beyond the reference: panels, ``tool_progress``, ``cancel``,
``modified_args`` and ``replace_text``, ``hello_ack``'s ``data_dir``.

    newer_zot.py --name NAME --log FILE [--intercept e1,e2] [--silent]
                 [--set KEY=JSON]... [--block-if TEXT] [--block-turn-after N]
                 [--replace OLD=NEW] [--bad-rewrite JSON]

Every frame it reads is appended to ``--log`` as one JSON line, so a test
can see what it was sent (and in which order).

- ``/board`` opens the panel ``board`` (a list with a cursor): keys ``up``
  and ``down`` move it (answered with ``panel_render``), ``q`` closes it
  from this side (``panel_close``); ``panel_resize`` redraws it that wide.
  ``/board redraw`` also redraws it at once, in the same write.
- Tools: ``count {n}`` sends ``n`` ``tool_progress`` frames, then its
  result; ``hang`` never answers, and stops when cancelled; ``late`` answers
  after 1 s whatever happens; ``weather {city}`` has a strict schema;
  ``remember {note}`` appends to ``notes.txt`` in ``data_dir``, and refuses
  (as zot's SDK does) when the host sent none.
- ``/wait`` never answers.
- Guard options: ``--silent`` never answers, ``--set`` rewrites a tool call's arguments (one key each),
  ``--bad-rewrite`` rewrites them into the given JSON, ``--block-if`` blocks
  a tool call whose arguments contain TEXT, ``--block-turn-after`` blocks
  turns past step N, ``--replace`` rewrites assistant messages.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

out_lock = threading.Lock()
cancelled: set[str] = set()
host: dict[str, Any] = {}


def emit(obj: dict[str, Any]) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def split(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--intercept", type=split, default=[])
p.add_argument("--set", action="append", default=[])
p.add_argument("--bad-rewrite")
p.add_argument("--block-if")
p.add_argument("--block-turn-after", type=int)
p.add_argument("--replace")
p.add_argument("--silent", action="store_true")
args = p.parse_args()

# Everything at once, without waiting for hello_ack, and no `ready`.
emit(
    {
        "type": "hello",
        "name": args.name,
        "version": "2.0.0",
        "capabilities": ["commands", "tools", "events", "panels"],
    }
)
emit({"type": "register_command", "name": f"{args.name}-board", "description": "a panel"})
emit({"type": "register_command", "name": f"{args.name}-wait", "description": "never answers"})
schema_any = {"type": "object"}
for tool, schema in [
    ("count", {"type": "object", "properties": {"n": {"type": "integer"}}}),
    ("hang", schema_any),
    ("late", schema_any),
    (
        "weather",
        {
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}},
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
    ("remember", {"type": "object", "properties": {"note": {"type": "string"}}}),
]:
    emit(
        {
            "type": "register_tool",
            "name": f"{args.name}-{tool}" if tool != "weather" else "weather",
            "description": tool,
            "schema": schema,
        }
    )
if args.intercept:
    emit({"type": "subscribe", "events": [], "intercept": args.intercept})

# --- the panel ---------------------------------------------------------------------

ITEMS = ["alpha", "beta", "gamma"]
board = {"cursor": 0, "width": 20}


def board_frame(kind: str) -> dict[str, Any]:
    lines = [
        ("> " if i == board["cursor"] else "  ") + item.ljust(board["width"] - 2)
        for i, item in enumerate(ITEMS)
    ]
    frame: dict[str, Any] = {"title": "Board", "lines": lines, "footer": "up/down, q"}
    if kind == "open":
        return {"id": "board", **frame}
    return {"type": "panel_render", "panel_id": "board", **frame}


def on_panel_key(msg: dict[str, Any]) -> None:
    key = msg["key"]
    if key == "q":
        emit({"type": "panel_close", "panel_id": msg["panel_id"]})
        return
    if key == "up":
        board["cursor"] = max(0, board["cursor"] - 1)
    elif key == "down":
        board["cursor"] = min(len(ITEMS) - 1, board["cursor"] + 1)
    emit(board_frame("render"))


# --- tools ---------------------------------------------------------------------------


def text(id: str, value: str, is_error: bool = False) -> None:
    emit({"type": "tool_result", "id": id, "content": [{"type": "text", "text": value}],
          "is_error": is_error})  # fmt: skip


def run_tool(msg: dict[str, Any]) -> None:
    id, tool, targs = msg["id"], msg["name"].removeprefix(f"{args.name}-"), msg["args"]
    if tool == "count":
        n = targs.get("n", 3)
        for i in range(n):
            emit({"type": "tool_progress", "id": id, "message": f"step {i + 1}",
                  "progress": i + 1, "total": n})  # fmt: skip
            time.sleep(0.02)
        text(id, f"counted to {n}")
    elif tool == "hang":
        while id not in cancelled:
            time.sleep(0.01)
        print(f"{args.name}: stopped {id} on cancel", file=sys.stderr, flush=True)
    elif tool == "late":
        time.sleep(1.0)
        text(id, "late")
    elif tool == "weather":
        text(id, f"{targs['city']}: sunny")
    elif tool == "remember":
        if not host.get("data_dir"):
            text(id, "refusing to store state: the host sent no data_dir", is_error=True)
            return
        with open(Path(host["data_dir"]) / "notes.txt", "a") as f:
            f.write(targs.get("note", "") + "\n")
        text(id, "noted")


# --- guards --------------------------------------------------------------------------


def verdict(msg: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = {"type": "event_intercept_response", "id": msg["id"]}
    event = msg["event"]
    if event == "tool_call":
        tool_args = msg.get("tool_args") or {}
        if args.block_if and args.block_if in json.dumps(tool_args):
            return {**reply, "block": True, "reason": f"{args.name}: no {args.block_if!r}"}
        if args.bad_rewrite:
            return {**reply, "modified_args": json.loads(args.bad_rewrite)}
        if args.set:
            changed = dict(tool_args)
            for item in args.set:
                key, value = item.split("=", 1)
                changed[key] = json.loads(value)
            return {**reply, "modified_args": changed}
    elif event == "turn_start":
        if args.block_turn_after is not None and msg.get("step", 0) > args.block_turn_after:
            return {**reply, "block": True, "reason": f"{args.name}: turn budget spent"}
    elif event == "assistant_message" and args.replace:
        old, new = args.replace.split("=", 1)
        if old in msg.get("text", ""):
            return {**reply, "replace_text": msg["text"].replace(old, new)}
    return reply


# --- the loop ------------------------------------------------------------------------

with open(args.log, "a") as log:
    for line in sys.stdin:
        log.write(line if line.endswith("\n") else line + "\n")
        log.flush()
        msg = json.loads(line)
        kind = msg.get("type")
        if kind == "hello_ack":
            host.update(msg)
        elif kind == "command_invoked" and msg["name"].endswith("-wait"):
            pass  # never answered: it waits for a `cancel`
        elif kind == "command_invoked":
            opened = {"type": "command_response", "id": msg["id"], "action": "noop",
                      "open_panel": board_frame("open")}  # fmt: skip
            if msg["args"] == "redraw":  # and redraw it in the same breath
                board["cursor"] = 2
                with out_lock:
                    sys.stdout.write(json.dumps(opened) + "\n")
                    sys.stdout.write(json.dumps(board_frame("render")) + "\n")
                    sys.stdout.flush()
            else:
                emit(opened)
        elif kind == "panel_key":
            on_panel_key(msg)
        elif kind == "panel_resize":
            board["width"] = msg["width"]
            emit(board_frame("render"))
        elif kind == "tool_call":
            threading.Thread(target=run_tool, args=(msg,), daemon=True).start()
        elif kind == "cancel":
            cancelled.add(msg["id"])
        elif kind == "event_intercept" and not args.silent:
            emit(verdict(msg))
        elif kind == "shutdown":
            emit({"type": "shutdown_ack"})
            break
