"""Gemini CLI's hooks in zot's terms: payloads in, zot events out, answers back.

Sans-IO. ``zot hook --agent gemini`` (the CLI) reads stdin, talks to zotd
and prints; :data:`ADAPTER` says what a payload means and what to answer.

What Gemini CLI sends and reads, from its documentation (the "Hooks
reference", "Gemini CLI hooks" and "Writing hooks" pages of the Gemini CLI
docs) and its source (``packages/core/src/hooks/types.ts``,
``hookRunner.ts``, ``scheduler/hook-utils.ts``):

- Hooks are registered in ``settings.json`` (the project's
  ``.gemini/settings.json`` or the user's ``~/.gemini/settings.json``),
  ``"hooks": {EVENT: [{"matcher": REGEX, "hooks": [{"type": "command",
  "command": ..., "timeout": MS}]}]}``. A command gets one JSON object on
  stdin.
- Every payload has ``session_id``, ``transcript_path``, ``cwd``,
  ``hook_event_name`` and ``timestamp``. Events: ``SessionStart``
  (``source``: startup, resume, clear), ``SessionEnd`` (``reason``: exit,
  clear, logout, prompt_input_exit, other), ``BeforeAgent`` (``prompt``),
  ``AfterAgent`` (``prompt``, ``prompt_response``, ``stop_hook_active``),
  ``BeforeTool`` (``tool_name``, ``tool_input``, ``mcp_context``,
  ``original_request_name``), ``AfterTool`` (the same and
  ``tool_response``: ``llmContent``, ``returnDisplay``, ``error``),
  ``PreCompress`` (``trigger``: auto, manual), ``Notification``,
  ``BeforeModel``, ``AfterModel``, ``BeforeToolSelection`` (the model's
  request and response: nothing of zot's). BeforeTool payloads carry no id
  of the call.
- Tool names are Gemini's (``run_shell_command``, ``read_file``,
  ``write_file``, ``replace``, ...; MCP tools ``mcp_<server>_<tool>``).
  ``run_shell_command`` (``command``, and optionally ``description``,
  ``dir_path``, ``is_background``) is zot's ``bash``: the same
  ``command``; the other arguments are passed on as they are.
- Exit 0: stdout is the answer, one JSON object (when stdout is empty,
  stderr is read instead, as plain text: a message for the user). Exit 2
  blocks (stderr is the reason); any other exit is a warning, and the agent
  goes on.
- BeforeTool answers ``{"decision": "deny", "reason": R}`` to block (R goes
  to the model as the tool's error; ``"block"`` is an alias), ``"ask"`` to
  make Gemini CLI ask the user whatever its policy says, and
  ``hookSpecificOutput`` ``{"hookEventName": "BeforeTool", "tool_input":
  ARGS}`` to run the call with ARGS *merged over* the model's arguments.
  ``"allow"`` blocks nothing and approves nothing: Gemini CLI's own
  confirmation still applies. ``continue: false`` would stop the whole
  agent loop (zot never answers it).
- SessionStart may add ``hookSpecificOutput.additionalContext``; every event
  takes ``systemMessage`` (shown to the user).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ..protocol import agent as ap

# The JSON reading and the result text are the same as Codex's.
from .codex_hooks import convert, decode, result_text
from .hook_model import Answer, BadPayload, Guard, Hook, Observe

#: Gemini CLI's tool names that are zot's built-in tools with the same arguments.
TOOL_NAMES = {"run_shell_command": "bash"}

#: Gemini CLI's SessionEnd reasons that are zot's ``session_switch`` (a new
#: session follows); the others are a ``shutdown``.
SWITCHES = {"clear"}


def zot_tool_name(name: str) -> str:
    """The name a zot guard sees for Gemini CLI's tool ``name``."""
    return TOOL_NAMES.get(name, name)


class Payload(msgspec.Struct, kw_only=True):
    """The fields every Gemini CLI hook payload has that zot reads."""

    hook_event_name: str
    cwd: str = ""
    session_id: str = ""


class SessionStart(Payload, kw_only=True):
    source: str = ""


class SessionEnd(Payload, kw_only=True):
    reason: str = ""


class BeforeAgent(Payload, kw_only=True):
    prompt: str


class AfterAgent(Payload, kw_only=True):
    prompt: str = ""
    prompt_response: str = ""


class ToolUse(Payload, kw_only=True):
    """BeforeTool, AfterTool."""

    tool_name: str
    tool_input: dict[str, Any]
    tool_response: dict[str, Any] | None = None


class Compress(Payload, kw_only=True):
    trigger: str = ""


def _hook(p: Payload, *observe: Observe, **more: Any) -> Hook:
    return Hook(
        agent="gemini",
        event=p.hook_event_name,
        cwd=p.cwd,
        session_id=p.session_id,
        observe=observe,
        **more,
    )


def _event(event: str, p: Payload, **fields: Any) -> Observe:
    return Observe(event=event, fields=fields | {"session_id": p.session_id})


def _call(p: ToolUse) -> dict[str, Any]:
    return {"tool_id": "", "tool_name": zot_tool_name(p.tool_name), "tool_args": p.tool_input}


def _before_tool(p: ToolUse) -> Hook:
    guard = Guard(tool_name=zot_tool_name(p.tool_name), tool_args=p.tool_input)
    return _hook(p, _event("tool_call", p, **_call(p)), guard=guard, report_block=True)


def _after_tool(p: ToolUse) -> Hook:
    response = p.tool_response or {}
    error = response.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, dict) else error
        status, result = "failed", result_text(message, is_error=True)
    else:
        status, result = "completed", result_text(response.get("llmContent"))
    done = _event("tool_result", p, **_call(p), status=status, executed=True, result=result)
    return _hook(p, done)


def _session_start(p: SessionStart) -> Hook:
    return _hook(p, _event("session_start", p, source=p.source), context=True)


def _session_end(p: SessionEnd) -> Hook:
    reason = "session_switch" if p.reason in SWITCHES else "shutdown"
    return _hook(p, _event("session_end", p, reason=reason, gemini_reason=p.reason))


def _before_agent(p: BeforeAgent) -> Hook:
    return _hook(p, _event("user_prompt_submit", p, text=p.prompt))


def _after_agent(p: AfterAgent) -> Hook:
    said: tuple[Observe, ...] = ()
    if p.prompt_response:
        said = (_event("assistant_message", p, text=p.prompt_response),)
    return _hook(p, *said, _event("turn_end", p, stop="end_turn"))


def _pre_compress(p: Compress) -> Hook:
    return _hook(p, _event("pre_compact", p, trigger=p.trigger))


#: Each Gemini CLI hook event zot answers: its payload, and what it is in zot's terms.
READERS: dict[str, tuple[type[Any], Callable[[Any], Hook]]] = {
    "SessionStart": (SessionStart, _session_start),
    "BeforeAgent": (BeforeAgent, _before_agent),
    "BeforeTool": (ToolUse, _before_tool),
    "AfterTool": (ToolUse, _after_tool),
    "PreCompress": (Compress, _pre_compress),
    "AfterAgent": (AfterAgent, _after_agent),
    "SessionEnd": (SessionEnd, _session_end),
}

EVENTS = tuple(READERS)


def read(data: bytes) -> Hook:
    """The hook in ``data``, of any event in :data:`EVENTS`.

    Raises:
        BadPayload: empty, not JSON, an event zot does not answer, or fields
            that do not fit (then with the event's hook, so that a guarded
            call can be denied).
    """
    fields = decode(data)
    event = fields.get("hook_event_name")
    if not isinstance(event, str):
        raise BadPayload("the payload has no hook_event_name (a string)")
    if event not in READERS:
        raise BadPayload(
            f"zot does not answer Gemini CLI's {event!r} hooks "
            f"(it answers {', '.join(EVENTS)}): remove the hook from the settings"
        )
    kind, reader = READERS[event]
    known = Hook(
        agent="gemini",
        event=event,
        cwd=cwd if isinstance(cwd := fields.get("cwd"), str) else "",
        guard=Guard(tool_name="", tool_args={}) if event == "BeforeTool" else None,
    )
    hook: Hook = reader(convert(fields, kind, known))
    return hook


# --- answers ------------------------------------------------------------------------------


def deny(reason: str) -> dict[str, Any]:
    """A BeforeTool answer that blocks the call; ``reason`` goes to the model."""
    return {"decision": "deny", "reason": reason}


def before_tool_answer(verdict: ap.InterceptData, *, approve: bool) -> dict[str, Any]:
    """What BeforeTool answers for the guards' verdict.

    A block is ``deny``; a rewrite is the new input as
    ``hookSpecificOutput.tool_input``, with ``ask`` (the user sees the call
    as it will run) or, with ``approve``, ``allow``; otherwise no decision
    (``{}``), or ``allow`` with ``approve`` (which leaves Gemini CLI's own
    confirmation as it is).
    """
    if verdict.block:
        return deny(verdict.reason)
    if verdict.args is not None:
        return {
            "decision": "allow" if approve else "ask",
            "reason": f"input rewritten by zot's guards: {', '.join(verdict.rewritten_by)}",
            "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": verdict.args},
        }
    if approve:
        return {"decision": "allow"}
    return {}


def session_context(verdict: ap.InterceptData | None) -> dict[str, Any]:
    """SessionStart's answer: what the extensions add to a system prompt, as
    context for the model (``{}`` when they add nothing)."""
    added = verdict.system_prompt if verdict is not None else ""
    if not isinstance(added, str) or not added.strip():
        return {}
    return {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": added.strip()}
    }


class GeminiAdapter:
    """Gemini CLI's hooks (``zot hook --agent gemini``)."""

    name = "gemini"
    events = EVENTS

    def read(self, data: bytes) -> Hook:
        return read(data)

    def answer(self, hook: Hook, verdict: ap.InterceptData | None, *, approve: bool) -> Answer:
        if hook.event == "BeforeTool" and verdict is not None:
            return Answer(stdout=before_tool_answer(verdict, approve=approve))
        if hook.event == "SessionStart":
            return Answer(stdout=session_context(verdict))
        # {} for the rest: no context, no block of a prompt or a response
        # (stdout is answered, so that nothing else is read as a message).
        return Answer(stdout={})

    def unguarded(self, hook: Hook, why: str, *, fail_closed: bool) -> Answer:
        if hook.guard is not None:
            if not fail_closed:
                # A warning for Gemini CLI: shown, and the call goes on under
                # its own confirmation rules (never allowed by zot).
                return Answer(exit_code=1, stderr=f"{why}; the call is not guarded")
            return Answer(stdout=deny(f"{why}; denied (--fail-closed)"), stderr=why)
        lost = ", ".join(o.event for o in hook.observe) or "nothing"
        note = f"{why}; {lost} not sent"
        return Answer(stdout={"systemMessage": note}, stderr=note)


ADAPTER = GeminiAdapter()
