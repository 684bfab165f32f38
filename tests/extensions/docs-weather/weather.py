"""The small weather extension the examples of docs/cli.md run with.

A tool ``weather`` (always 16°C and fog: the answers never change), a tool
``forecast`` that reports its progress day by day, and a command ``/deploy``
that pretends to deploy, says so in a notification and writes a line to its
log (stderr). Plain protocol, no SDK: tests/test_cli_docs.py copies it to
~/src/weather.
"""

import json
import sys

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
FORECAST = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


def emit(frame: dict) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def text(rid: str, lines: list[str], error: bool = False) -> None:
    content = [{"type": "text", "text": line} for line in lines]
    emit({"type": "tool_result", "id": rid, "content": content, "is_error": error})


def tool(rid: str, name: str, args: dict) -> None:
    city = args.get("city")
    if not isinstance(city, str):
        text(rid, ["missing 'city'"], error=True)
    elif name == "weather":
        text(rid, [f"{city}: 16°C, fog"])
    else:
        days = args.get("days", 1)
        for day in range(1, days + 1):
            emit(
                {
                    "type": "tool_progress",
                    "id": rid,
                    "message": f"day {day}",
                    "progress": day,
                    "total": days,
                }
            )
        text(rid, [f"{city}, day {day}: 16°C, fog" for day in range(1, days + 1)])


def deploy(rid: str, args: str) -> None:
    print(f"weather: deploy {args!r}", file=sys.stderr, flush=True)
    emit({"type": "notify", "level": "info", "message": f"deploy invoked with {args!r}"})
    if "--fail" in args.split():
        emit({"type": "command_response", "id": rid, "error": "deploy failed: no target"})
    else:
        emit(
            {
                "type": "command_response",
                "id": rid,
                "action": "display",
                "display": f"would deploy with args: {args!r}",
            }
        )


def main() -> None:
    emit(
        {
            "type": "hello",
            "name": "weather",
            "version": "0.1.0",
            "capabilities": ["commands", "tools"],
        }
    )
    emit(
        {
            "type": "register_tool",
            "name": "weather",
            "description": "Get the current weather for a city.",
            "schema": WEATHER,
        }
    )
    emit(
        {
            "type": "register_tool",
            "name": "forecast",
            "description": "The weather for the next days, day by day.",
            "schema": FORECAST,
        }
    )
    emit({"type": "register_command", "name": "deploy", "description": "pretend to deploy"})
    emit({"type": "ready"})
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "tool_call":
            tool(msg["id"], msg["name"], msg.get("args") or {})
        elif msg["type"] == "command_invoked":
            deploy(msg["id"], msg.get("args", ""))
        elif msg["type"] == "shutdown":
            emit({"type": "shutdown_ack"})
            break


if __name__ == "__main__":
    main()
