"""One agent hook in zot's terms: what it asks of zotd, and what goes back.

Sans-IO. Every agent zot answers hooks for (Claude Code, Codex CLI, Gemini
CLI) has an adapter (:class:`Adapter`) that reads its payload into a
:class:`Hook` and turns zotd's outcome into that agent's :class:`Answer`;
``zot hook --agent NAME`` (the CLI) does the reading, the talking and the
printing, the same for all of them.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from ..protocol import agent as ap


class BadPayload(Exception):
    """The bytes are not a payload this adapter reads; the message says why.

    ``hook`` is what the adapter could make out of them all the same (the
    event, with a placeholder :class:`Guard` if it is one that guards a
    call), so that the CLI can answer as that event answers when it cannot
    ask zotd (``--fail-closed`` denies); ``None`` when not even the event
    is known.
    """

    def __init__(self, message: str, hook: Hook | None = None) -> None:
        super().__init__(message)
        self.hook = hook


class Guard(msgspec.Struct, kw_only=True, frozen=True):
    """A tool call to put to the workspace's guards (``intercept``)."""

    #: The name a zot guard sees (the agent's shell tool is zot's ``bash``).
    tool_name: str
    tool_args: dict[str, Any]
    tool_id: str = ""


class Observe(msgspec.Struct, kw_only=True, frozen=True):
    """A zot lifecycle event to emit (``emit_event``), with its fields."""

    event: str
    fields: dict[str, Any] = msgspec.field(default_factory=dict)


class Hook(msgspec.Struct, kw_only=True, frozen=True):
    """One hook invocation, read from the agent's payload."""

    #: The adapter's name (``claude``, ``codex``, ``gemini``).
    agent: str
    #: The agent's own name for the hook event (``PreToolUse``, ``BeforeTool``).
    event: str
    #: The workspace to join (the payload's working directory).
    cwd: str = ""
    session_id: str = ""
    #: Put to the guards, when the hook can block or rewrite a tool call.
    guard: Guard | None = None
    #: Emitted to the workspace's observers, in order, after the guards.
    observe: tuple[Observe, ...] = ()
    #: When the guards block ``guard``, also emit what zot emits for a call
    #: its guards refused (:func:`blocked_events`), after ``observe``: the
    #: agent runs no tool, so no later hook of it reports the call.
    report_block: bool = False
    #: Ask the guards of ``before_agent_start`` (with ``system_prompt: ""``)
    #: what the workspace's extensions add to a system prompt, and pass
    #: their reply to :meth:`Adapter.answer` as ``verdict`` (only when
    #: ``guard`` is None): an agent whose hook can add context to a session
    #: gets it from there.
    context: bool = False


class Answer(msgspec.Struct, kw_only=True, frozen=True):
    """What the hook process prints and how it exits."""

    #: Printed on stdout as one JSON object; nothing is printed when None.
    stdout: dict[str, Any] | None = None
    exit_code: int = 0
    #: Printed on stderr (a note for the user, or the reason for a block).
    stderr: str = ""


class Adapter(Protocol):
    """One agent's hook format."""

    #: The value of ``zot hook --agent`` (``claude``, ``codex``, ``gemini``).
    name: str
    #: The agent's hook event names this adapter reads (what ``zot integrate``
    #: registers).
    events: tuple[str, ...]

    def read(self, data: bytes) -> Hook:
        """The hook in ``data`` (the payload on stdin).

        Raises:
            BadPayload: empty, not JSON, an event this adapter does not read,
                or fields that do not fit.
        """
        ...

    def answer(self, hook: Hook, verdict: ap.InterceptData | None, *, approve: bool) -> Answer:
        """The answer once zotd was asked: ``verdict`` is the guards' (None
        when ``hook.guard`` is None; with ``hook.context``, the reply to
        ``before_agent_start``); ``approve`` asks for an explicit allow
        where no guard objects."""
        ...

    def unguarded(self, hook: Hook, why: str, *, fail_closed: bool) -> Answer:
        """The answer when zotd could not be asked or refused (``why``): a
        guarded call is denied with ``fail_closed``, else left to the agent
        (never allowed); an observed event is only noted."""
        ...


def blocked_events(hook: Hook, verdict: ap.InterceptData) -> tuple[Observe, ...]:
    """What zot emits for a tool call its guards refused: ``permission_decision``
    (``denied`` by ``policy`` before execution, with the guard's reason) and
    the call's terminal ``tool_result`` (``blocked``, not executed, the
    reason as its error text). Nothing unless ``verdict`` blocks
    ``hook.guard``."""
    guard = hook.guard
    if guard is None or not verdict.block:
        return ()
    call = {"tool_id": guard.tool_id, "tool_name": guard.tool_name, "session_id": hook.session_id}
    decision = call | {
        "decision": "denied",
        "source": "policy",
        "stage": "pre_execution",
        "reason": verdict.reason,
    }
    result = call | {
        "tool_args": guard.tool_args,
        "status": "blocked",
        "executed": False,
        "result": {"content": [{"type": "text", "text": verdict.reason}], "is_error": True},
    }
    return (
        Observe(event="permission_decision", fields=decision),
        Observe(event="tool_result", fields=result),
    )
