"""A ``tool_result`` with content blocks of a type zotd does not know.

Current zot keeps such a block as a text placeholder naming its type
instead of failing the whole result; so does zotd. The strict decoder of
:mod:`.extension` (the fast path) refuses the frame, and the inbox then
asks :func:`salvage` for it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from . import extension as ep


class _Loose(msgspec.Struct, kw_only=True, gc=False):
    type: str
    id: ep.Id
    content: list[msgspec.Raw] = []
    is_error: bool = False
    structured_content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    activate_tools: list[str] = []


_loose = msgspec.json.Decoder(_Loose)
_block = msgspec.json.Decoder(ep.Block)
_any = msgspec.json.Decoder(dict[str, Any])


def placeholder(kind: str, extension: str) -> ep.TextBlock:
    """The text that stands for a block of the unknown type ``kind``."""
    return ep.TextBlock(f'[unknown block type "{kind}" from extension {extension}]')


def salvage(line: bytes, extension: str) -> ep.ToolResult | None:
    """``line`` as a ``tool_result`` whose blocks of unknown types are text
    placeholders; ``None`` if it is wrong in another way (a malformed
    frame, a known block with bad fields)."""
    try:
        loose = _loose.decode(line)
    except msgspec.DecodeError:
        return None
    if loose.type != "tool_result":
        return None
    blocks: list[ep.Block] = []
    for raw in loose.content:
        try:
            blocks.append(_block.decode(raw))
            continue
        except msgspec.ValidationError:
            pass
        try:
            kind = _any.decode(raw).get("type")
        except msgspec.DecodeError:
            return None
        if not isinstance(kind, str) or kind in ("text", "image"):
            return None  # a known block, badly made: that is an error
        blocks.append(placeholder(kind, extension))
    return ep.ToolResult(
        id=loose.id,
        content=blocks,
        is_error=loose.is_error,
        structured_content=loose.structured_content,
        activate_tools=loose.activate_tools,
    )
