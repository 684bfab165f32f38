"""guard: an audit log of what the agent does, and a guard against disasters.

- Every lifecycle event (``session_start``, ``turn_start``, ``tool_call``,
  ``assistant_message``, ``turn_end``) is appended as one JSON line to
  ``$ZOT_HOME/data/guard/audit.jsonl``, with the time it was seen.
- Before every ``bash`` tool call, the command is checked against a few
  patterns that wreck a machine (``rm -rf /``, ``curl ... | sh``, a fork
  bomb, ``mkfs``, ``dd of=/dev/sda``); a match blocks the call, and the
  reason is what the model (and the user) sees. Every verdict on a bash
  command is audited too.
- ``/audit [N]`` shows the last N lines of the log (default 10).

The handlers are ``async def``: they run one at a time on the SDK's event
loop, in the order the frames arrived, so the log's lines keep the events'
order and never interleave. Each does a little work and no waiting.
"""

import json
import re
from datetime import UTC, datetime
from typing import Any

from zotd.sdk import Block, Extension, Response, block, display, error

ext = Extension("guard", "1.0.0")

EVENTS = ("session_start", "turn_start", "tool_call", "assistant_message", "turn_end")

#: (pattern, why it is refused). Checked against the whole command line.
DANGERS: list[tuple[re.Pattern[str], str]] = [
    (
        # rm with a recursive flag, aimed at / , /* , ~ or $HOME
        re.compile(
            r"\brm\s+(?:-[-\w]*\s+)*-\w*[rR]\w*\s+(?:-[-\w]*\s+)*"
            r"(?:/\*?|~/?|\$HOME/?)(?=\s|$|[;&|)])"
        ),
        "deletes the whole file system or home directory",
    ),
    (
        re.compile(r"\b(?:curl|wget)\b[^;&|]*\|\s*(?:sudo\s+)?(?:ba|da|k|z)?sh\b"),
        "pipes a download straight into a shell",
    ),
    (
        re.compile(r"([\w:]+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}"),
        "is a fork bomb",
    ),
    (
        # mkfs where a command starts: first, after ; & | ( or after sudo
        re.compile(r"(?:^|(?<=[;&|(])|(?<=\bsudo\s))\s*mkfs(?:\.\w+)?\b"),
        "formats a file system",
    ),
    (
        re.compile(r"\bdd\b[^;&|]*\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)\w*"),
        "overwrites a disk device",
    ),
]


def audit(entry: dict[str, Any]) -> None:
    """Appends one JSON line to the audit log."""
    line = json.dumps({"ts": datetime.now(UTC).isoformat(), **entry})
    with open(ext.data_dir / "audit.jsonl", "a", encoding="utf-8") as f:
        f.write(line + "\n")


async def record(event: dict[str, Any]) -> None:
    audit(event)


for name in EVENTS:
    ext.on(name)(record)


def danger(command: str) -> str | None:
    """Why ``command`` is refused, or ``None`` if it may run."""
    for pattern, why in DANGERS:
        match = pattern.search(command)
        if match:
            return f"refused: {why} ({match.group(0).strip()!r})"
    return None


@ext.intercept_tool_call
async def check(tool_name: str, tool_args: dict[str, Any]) -> Block | None:
    command = tool_args.get("command")
    if tool_name != "bash" or not isinstance(command, str):
        return None
    reason = danger(command)
    audit({"event": "verdict", "tool_name": tool_name, "command": command, "blocked": bool(reason)})
    return block(reason) if reason else None


@ext.command("audit", "show the last lines of the audit log (/audit [N])")
async def show(args: str) -> Response:
    try:
        count = int(args or "10")
    except ValueError:
        return error("usage: /audit [N]")
    path = ext.data_dir / "audit.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not lines:
        return display(f"the audit log is empty ({path})")
    return display("\n".join(lines[-count:] if count > 0 else []))


if __name__ == "__main__":
    ext.run()
