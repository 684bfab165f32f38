"""``zot mcp``'s mapping of zot's tools, commands and results to MCP: plain functions.

:mod:`.mcp_bridge` serves them; these turn the daemon's ``list_tools``,
``list_commands``, ``call_tool`` and ``invoke_command`` data into the
``mcp`` package's types (and a host's prompt arguments into a command's text).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from typing import Any, Literal

import mcp.types as mt
import msgspec
from mcp.shared.exceptions import MCPError

from ..protocol import agent as ap
from ..protocol.extension import ImageBlock, TextBlock

#: The one argument of every prompt: what a user would type after ``/NAME``.
ARGS = "args"


def tool_of(info: ap.ToolInfo) -> mt.Tool:
    """An MCP tool from a zot tool, with its output schema, title and annotations
    when it has them (a schema that is not an object becomes ``{"type": "object"}``;
    annotations that are not MCP's are left out)."""
    schema: dict[str, Any] = dict(info.schema) if isinstance(info.schema, dict) else {}
    schema.setdefault("type", "object")
    output = info.output_schema if isinstance(info.output_schema, dict) else None
    annotations: mt.ToolAnnotations | None = None
    if isinstance(info.annotations, dict):
        with contextlib.suppress(ValueError):
            annotations = mt.ToolAnnotations.model_validate(info.annotations)
    return mt.Tool(
        name=info.name,
        title=info.title or None,
        description=info.description,
        input_schema=schema,
        output_schema=output,
        annotations=annotations,
    )


#: The usage zotd appends to a hosted MCP prompt's description:
#: ``(/NAME a=... [b=...])`` (see zotd.protocol.mcp_map.register_command).
_USAGE = re.compile(r"\s*\(/(?P<name>\S+)(?P<args>(?: \[?[A-Za-z_][\w-]*=\.\.\.\]?)+)\)$")
_USAGE_ARG = re.compile(r"(\[?)([A-Za-z_][\w-]*)=\.\.\.\]?")


def prompt_arguments_of(info: ap.CommandInfo) -> tuple[str, list[mt.PromptArgument]] | None:
    """A hosted MCP prompt's description without its usage, and its arguments
    (required unless bracketed); ``None`` for a command that shows no usage."""
    usage = _USAGE.search(info.description)
    if usage is None or usage["name"] != info.name:
        return None
    arguments = [
        mt.PromptArgument(name=name, required=not optional)
        for optional, name in _USAGE_ARG.findall(usage["args"])
    ]
    return info.description[: usage.start()], arguments


def prompt_of(info: ap.CommandInfo) -> mt.Prompt:
    """An MCP prompt from a slash command: a hosted MCP prompt's own arguments,
    else one optional argument, the command line."""
    declared = prompt_arguments_of(info)
    if declared is not None:
        description, arguments = declared
        return mt.Prompt(name=info.name, description=description, arguments=arguments)
    return mt.Prompt(
        name=info.name,
        description=info.description,
        arguments=[
            mt.PromptArgument(name=ARGS, description=f"what follows /{info.name}", required=False)
        ],
    )


def command_text(arguments: dict[str, str] | None) -> str:
    """The text after ``/NAME`` for a prompt's arguments: ``args`` as it is,
    the others as ``name=value`` pairs (quoted as a shell would), which is how
    zotd gives a hosted MCP prompt its arguments."""
    arguments = dict(arguments or {})
    text = arguments.pop(ARGS, "")
    pairs = [f"{name}={shlex.quote(value)}" for name, value in arguments.items()]
    return " ".join([*pairs, text] if text else pairs)


def structured_of(res: ap.CallData) -> dict[str, Any] | None:
    """A result's structured content, when it is a JSON object (MCP's
    ``structuredContent`` can only be one)."""
    if isinstance(res.structured_content, msgspec.Raw):
        with contextlib.suppress(ValueError):
            value = json.loads(bytes(res.structured_content))
            if isinstance(value, dict):
                return value
    return None


def content_of(block: object) -> mt.TextContent | mt.ImageContent:
    """An MCP content item from a zot content block."""
    if isinstance(block, ImageBlock):
        return mt.ImageContent(type="image", data=block.data, mime_type=block.mime_type)
    if isinstance(block, TextBlock):
        return mt.TextContent(type="text", text=block.text)
    return mt.TextContent(type="text", text=str(block))


def prompt_result(name: str, res: ap.InvokeData) -> mt.GetPromptResult:
    """What ``invoke_command`` answered, as a prompt: messages for the host to use.

    Raises:
        MCPError: the extension reported an error.
    """
    if res.error:
        raise MCPError(code=mt.INTERNAL_ERROR, message=f"/{name} failed: {res.error}")
    text = mt.TextContent(type="text", text="")
    role: Literal["user", "assistant"]
    if res.action == "prompt":
        text.text = res.prompt
        role = "user"
    elif res.action == "insert":
        text.text = res.insert
        role = "user"
    elif res.action == "display":
        text.text = res.display
        role = "assistant"
    else:
        return mt.GetPromptResult(description=f"/{name} ({res.action})", messages=[])
    return mt.GetPromptResult(
        description=f"/{name} ({res.action})",
        messages=[mt.PromptMessage(role=role, content=text)],
    )
