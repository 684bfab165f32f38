#!/usr/bin/env python3
"""An extension that behaves on the wire exactly like current zot's Go SDK.

Plain Python and JSON lines, after ``packages/agent/ext`` (v0.2 and later;
../shared/reference/zot-current-protocol.md, sections A3 and I):

- it writes ``hello`` with the capabilities that SDK always sends, then
  reads the very first host line and exits with code 1 (and the SDK's
  words on stderr) unless it is a ``hello_ack``;
- only then does it register: its commands, its tools with current zot's
  metadata, exactly one ``subscribe``, and ``ready``;
- it knows the frames that SDK knows and no others: anything else
  (zotd's ``cancel`` and ``panel_resize`` among them) is logged to stderr
  as an ``unknown frame type`` and ignored;
- commands are looked up by the exact name in ``command_invoked``; tool
  handlers run in threads, and one given up with ``tool_cancel`` sends no
  ``tool_result`` at all; ``shutdown`` is answered with ``shutdown_ack``,
  then it exits.

    zot_sdk.py --name NAME --log FILE [--events e1,e2] [--intercept e1,e2]
               [--command NAME=JSON]... [--bare] [--odd-tools]

Every line it reads is appended to ``--log``, so a test can see what it was
sent. What it offers, modelled on zot's ``todo`` example:

- ``/todo`` opens the panel ``todos-main`` the SDK's way (``"action":
  "open_panel"`` with an ``open_panel`` panel); its keys: ``up``, ``down``,
  ``rune`` ``x`` (toggle) and ``d`` (delete), ``rune`` ``a`` (add: runes
  typed, ``backspace``, ``enter`` saves, ``esc`` cancels); each answered
  with ``panel_render``.
- ``todo_manage {action, title}``: list, add, complete, remove (redraws the
  panel while it is open); ``todo_stats`` (an ``output_schema``; answers
  ``structured_content``); ``todo_search`` (in namespace ``todos``; answers
  ``activate_tools: ["todo_archive"]``); ``todo_archive`` (deferred);
  ``todo_render`` (a Markdown text block and a block of type ``resource``,
  unknown to the protocol); ``todo_wait`` (answers only when cancelled,
  that is never); ``todo_ask`` (interactive, replay ``safe``: opens the
  panel ``todo-ask`` on its own and answers with the first key's text).
- ``--command NAME=JSON`` registers ``/NAME``, answered with the
  ``command_response`` fields in JSON; ``--bare`` registers neither
  ``/todo`` nor the tools; ``--odd-tools`` adds ``odd_exposure`` (an
  unknown ``exposure``) and ``odd_replay`` (an unknown ``replay``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from typing import Any

CAPABILITIES = ["commands", "tools", "events", "panels", "tool_cancel", "call_tool"]
PANEL = "todos-main"
ASK_PANEL = "todo-ask"


def split(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log", required=True)
p.add_argument("--events", type=split, default=["session_start", "tool_result"])
p.add_argument("--intercept", type=split, default=[])
p.add_argument("--command", action="append", default=[])
p.add_argument("--bare", action="store_true")
p.add_argument("--odd-tools", action="store_true")
args = p.parse_args()

out_lock = threading.Lock()
state_lock = threading.Lock()
log_lock = threading.Lock()
log_file = open(args.log, "a")  # noqa: SIM115 (open for the whole run)


def send(obj: dict[str, Any]) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def logf(message: str) -> None:
    """The SDK's ``Logf``: one line on stderr (the extension's log)."""
    print(f"[{args.name}] {message}", file=sys.stderr, flush=True)


def read_line() -> str | None:
    line = sys.stdin.readline()
    if not line:
        return None
    with log_lock:
        log_file.write(line if line.endswith("\n") else line + "\n")
        log_file.flush()
    return line


# --- the todo list and its panel (zot's `todo` example) ------------------------------

todos: list[dict[str, Any]] = [{"text": "Build something fun", "done": False}]
panel = {"open": False, "cursor": 0, "mode": "", "edit": ""}


def title() -> str:
    return f"Todos ({sum(t['done'] for t in todos)}/{len(todos)} done)"


def lines() -> list[str]:
    if panel["mode"] == "add":
        return ["  Add todo", "", f"  {panel['edit']}▌", "", "  Enter saves, Esc cancels"]
    if not todos:
        return ["  No todos yet.", "", "  Press a to add one."]
    return [
        ("> " if i == panel["cursor"] else "  ")
        + ("✓ " if t["done"] else "□ ")
        + t["text"]
        + ("  (done)" if t["done"] else "")
        for i, t in enumerate(todos)
    ]


def footer() -> str:
    if panel["mode"] == "add":
        return "type text - enter save - esc cancel - backspace delete"
    return "↑/↓ navigate - x toggle - a add - d delete - esc close"


def render() -> None:
    send({"type": "panel_render", "panel_id": PANEL, "title": title(), "lines": lines(),
          "footer": footer()})  # fmt: skip


def clamp() -> None:
    panel["cursor"] = max(0, min(int(panel["cursor"]), len(todos) - 1))


def on_todo_key(key: str, text: str) -> None:
    with state_lock:
        if panel["mode"] == "add":
            if key == "enter" and str(panel["edit"]).strip():
                todos.append({"text": str(panel["edit"]).strip(), "done": False})
                panel["cursor"] = len(todos) - 1
            if key in ("enter", "esc"):
                panel["mode"], panel["edit"] = "", ""
            elif key == "backspace":
                panel["edit"] = str(panel["edit"])[:-1]
            elif key == "rune":
                panel["edit"] = str(panel["edit"]) + text
        elif key in ("up", "down"):
            panel["cursor"] = int(panel["cursor"]) + (1 if key == "down" else -1)
        elif key == "rune" and text.lower() == "x" and todos:
            todos[int(panel["cursor"])]["done"] = not todos[int(panel["cursor"])]["done"]
        elif key == "rune" and text.lower() == "d" and todos:
            del todos[int(panel["cursor"])]
        elif key == "rune" and text.lower() == "a":
            panel["mode"], panel["edit"] = "add", ""
        clamp()
        render()


def todo_command(_args: str) -> dict[str, Any]:
    with state_lock:
        panel["open"] = True
        spec = {"id": PANEL, "title": title(), "lines": lines(), "footer": footer()}
    return {"action": "open_panel", "open_panel": spec}


# --- tools ---------------------------------------------------------------------------

Result = dict[str, Any]


def text_result(value: str, is_error: bool = False) -> Result:
    return {"content": [{"type": "text", "text": value}], "is_error": is_error}


def todo_manage(targs: dict[str, Any]) -> Result:
    action, wanted = targs.get("action", ""), str(targs.get("title", "")).strip()
    with state_lock:
        found = [i for i, t in enumerate(todos) if t["text"].lower() == wanted.lower()]
        if action == "list":
            listed = [("[x] " if t["done"] else "[ ] ") + t["text"] for t in todos]
            return text_result("\n".join(listed) or "No todos.")
        if action == "add" and wanted:
            todos.append({"text": wanted, "done": False})
        elif action in ("complete", "remove") and found:
            if action == "complete":
                todos[found[0]]["done"] = True
            else:
                del todos[found[0]]
        elif action in ("add", "complete", "remove"):
            return text_result(f"todo not found or no title: {wanted!r}", is_error=True)
        else:
            return text_result(f"unsupported action: {action!r}", is_error=True)
        clamp()
        if panel["open"] and not panel["mode"]:
            render()
    return text_result("ok")


def todo_stats(_targs: dict[str, Any]) -> Result:
    with state_lock:
        done = sum(t["done"] for t in todos)
        counts = {"open": len(todos) - done, "done": done}
    return {**text_result(f"{counts['open']} open, {done} done"), "structured_content": counts}


def todo_search(_targs: dict[str, Any]) -> Result:
    return {**text_result("found todo_archive"), "activate_tools": ["todo_archive"]}


def todo_archive(_targs: dict[str, Any]) -> Result:
    with state_lock:
        gone = [t for t in todos if t["done"]]
        todos[:] = [t for t in todos if not t["done"]]
    return text_result(f"archived {len(gone)}")


def todo_render(_targs: dict[str, Any]) -> Result:
    with state_lock:
        body = "\n".join(f"- [{'x' if t['done'] else ' '}] {t['text']}" for t in todos)
    markdown = {"type": "text", "text": f"# Todos\n\n{body}", "format": "markdown"}
    return {"content": [markdown, {"type": "resource", "text": "todo://list"}]}


waiting: dict[str, threading.Event] = {}


def todo_wait(_targs: dict[str, Any], call_id: str) -> Result:
    waiting[call_id].wait()
    logf(f"todo_wait: stopped {call_id} on tool_cancel")
    return text_result("cancelled")


asked: dict[str, str] = {}
answered = threading.Event()


def todo_ask(targs: dict[str, Any], call_id: str) -> Result:
    question = str(targs.get("question", "?"))
    send({"type": "open_panel", "panel": {"id": ASK_PANEL, "title": question, "lines": [],
                                          "footer": "type an answer"}})  # fmt: skip
    while not answered.wait(0.05):
        if waiting[call_id].is_set():
            return text_result("cancelled")
    send({"type": "panel_close", "panel_id": ASK_PANEL})
    return text_result(asked.get("answer", ""))


Handler = Callable[..., Result]
#: name -> (handler, whether it takes the call id, the register_tool fields past name)
TOOLS: dict[str, tuple[Handler, bool, dict[str, Any]]] = {}


def tool(name: str, handler: Handler, with_id: bool = False, **fields: Any) -> None:
    TOOLS[name] = (handler, with_id, fields)


OBJECT = {"type": "object"}
if not args.bare:
    tool("todo_manage", todo_manage, description="List, add, complete or remove todos.",
         schema={"type": "object", "properties": {
             "action": {"type": "string", "enum": ["list", "add", "complete", "remove"]},
             "title": {"type": "string"}}, "required": ["action"]})  # fmt: skip
    tool("todo_stats", todo_stats, description="How many todos are open and done.",
         schema=OBJECT, output_schema={"type": "object", "properties": {
             "open": {"type": "integer"}, "done": {"type": "integer"}}})  # fmt: skip
    tool("todo_search", todo_search, description="Finds the todo tools.", schema=OBJECT,
         namespace="todos", namespace_description="the todo list",
         namespace_instructions="search before you archive", exposure="direct")  # fmt: skip
    tool("todo_archive", todo_archive, description="Drops the done todos.", schema=OBJECT,
         deferred=True)  # fmt: skip
    tool("todo_render", todo_render, description="The list as Markdown.", schema=OBJECT)
    tool("todo_wait", todo_wait, True, description="Waits until cancelled.", schema=OBJECT)
    tool("todo_ask", todo_ask, True, description="Asks the user.", schema=OBJECT,
         interactive=True, replay="safe")  # fmt: skip
if args.odd_tools:
    tool("odd_exposure", todo_stats, description="", schema=OBJECT, exposure="eager")
    tool("odd_replay", todo_stats, description="", schema=OBJECT, replay="always")


def run_tool(call_id: str, name: str, targs: Any) -> None:
    handler, with_id, _ = TOOLS[name]
    try:
        result = handler(targs, call_id) if with_id else handler(targs)
    except Exception as exc:  # the SDK's recover(): an error result
        result = text_result(f"panic: {exc}", is_error=True)
    if waiting.pop(call_id).is_set():
        return  # given up with tool_cancel: the SDK sends no tool_result
    send({"type": "tool_result", "id": call_id, **result})


# --- commands ------------------------------------------------------------------------

COMMANDS: dict[str, Callable[[str], dict[str, Any]]] = {}
if not args.bare:
    COMMANDS["todo"] = todo_command


def answer(reply: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    return lambda _args: dict(reply)


for item in args.command:
    command, reply = item.split("=", 1)
    COMMANDS[command] = answer(json.loads(reply))


def run_command(call_id: str, name: str, cargs: str) -> None:
    handler = COMMANDS.get(name)  # exact, as the SDK's map lookup
    reply = handler(cargs) if handler else {"action": "noop", "error": f"no handler for /{name}"}
    send({"type": "command_response", "id": call_id, **reply})


# --- the protocol loop ---------------------------------------------------------------

send({"type": "hello", "name": args.name, "version": "0.3.0", "capabilities": CAPABILITIES})
first = read_line()
if first is None:
    sys.exit(0)
try:
    ack = json.loads(first)
except ValueError as exc:
    logf(f"parse hello_ack: {exc}")
    sys.exit(1)
if not isinstance(ack, dict) or ack.get("type") != "hello_ack":
    kind = ack.get("type") if isinstance(ack, dict) else None
    logf(f"first host frame must be hello_ack (got {json.dumps(kind)})")
    sys.exit(1)

for command in COMMANDS:
    send({"type": "register_command", "name": command, "description": f"/{command}"})
for name, (_, _, fields) in TOOLS.items():
    send({"type": "register_tool", "name": name, **fields})
if args.events or args.intercept:
    send({"type": "subscribe", "events": args.events, "intercept": args.intercept})
send({"type": "ready"})

while (line := read_line()) is not None:
    try:
        msg = json.loads(line)
    except ValueError as exc:
        logf(f"malformed frame from host: {exc}")
        continue
    kind = msg.get("type")
    if kind == "hello_ack":
        pass  # handled before the registrations; duplicates ignored
    elif kind == "command_invoked":
        threading.Thread(
            target=run_command, args=(msg["id"], msg["name"], msg.get("args", "")), daemon=True
        ).start()
    elif kind == "tool_call":
        if msg["name"] not in TOOLS:
            send({"type": "tool_result", "id": msg["id"], **text_result(
                f"no handler for tool {msg['name']!r}", is_error=True)})  # fmt: skip
            continue
        waiting[msg["id"]] = threading.Event()
        threading.Thread(
            target=run_tool, args=(msg["id"], msg["name"], msg.get("args") or {}), daemon=True
        ).start()
    elif kind == "tool_cancel":
        if msg.get("id") in waiting:  # unknown or finished ids are ignored
            waiting[msg["id"]].set()
    elif kind == "tool_result":
        pass  # the reply to a call_tool of ours; this fixture makes none
    elif kind == "event":
        pass  # subscribed events: in the log
    elif kind == "event_intercept":
        send({"type": "event_intercept_response", "id": msg["id"]})  # allow
    elif kind == "panel_key" and msg.get("panel_id") == PANEL:
        threading.Thread(
            target=on_todo_key, args=(msg["key"], msg.get("text", "")), daemon=True
        ).start()
    elif kind == "panel_key" and msg.get("panel_id") == ASK_PANEL:
        asked["answer"] = msg.get("text", "")
        answered.set()
    elif kind == "panel_key":
        pass  # no handler for that panel
    elif kind == "panel_close":
        with state_lock:
            if msg.get("panel_id") == PANEL:
                panel["open"] = False
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        sys.exit(0)
    else:
        logf(f"unknown frame type {json.dumps(kind)}")
