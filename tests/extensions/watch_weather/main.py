"""The extension the watch tests edit: ``zotd --watch`` and ``zot ext dev``.

It registers the tool named by ``TOOL`` and the command named by
``COMMAND``; a test copies this directory, starts it watched, and rewrites
those lines to see the new names replace the old ones. Plain protocol, no
SDK. It says on stderr (its log) which tool it registers.
"""

import json
import sys

TOOL = "get_weather"
COMMAND = "weather"


def emit(frame: dict) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def main() -> None:
    print(f"weather: registering {TOOL}", file=sys.stderr, flush=True)
    emit({"type": "hello", "name": "weather", "version": "0.1.0", "capabilities": ["tools"]})
    emit(
        {
            "type": "register_tool",
            "name": TOOL,
            "description": "The weather for a city.",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    )
    emit({"type": "register_command", "name": COMMAND, "description": "say the weather"})
    emit({"type": "ready"})
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "tool_call":
            city = (msg.get("args") or {}).get("city", "here")
            content = [{"type": "text", "text": f"{TOOL}: {city}: 16°C, fog"}]
            emit({"type": "tool_result", "id": msg["id"], "content": content})
        elif msg["type"] == "command_invoked":
            emit(
                {
                    "type": "command_response",
                    "id": msg["id"],
                    "action": "display",
                    "display": f"{COMMAND}: 16°C, fog",
                }
            )
        elif msg["type"] == "shutdown":
            emit({"type": "shutdown_ack"})
            break


if __name__ == "__main__":
    main()
