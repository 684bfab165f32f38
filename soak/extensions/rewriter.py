#!/usr/bin/env python3
"""A guard that rewrites, and guards turns and assistant messages (beyond the reference).

It intercepts three events, and what it makes of each depends on the
request alone, so that the soak can tell what it must have answered:

- `tool_call`: when the arguments carry `"rewrite": true`, it answers with
  `modified_args`: the arguments plus `"rewritten": <tool_id>`; with
  `"rewrite": "break"`, also `"nonce": 0`, which does not fit the schema of
  the soak's tools (`nonce` is a string there), so zotd must refuse that
  rewrite for a call of one of them. Otherwise it allows the arguments
  unchanged. It runs before the `guard` (priority -1 in its manifest), so
  the guard is asked about the rewritten arguments.
- `turn_start`: it blocks when `step` is a multiple of 3, with the reason
  `turn <nonce> blocked at step <step>` (`nonce` is a field of the event).
- `assistant_message`: when the text contains `hunter2`, it answers with
  `replace_text`: the text with `hunter2` replaced by `[redacted <nonce>]`.

Some of its answers are faulty on purpose: never sent (the decision waits
for `intercept_timeout`, then allows), malformed (counts as allow), slow,
the wrong rewrite for the event (`replace_text` for a tool call,
`modified_args` for a message or a turn: zotd ignores it), or, for a tool
call it was asked to rewrite, `modified_args` that is not a JSON object
(zotd blocks the call, naming this guard).
"""

from __future__ import annotations

import time
from typing import Any

from extlib import fault, rng, send, serve, start

SECRET = "hunter2"


def answer(msg: dict[str, Any]) -> dict[str, Any]:
    """The correct answer to an intercept."""
    reply: dict[str, Any] = {"type": "event_intercept_response", "id": msg["id"]}
    event = msg.get("event")
    if event == "tool_call":
        args = msg.get("tool_args")
        if isinstance(args, dict) and args.get("rewrite") in (True, "break"):
            reply["modified_args"] = {**args, "rewritten": msg.get("tool_id")}
            if args["rewrite"] == "break":
                reply["modified_args"]["nonce"] = 0
    elif event == "turn_start":
        step = msg.get("step")
        if isinstance(step, int) and step % 3 == 0:
            reply["block"] = True
            reply["reason"] = f"turn {msg.get('nonce')} blocked at step {step}"
    elif event == "assistant_message":
        text = msg.get("text")
        if isinstance(text, str) and SECRET in text:
            reply["replace_text"] = text.replace(SECRET, f"[redacted {msg.get('nonce')}]")
    return reply


def judge(msg: dict[str, Any]) -> None:
    rid, event = msg["id"], msg.get("event")
    args = msg.get("tool_args")
    asked_to_rewrite = event == "tool_call" and isinstance(args, dict) and args.get("rewrite")
    draw = rng.random()
    if draw < 0.06:
        fault("rewriter", f"silent {event}")
        return
    if draw < 0.10:
        fault("rewriter", f"malformed {event}")
        send({"type": "event_intercept_response", "id": rid, "block": "maybe"})
        return
    if draw < 0.14:
        fault("rewriter", f"wrong-rewrite {event}")
        reply: dict[str, Any] = {"type": "event_intercept_response", "id": rid}
        if event == "tool_call":
            reply["replace_text"] = "a tool call has no text to replace"
        else:
            reply["modified_args"] = {"an": "assistant message or a turn has no arguments"}
        send(reply)
        return
    if draw < 0.17 and asked_to_rewrite:
        fault("rewriter", "not-an-object tool_call")
        send({"type": "event_intercept_response", "id": rid, "modified_args": ["not", "an"]})
        return
    if draw < 0.27:
        fault("rewriter", f"slow {event}")
        time.sleep(rng.uniform(0.1, 0.4))
    send(answer(msg))


start(
    "rewriter",
    intercept=("tool_call", "turn_start", "assistant_message"),
)
serve("event_intercept", judge)
