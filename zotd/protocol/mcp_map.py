"""MCP's tools, prompts and results in zot's terms: pure functions.

zotd is the MCP client of an extension whose manifest says ``"kind":
"mcp"``; these functions turn what the server lists and answers into the
frames a zot extension would have sent (``register_tool``,
``register_command``, ``tool_result``, ``command_response``,
``tool_progress``), so the rest of the daemon cannot tell the two kinds
apart. Sans-IO: the ``mcp`` package's types in, msgspec Structs out.

* A tool keeps its name, description and ``inputSchema`` (its ``schema``);
  ``outputSchema`` is its ``output_schema``; ``title`` and ``annotations``
  are kept for ``list_tools``.
* A result's text and image content are blocks as they are; audio, resource
  links, embedded resources and kinds zot has no block for become text
  placeholders that name them (an embedded text resource keeps its text);
  ``structuredContent`` and ``isError`` carry over.
* A prompt is a slash command: ``/name`` with its arguments parsed from
  the command's text (:func:`prompt_arguments`); the prompt's messages are
  the ``prompt`` action's text.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import mcp_types as mt
import msgspec

from . import extension as ep

__all__ = [
    "PromptArgumentsError",
    "blocks",
    "command_response",
    "error_result",
    "prompt_arguments",
    "register_command",
    "register_tool",
    "tool_progress",
    "tool_result",
]

_encode = msgspec.json.Encoder().encode


def register_tool(tool: mt.Tool) -> ep.RegisterTool:
    """``tool`` (from ``tools/list``) as the ``register_tool`` frame it stands for."""
    return ep.RegisterTool(
        name=tool.name,
        description=tool.description or tool.title or "",
        schema=msgspec.Raw(_encode(tool.input_schema)),
        output_schema=(
            msgspec.Raw(_encode(tool.output_schema))
            if tool.output_schema is not None
            else msgspec.UNSET
        ),
        title=tool.title or "",
        annotations=(
            msgspec.Raw(
                _encode(tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json"))
            )
            if tool.annotations is not None
            else msgspec.UNSET
        ),
    )


def register_command(prompt: mt.Prompt) -> ep.RegisterCommand:
    """``prompt`` (from ``prompts/list``) as a slash command: its description,
    and how to give its arguments (``/review file=a.py [focus=...]``)."""
    description = prompt.description or prompt.title or f"MCP prompt {prompt.name}"
    usage = " ".join(
        f"{a.name}=..." if a.required else f"[{a.name}=...]" for a in prompt.arguments or []
    )
    if usage:
        description = f"{description} (/{prompt.name} {usage})"
    return ep.RegisterCommand(name=prompt.name, description=description)


class PromptArgumentsError(ValueError):
    """The text after a prompt's slash command does not give its arguments;
    the message says what it takes."""


def prompt_arguments(prompt: mt.Prompt, text: str) -> dict[str, str]:
    """The arguments of ``prompt`` given by the text after its command.

    ``name=value`` pairs (shell quoting: ``topic="two words"``) name
    arguments; other words fill the arguments not named yet, in order, the
    last of them taking the rest of the text. A prompt with one argument
    takes the whole text as it is.

    Raises:
        PromptArgumentsError: an unknown name, a name given twice, more
            words than arguments, or a required argument missing.
    """
    declared = list(prompt.arguments or [])
    names = [a.name for a in declared]
    text = text.strip()
    if len(declared) == 1 and text and not text.startswith(f"{names[0]}="):
        return {names[0]: text}
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise PromptArgumentsError(f"/{prompt.name}: {exc}: {_usage(prompt)}") from None
    given: dict[str, str] = {}
    loose: list[str] = []
    for word in words:
        key, eq, value = word.partition("=")
        if eq and key in names:
            if key in given:
                raise PromptArgumentsError(f"/{prompt.name}: {key} is given twice")
            given[key] = value
        elif eq and key.isidentifier():
            raise PromptArgumentsError(f"/{prompt.name} has no argument {key!r}: {_usage(prompt)}")
        else:
            loose.append(word)
    free = [n for n in names if n not in given]
    if loose:
        if not free:
            raise PromptArgumentsError(f"/{prompt.name}: too many words: {_usage(prompt)}")
        for name, word in zip(free[:-1], loose, strict=False):
            given[name] = word
        rest = loose[len(free) - 1 :]
        if rest:
            given[free[-1]] = " ".join(rest)
    missing = [a.name for a in declared if a.required and a.name not in given]
    if missing:
        raise PromptArgumentsError(f"/{prompt.name} needs {', '.join(missing)}: {_usage(prompt)}")
    return given


def _usage(prompt: mt.Prompt) -> str:
    args = " ".join(
        f"{a.name}=..." if a.required else f"[{a.name}=...]" for a in prompt.arguments or []
    )
    return f"/{prompt.name} {args}".rstrip() if args else f"/{prompt.name} takes no arguments"


def blocks(content: Sequence[mt.ContentBlock]) -> list[ep.Block]:
    """MCP content as zot's blocks: text and images as they are, the rest
    as text placeholders naming what they were."""
    return [_block(item) for item in content]


def _block(item: object) -> ep.Block:
    if isinstance(item, mt.TextContent):
        return ep.TextBlock(item.text)
    if isinstance(item, mt.ImageContent):
        return ep.ImageBlock(mime_type=item.mime_type, data=item.data)
    if isinstance(item, mt.AudioContent):
        size = len(item.data) * 3 // 4
        return ep.TextBlock(f"[audio content: {item.mime_type}, about {size} bytes]")
    if isinstance(item, mt.ResourceLink):
        return ep.TextBlock(f"[resource link: {item.name} <{item.uri}>]")
    if isinstance(item, mt.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, mt.TextResourceContents):
            return ep.TextBlock(f"[resource <{resource.uri}>]\n{resource.text}")
        mime = resource.mime_type or "application/octet-stream"
        return ep.TextBlock(f"[resource <{resource.uri}>: {mime}, binary]")
    kind = getattr(item, "type", type(item).__name__)
    return ep.TextBlock(f"[{kind} content]")


def tool_result(rid: str, result: mt.CallToolResult) -> ep.ToolResult:
    """A ``tools/call`` result as the ``tool_result`` for request ``rid``."""
    structured = (
        msgspec.Raw(_encode(result.structured_content))
        if result.structured_content is not None
        else msgspec.UNSET
    )
    content = blocks(result.content)
    if not content and structured is not msgspec.UNSET:  # (older hosts read only content)
        content = [ep.TextBlock(bytes(structured).decode())]
    return ep.ToolResult(
        id=rid, content=content, is_error=bool(result.is_error), structured_content=structured
    )


def error_result(rid: str, message: str) -> ep.ToolResult:
    """A failed ``tools/call`` (an MCP error, or a result that broke its
    ``outputSchema``) as a tool error the model reads."""
    return ep.ToolResult(id=rid, content=[ep.TextBlock(message)], is_error=True)


def command_response(rid: str, result: mt.GetPromptResult) -> ep.CommandResponse:
    """A ``prompts/get`` result as the ``command_response`` for ``rid``: a
    ``prompt`` action with the messages' text (each non-text part a placeholder)."""
    parts = []
    for message in result.messages:
        block = _block(message.content)
        parts.append(block.text if isinstance(block, ep.TextBlock) else "[image content]")
    return ep.CommandResponse(id=rid, action="prompt", prompt="\n\n".join(parts))


def tool_progress(
    rid: str, progress: float, total: float | None, message: str | None
) -> ep.ToolProgress:
    """A progress notification for call ``rid`` as its ``tool_progress``."""
    return ep.ToolProgress(id=rid, message=message or "", progress=progress, total=total)
