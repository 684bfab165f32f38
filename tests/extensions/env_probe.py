#!/usr/bin/env python3
"""Stands in for a published extension that reads an API key from its
environment (a Kagi search extension reading ``KAGI_API_KEY``, say), and
whose manifest does not ask zotd for it.

    env_probe.py --name NAME --var VAR --tool TOOL

Its tool ``TOOL`` answers, as JSON, whether ``VAR`` is in its environment
and the SHA-256 of its value (never the value): ``{"var", "set", "sha256"}``.
Plain JSON lines, like an extension in the wild.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--var", required=True)
p.add_argument("--tool", required=True)
args = p.parse_args()

emit({"type": "hello", "name": args.name, "version": "1.0.0", "capabilities": ["tools"]})
emit(
    {
        "type": "register_tool",
        "name": args.tool,
        "description": f"searches (needs {args.var})",
        "schema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
)
emit({"type": "ready"})

for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "tool_call":
        value = os.environ.get(args.var)
        digest = hashlib.sha256(value.encode()).hexdigest() if value is not None else None
        text = json.dumps({"var": args.var, "set": value is not None, "sha256": digest})
        emit({"type": "tool_result", "id": msg["id"], "content": [{"type": "text", "text": text}]})
    elif msg.get("type") == "shutdown":
        emit({"type": "shutdown_ack"})
        break
