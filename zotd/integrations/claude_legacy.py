"""The first ``zot hook`` commands, one per hook (``pre-tool-use``, ``session-start``,
``post-tool-use``, ``stop``), as adapters of their own.

Sans-IO. Each takes only its own events and answers as it always has
(``post-tool-use`` reports a call that ran as ``tool_call``; nothing adds
context), so the settings written for them keep working; ``zot hook
--agent claude`` (:data:`.claude_hooks.ADAPTER`) answers every event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol import agent as ap
from . import claude_hooks as hooks
from .hook_model import Answer, BadPayload, Guard, Hook, Observe


class Route:
    """One of the first commands: ``events`` read as ``kind``, told to zot by ``hook``."""

    def __init__(
        self,
        name: str,
        events: tuple[str, ...],
        kind: type[hooks.Payload],
        hook: Callable[[Any], Hook],
    ) -> None:
        self.name = name
        self.events = events
        self._kind = kind
        self._hook = hook

    def read(self, data: bytes) -> Hook:
        # Whatever is wrong with the payload, it was sent to this command's event.
        guarded = self.name == "pre-tool-use"
        known = Hook(
            agent="claude",
            event=self.events[0],
            guard=Guard(tool_name="", tool_args={}) if guarded else None,
        )
        try:
            return self._hook(hooks.parse(data, self._kind, self.events))
        except BadPayload as exc:
            raise BadPayload(str(exc), known) from None

    def answer(self, hook: Hook, verdict: ap.InterceptData | None, *, approve: bool) -> Answer:
        if verdict is not None:
            return Answer(stdout=hooks.pre_tool_use_answer(verdict, approve=approve))
        return Answer()

    def unguarded(self, hook: Hook, why: str, *, fail_closed: bool) -> Answer:
        if hook.guard is not None:
            return hooks.ADAPTER.unguarded(hook, why, fail_closed=fail_closed)
        return Answer(stderr=f"{why}; {', '.join(o.event for o in hook.observe)} not sent")


def _observe(event: str, fields: Callable[[Any], dict[str, Any]]) -> Callable[[Any], Hook]:
    def hook(p: hooks.Payload) -> Hook:
        told = Observe(event=event, fields=fields(p))
        return Hook(
            agent="claude",
            event=p.hook_event_name,
            cwd=p.cwd,
            session_id=p.session_id,
            observe=(told,),
        )

    return hook


def _guard(p: hooks.ToolUse) -> Hook:
    guard = Guard(
        tool_name=hooks.zot_tool_name(p.tool_name), tool_args=p.tool_input, tool_id=p.tool_use_id
    )
    return Hook(
        agent="claude", event=p.hook_event_name, cwd=p.cwd, session_id=p.session_id, guard=guard
    )


#: The commands, by name.
ROUTES = {
    "pre-tool-use": Route("pre-tool-use", ("PreToolUse",), hooks.ToolUse, _guard),
    "session-start": Route(
        "session-start",
        ("SessionStart",),
        hooks.SessionStart,
        _observe("session_start", hooks.session_start_event),
    ),
    "post-tool-use": Route(
        "post-tool-use",
        ("PostToolUse", "PostToolUseFailure"),
        hooks.ToolUse,
        _observe("tool_call", hooks.tool_call_event),
    ),
    "stop": Route("stop", ("Stop",), hooks.Payload, _observe("turn_end", hooks.turn_end_event)),
}
