"""Claude Code's hooks in zot's terms: payloads in, zot events out, answers back.

Sans-IO: plain functions over bytes and Structs. ``zot hook --agent claude``
(the CLI) reads stdin, talks to zotd and prints; :data:`ADAPTER` says what a
payload means (:mod:`.claude_events`) and what to answer.

Claude Code runs a command at points of its agent loop with a JSON payload
on stdin (``session_id``, ``cwd``, ``hook_event_name`` and the event's own
fields), and reads its answer from the exit code and stdout: on exit 0, a
JSON object (``hookSpecificOutput`` with the event's decision fields, and
the common ``systemMessage``, ``continue``...); exit 2 is a blocking error
(stderr is the reason); any other a non-blocking one (stderr is shown, the
agent goes on). Its ``Bash`` is zot's ``bash`` (same argument,
``command``); other tools keep their names.
"""

from __future__ import annotations

from typing import Any

from ..protocol import agent as ap
from .claude_events import (
    EVENTS,
    TOOL_NAMES,
    P,
    Payload,
    SessionStart,
    ToolUse,
    parse,
    read,
    zot_tool_name,
)
from .hook_model import Answer, BadPayload, Hook

__all__ = [
    "ADAPTER",
    "TOOL_NAMES",
    "BadPayload",
    "P",
    "Payload",
    "SessionStart",
    "ToolUse",
    "parse",
    "zot_tool_name",
]


def decision(decision: str, reason: str) -> dict[str, Any]:
    """A PreToolUse answer carrying a permission decision."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def refusal(code: str, message: str) -> str:
    """Why there is no verdict, when zotd answered ``intercept`` with an error.

    Such an answer is never a verdict: the caller denies the call or leaves
    it unguarded (a non-blocking error), never allows it.
    """
    return f"zotd could not ask the guards: {message} ({code})"


def pre_tool_use_answer(verdict: ap.InterceptData, *, approve: bool) -> dict[str, Any]:
    """What PreToolUse answers for the guards' verdict.

    A block is ``deny`` with the guard's reason; arguments a guard rewrote
    are ``ask`` (``allow`` with ``approve``) with the new input as
    ``updatedInput``, so the user sees the call as it will run; otherwise
    no decision (``{}``: the agent's own permission rules apply), or
    ``allow`` with ``approve``.
    """
    if verdict.block:
        return decision("deny", verdict.reason)
    if verdict.args is not None:
        answer = decision(
            "allow" if approve else "ask",
            f"input rewritten by zot's guards: {', '.join(verdict.rewritten_by)}",
        )
        answer["hookSpecificOutput"]["updatedInput"] = verdict.args
        return answer
    if approve:
        return decision("allow", "no guard of zot objects")
    return {}


def session_start_event(p: SessionStart) -> dict[str, Any]:
    """The fields of zot's ``session_start`` event for a SessionStart payload."""
    return {"session_id": p.session_id, "source": p.source}


def tool_call_event(p: ToolUse) -> dict[str, Any]:
    """The fields of zot's ``tool_call`` event for a tool call that ran (PostToolUse)."""
    return {
        "tool_id": p.tool_use_id,
        "tool_name": zot_tool_name(p.tool_name),
        "tool_args": p.tool_input,
        "session_id": p.session_id,
    }


def turn_end_event(p: Payload) -> dict[str, Any]:
    """The fields of zot's ``turn_end`` event for a Stop payload (the agent has answered)."""
    return {"stop": "end_turn", "session_id": p.session_id}


# --- the adapter ------------------------------------------------------------------------


def permission_answer(behavior: str, **decision: Any) -> dict[str, Any]:
    """A PermissionRequest answer: ``behavior`` allow (with ``updatedInput``)
    or deny (with ``message``), on the user's behalf."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": behavior, **decision},
        }
    }


def permission_request_answer(
    verdict: ap.InterceptData, tool_input: dict[str, Any], *, approve: bool
) -> dict[str, Any]:
    """What PermissionRequest answers for the guards' verdict.

    A block is ``deny`` with the guard's reason as ``message``. A rewrite
    cannot be shown in the dialog Claude Code is about to open, so it is
    ``allow`` with ``updatedInput`` only with ``approve``, and otherwise a
    ``deny`` that says why (the PreToolUse hook asks the user about the
    rewritten call: register both). Input the guards left as it was is no
    rewrite. Otherwise no decision (``{}``: the dialog is shown), or
    ``allow`` with ``approve``.
    """
    if verdict.block:
        return permission_answer("deny", message=verdict.reason)
    rewritten = verdict.args is not None and verdict.args != tool_input
    if rewritten and approve:
        return permission_answer("allow", updatedInput=verdict.args)
    if rewritten:
        names = ", ".join(verdict.rewritten_by)
        return permission_answer(
            "deny",
            message=f"zot's guards rewrote this call ({names}), and the permission dialog "
            "cannot show the rewrite; run zot hook on PreToolUse to be asked about it",
        )
    if approve:
        return permission_answer("allow")
    return {}


def session_context(verdict: ap.InterceptData | None) -> dict[str, Any] | None:
    """A SessionStart answer adding what the workspace's extensions add to a
    system prompt (their ``before_agent_start`` reply to an empty one) to
    Claude Code's context; None when they add nothing."""
    added = verdict.system_prompt if verdict is not None else ""
    if not isinstance(added, str) or not added.strip():
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": added.strip(),
        }
    }


class ClaudeAdapter:
    """Claude Code's hooks (``zot hook --agent claude``)."""

    name = "claude"
    events = EVENTS

    def read(self, data: bytes) -> Hook:
        return read(data)

    def answer(self, hook: Hook, verdict: ap.InterceptData | None, *, approve: bool) -> Answer:
        guard = hook.guard
        if hook.event == "PreToolUse" and verdict is not None:
            return Answer(stdout=pre_tool_use_answer(verdict, approve=approve))
        if hook.event == "PermissionRequest" and verdict is not None and guard is not None:
            return Answer(
                stdout=permission_request_answer(verdict, guard.tool_args, approve=approve)
            )
        if hook.event == "SessionStart":
            return Answer(stdout=session_context(verdict))
        # Nothing is the right answer to the rest: no context added, no
        # block of a prompt, a stop or a compaction.
        return Answer()

    def unguarded(self, hook: Hook, why: str, *, fail_closed: bool) -> Answer:
        if hook.guard is not None:
            if not fail_closed:
                # A non-blocking error: the call is left to Claude Code's own
                # permission rules, never allowed.
                return Answer(exit_code=1, stderr=f"{why}; the call is not guarded")
            reason = f"{why}; denied (--fail-closed)"
            if hook.event == "PermissionRequest":
                return Answer(stdout=permission_answer("deny", message=reason), stderr=why)
            return Answer(stdout=decision("deny", reason), stderr=why)
        lost = ", ".join(o.event for o in hook.observe) or "nothing"
        note = f"{why}; {lost} not sent"
        if hook.event == "SessionStart":
            # Shown to the user once a session: zot is not in it.
            return Answer(stdout={"systemMessage": note}, stderr=note)
        return Answer(stderr=note)


ADAPTER = ClaudeAdapter()
