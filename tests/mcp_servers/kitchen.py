"""The kitchen MCP server: one of everything zotd maps, written with the ``mcp``
package's low-level ``Server``, for the end-to-end tests of MCP servers as
extensions.

Run as ``python kitchen.py`` (stdio), or ``python kitchen.py --http PORT_FILE``
(streamable HTTP on a free port of 127.0.0.1, written to ``PORT_FILE`` once it
listens; the endpoint is ``/mcp``).

Its tools:

- ``echo(text)``: the text back (annotated read-only, titled);
- ``weather(city)``: an ``outputSchema`` and the matching ``structuredContent``;
- ``picture()``: a PNG image; ``media()``: audio and a resource link;
- ``steps()``: three progress notifications, then ``done in 3 steps``;
- ``slow()``: waits until it is cancelled; writes ``started slow`` and then
  ``cancelled slow`` to the file named by ``$KITCHEN_EVENTS``;
- ``broken()``: a result with ``isError``;
- ``crash()``: writes :data:`CRASH_LINE` to stderr and exits at once;
- ``grow()``: adds the tool ``extra`` and sends ``notifications/tools/list_changed``;
- ``grow_prompts()``: adds the prompt ``later`` and sends
  ``notifications/prompts/list_changed``;
- ``chatter()``: sends a log notification, :data:`LOG_LINE`.

Its prompts: ``recipe(dish, diet?)`` and ``greet(name)``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

#: What ``crash`` writes to stderr before it exits.
CRASH_LINE = "kitchen: the oven caught fire"
#: The data of the log notification ``chatter`` sends.
LOG_LINE = "kitchen log: the soup is simmering"
#: A 1x1 transparent PNG, base64.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
#: Sixteen bytes of "audio", base64.
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()

WEATHER_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}

Ctx = ServerRequestContext[Any, Any]


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


TOOLS: list[mt.Tool] = [
    mt.Tool(
        name="echo",
        title="Echo",
        description="Say the text back",
        input_schema=_object(text={"type": "string"}) | {"required": ["text"]},
        annotations=mt.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    ),
    mt.Tool(
        name="weather",
        description="The weather in a city",
        input_schema=_object(city={"type": "string"}),
        output_schema=WEATHER_OUTPUT,
    ),
    mt.Tool(name="picture", description="A tiny picture", input_schema=_object()),
    mt.Tool(name="media", description="Audio and a link", input_schema=_object()),
    mt.Tool(name="steps", description="Three steps, with progress", input_schema=_object()),
    mt.Tool(name="slow", description="Waits until cancelled", input_schema=_object()),
    mt.Tool(name="broken", description="Always fails", input_schema=_object()),
    mt.Tool(
        name="crash",
        description="Crashes the server",
        input_schema=_object(),
        annotations=mt.ToolAnnotations(destructive_hint=True),
    ),
    mt.Tool(name="grow", description="Adds the tool extra", input_schema=_object()),
    mt.Tool(name="grow_prompts", description="Adds the prompt later", input_schema=_object()),
    mt.Tool(name="chatter", description="Sends a log message", input_schema=_object()),
]

PROMPTS: list[mt.Prompt] = [
    mt.Prompt(
        name="recipe",
        description="A recipe",
        arguments=[
            mt.PromptArgument(name="dish", description="what to cook", required=True),
            mt.PromptArgument(name="diet", description="any restriction", required=False),
        ],
    ),
    mt.Prompt(
        name="greet",
        description="A greeting",
        arguments=[mt.PromptArgument(name="name", required=True)],
    ),
]


def _note(line: str) -> None:
    events = os.environ.get("KITCHEN_EVENTS")
    if events:
        with Path(events).open("a") as f:
            f.write(line + "\n")


def _text(text: str) -> mt.TextContent:
    return mt.TextContent(type="text", text=text)


async def list_tools(ctx: Ctx, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
    return mt.ListToolsResult(tools=TOOLS)


async def list_prompts(ctx: Ctx, params: mt.PaginatedRequestParams | None) -> mt.ListPromptsResult:
    return mt.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: Ctx, params: mt.GetPromptRequestParams) -> mt.GetPromptResult:
    args = params.arguments or {}
    if params.name == "recipe":
        text = f"Write a recipe for {args['dish']}" + (
            f" ({args['diet']})" if args.get("diet") else ""
        )
    elif params.name == "greet":
        text = f"Greet {args['name']} warmly"
    elif params.name == "later" and any(p.name == "later" for p in PROMPTS):
        text = "a prompt added later"
    else:
        raise MCPError(code=mt.INVALID_PARAMS, message=f"no prompt {params.name}")
    return mt.GetPromptResult(
        description=f"the {params.name} prompt",
        messages=[mt.PromptMessage(role="user", content=_text(text))],
    )


async def call_tool(ctx: Ctx, params: mt.CallToolRequestParams) -> mt.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return mt.CallToolResult(content=[_text(str(args.get("text", "")))])
    if name == "weather":
        data = {"city": str(args.get("city", "Oslo")), "celsius": 21.5}
        return mt.CallToolResult(content=[_text(json.dumps(data))], structured_content=data)
    if name == "picture":
        return mt.CallToolResult(
            content=[
                _text("a picture"),
                mt.ImageContent(type="image", data=PNG, mime_type="image/png"),
            ]
        )
    if name == "media":
        return mt.CallToolResult(
            content=[
                mt.AudioContent(type="audio", data=WAV, mime_type="audio/wav"),
                mt.ResourceLink(type="resource_link", name="menu", uri="file:///kitchen/menu.txt"),
            ]
        )
    if name == "steps":
        for step in (1, 2, 3):
            await ctx.session.report_progress(step, 3, f"step {step}")
        return mt.CallToolResult(content=[_text("done in 3 steps")])
    if name == "slow":
        _note("started slow")
        try:
            await anyio.sleep_forever()
        finally:
            _note("cancelled slow")
    if name == "broken":
        return mt.CallToolResult(content=[_text("the kitchen is closed")], is_error=True)
    if name == "crash":
        sys.stderr.write(CRASH_LINE + "\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "grow":
        if not any(t.name == "extra" for t in TOOLS):
            TOOLS.append(mt.Tool(name="extra", description="Added later", input_schema=_object()))
        await ctx.session.send_tool_list_changed()
        return mt.CallToolResult(content=[_text("grew extra")])
    if name == "grow_prompts":
        if not any(p.name == "later" for p in PROMPTS):
            PROMPTS.append(mt.Prompt(name="later", description="Added later"))
        await ctx.session.send_prompt_list_changed()
        return mt.CallToolResult(content=[_text("grew later")])
    if name == "chatter":
        with warnings.catch_warnings():  # (deprecated by a newer revision; zotd speaks this one)
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message("info", LOG_LINE, logger="kitchen")
        return mt.CallToolResult(content=[_text("said it")])
    if name == "extra" and any(t.name == "extra" for t in TOOLS):
        return mt.CallToolResult(content=[_text("extra works")])
    raise MCPError(code=mt.INVALID_PARAMS, message=f"no tool {name}")


def make_server() -> Server[Any]:
    return Server(
        "kitchen",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve_stdio() -> None:
    server = make_server()
    options = server.create_initialization_options(
        NotificationOptions(tools_changed=True, prompts_changed=True)
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def serve_http(port_file: Path) -> None:
    """Streamable HTTP on a port bound here (so no other process can take it
    between choosing it and listening), written to ``port_file`` once bound."""
    import uvicorn

    app = make_server().streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port_file.with_suffix(".tmp").write_text(str(sock.getsockname()[1]))
    port_file.with_suffix(".tmp").replace(port_file)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=Path, help="serve streamable HTTP; write the port here")
    args = parser.parse_args()
    if args.http is not None:
        serve_http(args.http)
    else:
        anyio.run(serve_stdio)


if __name__ == "__main__":
    main()
