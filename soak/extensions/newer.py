#!/usr/bin/env python3
"""Written as extensions made with newer zot's SDK are: panels and progress (beyond the reference).

Like that SDK it writes `hello` (listing `panels`) and its registrations at
once and never sends `ready`: zotd takes it as ready after a moment of quiet.

- Tool `progress_echo` sends `steps` (from its arguments) `tool_progress`
  frames, `<nonce> <i>/<steps>` with `progress` i and `total` steps, a few
  milliseconds apart, then echoes its arguments like every soak tool.
- Command `/panel NONCE` opens the panel `p-NONCE` (title `panel p-NONCE`,
  one line `opened NONCE`). A `panel_key` is answered with a `panel_render`
  of that panel whose one line is `key <key>: <text>`, except `q`, which
  closes the panel from this side (`panel_close`); a `panel_resize` with a
  render whose line is `size <width>x<height>`.
- Command `/panels` displays how many panels it has open, and which:
  `open N: ID ID ...`. It forgets a panel when either side closes it, and when
  zotd sends `cancel` for the `/panel` that opened it (zotd stopped waiting
  for the reply: it never opened the panel for anyone). Once no agent is
  connected, the count must be 0: zotd tells it of every panel that closes,
  and of every agent that goes away with panels open.

Its faults: now and then one more `tool_progress` after the result (zotd
must drop it: the call is no longer pending), and a `panel_render` after
the panel was closed, by the client or by itself (zotd must drop it: the
panel is no longer open). And it exits (code 1) after a random lifetime
(`--life MIN,MAX` seconds), with panels open and calls in progress: zotd
must tell each panel's agent that it closed, and restarts it. A key or a
size for a panel it never opened is noted in its log (`UNKNOWN-PANEL`).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

from extlib import echo_text, fault, frames, note, rng, send, start

parser = argparse.ArgumentParser()
parser.add_argument("--life", default="4,12", help="lifetime range in seconds: MIN,MAX")
opts = parser.parse_args()

TITLE = "panel {}"
FOOTER = "q: close"

#: Open panels: panel id -> the id of the `command_invoked` that opened it.
panels: dict[str, str] = {}
lock = threading.Lock()


def progress_echo(msg: dict[str, Any]) -> None:
    rid, args = msg["id"], msg.get("args") or {}
    steps = args.get("steps") if isinstance(args.get("steps"), int) else 0
    nonce = args.get("nonce")
    for i in range(1, steps + 1):
        send({"type": "tool_progress", "id": rid, "message": f"{nonce} {i}/{steps}",
              "progress": i, "total": steps})  # fmt: skip
        time.sleep(rng.uniform(0, 0.01))
    send({"type": "tool_result", "id": rid, "content": [{"type": "text", "text": echo_text(args)}]})
    if rng.random() < 0.1:
        fault("progress", f"after-result id={rid}")
        send({"type": "tool_progress", "id": rid, "message": f"{nonce} after the result"})


def render(panel_id: str, line: str) -> None:
    send({"type": "panel_render", "panel_id": panel_id, "title": TITLE.format(panel_id),
          "lines": [line], "footer": FOOTER})  # fmt: skip


def closed(panel_id: str) -> None:
    """The panel closed (either side): forget it; now and then redraw it anyway."""
    with lock:
        panels.pop(panel_id, None)
    if rng.random() < 0.2:
        fault("panel", f"render-after-close {panel_id}")
        render(panel_id, "drawn after the panel closed")


def known(panel_id: str) -> bool:
    with lock:
        if panel_id in panels:
            return True
    note(f"UNKNOWN-PANEL {panel_id}")
    return False


def lifetime() -> None:
    low, high = (float(x) for x in opts.life.split(","))
    time.sleep(rng.uniform(low, high))
    with lock:
        fault("exit", f"with {len(panels)} panels open")
    os._exit(1)


start(
    "newer",
    tools=("progress_echo",),
    commands=("panel", "panels"),
    capabilities=("commands", "tools", "panels"),
    ready=False,
)
threading.Thread(target=lifetime, daemon=True).start()
for msg in frames():
    kind = msg.get("type")
    if kind == "tool_call":
        threading.Thread(target=progress_echo, args=(msg,), daemon=True).start()
    elif kind == "command_invoked" and msg.get("name") == "panels":
        with lock:
            shown = f"open {len(panels)}: {' '.join(sorted(panels))}"
        send({"type": "command_response", "id": msg["id"], "action": "display", "display": shown})
    elif kind == "command_invoked":
        nonce = str(msg.get("args", ""))
        panel_id = f"p-{nonce}"
        with lock:
            panels[panel_id] = str(msg["id"])
        panel = {"id": panel_id, "title": TITLE.format(panel_id), "lines": [f"opened {nonce}"],
                 "footer": FOOTER}  # fmt: skip
        send({"type": "command_response", "id": msg["id"], "action": "noop", "open_panel": panel})
    elif kind == "panel_key":
        panel_id, key = str(msg.get("panel_id")), msg.get("key")
        known(panel_id)
        if key == "q":
            send({"type": "panel_close", "panel_id": panel_id})
            closed(panel_id)
        else:
            render(panel_id, f"key {key}: {msg.get('text', '')}")
    elif kind == "panel_resize":
        panel_id = str(msg.get("panel_id"))
        known(panel_id)
        render(panel_id, f"size {msg.get('width')}x{msg.get('height')}")
    elif kind == "panel_close":
        closed(str(msg.get("panel_id")))
    elif kind == "cancel":  # the /panel it answers was given up: the panel never opened
        with lock:
            for panel_id, opened_by in list(panels.items()):
                if opened_by == str(msg.get("id")):
                    del panels[panel_id]
    elif kind == "shutdown":
        send({"type": "shutdown_ack"})
        break
