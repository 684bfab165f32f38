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
    """The bytes are not a payload this adapter reads; the message says why."""


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
        when ``hook.guard`` is None); ``approve`` asks for an explicit allow
        where no guard objects."""
        ...

    def unguarded(self, hook: Hook, why: str, *, fail_closed: bool) -> Answer:
        """The answer when zotd could not be asked or refused (``why``): a
        guarded call is denied with ``fail_closed``, else left to the agent
        (never allowed); an observed event is only noted."""
        ...
