"""The extension protocol's vocabulary: its closed sets, the base of every
frame, content blocks and the panel a frame may carry. Re-exported by
:mod:`.extension`, which callers import (``ep.TextBlock``, ``ep.EVENTS``).
"""

from __future__ import annotations

import msgspec

#: Lifecycle events: the reference's five and the nine current zot added.
EVENTS = frozenset(
    {
        "session_start",
        "session_end",
        "user_prompt_submit",
        "turn_start",
        "turn_end",
        "tool_call",
        "tool_result",
        "tool_confirmation_requested",
        "permission_decision",
        "assistant_message",
        "pre_compact",
        "post_compact",
        "subagent_start",
        "subagent_stop",
    }
)

#: Events that may be intercepted. The reference intercepts only ``tool_call``;
#: current zot also ``turn_start``, ``assistant_message`` and
#: ``before_agent_start`` (asked one guard after another, see
#: :class:`EventInterceptResponse`).
INTERCEPTABLE = frozenset({"tool_call", "turn_start", "assistant_message", "before_agent_start"})

#: Values of ``command_response.action``: the reference's four, and current
#: zot's ``open_panel`` and ``tool_prompt``.
ACTIONS = frozenset({"prompt", "insert", "display", "noop", "open_panel", "tool_prompt"})

#: Values of ``register_tool.exposure`` (current zot); a tool with another is skipped.
EXPOSURES = frozenset({"direct", "codemode", "deferred", "model-only"})

#: Values of ``register_tool.replay`` (current zot); another counts as ``never``.
REPLAYS = frozenset({"never", "safe", "idempotent", "reconcile"})

#: Capabilities in an extension's ``hello`` that change what the host sends it.
TOOL_CANCEL = "tool_cancel"
CALL_TOOL = "call_tool"

#: Values of ``notify.level``.
LEVELS = frozenset({"info", "success", "warn", "error"})

Id = str | int

EMPTY_OBJECT = msgspec.Raw(b"{}")


class Frame(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    """The base of every frame: tagged by ``type``, keyword-only."""


# --- content blocks (tool results) --------------------------------------------


class TextBlock(msgspec.Struct, tag_field="type", tag="text", omit_defaults=True, gc=False):
    """``{"type":"text","text":"..."}``; ``format`` (current zot) is a display
    hint: ``"markdown"`` renders it as Markdown, anything else as plain text."""

    text: str
    format: str = ""


class ImageBlock(msgspec.Struct, tag_field="type", tag="image", gc=False):
    """``{"type":"image","mime_type":"image/png","data":"<base64>"}``"""

    mime_type: str
    data: str


Block = TextBlock | ImageBlock


class PanelSpec(msgspec.Struct, gc=False):
    """A panel an extension opens: from a ``command_response`` (beyond the
    reference) or with an ``open_panel`` frame (current zot)."""

    id: str
    title: str = ""
    lines: list[str] = []
    footer: str = ""
