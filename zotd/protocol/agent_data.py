"""Agent protocol v1: the ``data`` of successful replies, and the entries they list.

One ``*Data`` Struct per request (``list_extensions`` answers
:class:`ExtensionsData`, ``call_tool`` :class:`CallData`, ...), with the
entries they hold (:class:`ExtensionInfo`, :class:`CommandInfo`,
:class:`ToolInfo`, ...). Re-exported by :mod:`zotd.protocol.agent`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .extension import Block, PanelSpec


class Shadowed(msgspec.Struct):
    """A command (``/name``) or tool (``name``) an extension registered but
    does not hold: ``held_by`` is the extension (or ``zot`` for a built-in)
    that holds it, ``reason`` says why, in words."""

    name: str
    held_by: str
    reason: str


class PassedOver(msgspec.Struct):
    """Another copy of an extension, found in the workspace and not used.

    ``scope`` and ``dir`` say which copy; ``why`` is ``untrusted``,
    ``disabled`` or ``failed`` for a project-local copy that cannot run
    (it does not hide the user's own copy: the one listed runs instead),
    or ``hidden`` for a copy that a higher-precedence one (the one listed)
    hides; ``reason`` says it in words (for ``untrusted``, with what to do:
    ``zot ext trust`` makes that copy take over)."""

    scope: str
    dir: str
    why: str
    reason: str


class ShadowedInfo(msgspec.Struct):
    """A registration that lost its name (``list_commands``, ``list_tools``):
    ``extension`` registered ``name`` (a command's without the ``/``), but
    ``held_by`` holds it (an extension, or ``zot`` for a built-in or
    reserved name); ``reason`` says why, in words."""

    name: str
    description: str
    extension: str
    held_by: str
    reason: str


class CommandInfo(msgspec.Struct):
    """One slash command."""

    name: str
    description: str
    extension: str


class ToolInfo(msgspec.Struct, omit_defaults=True):
    """One tool; ``schema`` is its JSON Schema object.

    The rest is current zot's metadata, as the extension registered it
    (left out when it gave none): see ``register_tool``.
    """

    name: str
    description: str
    schema: Any
    extension: str
    output_schema: Any = msgspec.UNSET
    namespace: str = ""
    namespace_description: str = ""
    namespace_instructions: str = ""
    exposure: str = ""
    deferred: bool = False
    interactive: bool = False
    replay: str = ""
    #: An MCP server's: its tool's display title, and its annotations
    #: (``readOnlyHint``, ``destructiveHint``, ...), as the server gave them.
    title: str = ""
    annotations: Any = msgspec.UNSET


class HelloData(msgspec.Struct, gc=False):
    """``data`` of ``hello``."""

    protocol_version: int
    zotd_version: str
    workspace: str | None
    pid: int


class PingData(msgspec.Struct, gc=False):
    """``data`` of ``ping``."""

    pong: bool = True


class Metrics(msgspec.Struct):
    """What one extension's process has done, in ``list_extensions`` (see
    :mod:`zotd.model.metrics`). Counts are of tool calls and commands sent
    to it (intercept questions are counted in ``intercepts``), since its
    first start in this workspace (restarts do not reset them; a reload
    does); latencies are over its last :data:`~zotd.model.metrics.WINDOW`
    answers."""

    #: Tool calls and commands it answered (a result or its own error), or
    #: that failed before it could (it exited, was stuck, answered nonsense).
    calls: int = 0
    #: Of those, the ones it answered with an error (a tool result with
    #: ``is_error``, a command response with an ``error``) or that failed.
    errors: int = 0
    #: Requests it did not answer within their deadline (not in ``calls``).
    timeouts: int = 0
    #: Requests withdrawn before it answered: by the agent (``cancel``, a
    #: hangup) or by zotd shutting down (not in ``calls``).
    cancels: int = 0
    #: Replies for requests no longer pending (dropped): ``ExtensionInfo.late_replies``
    #: (which a restart resets).
    late_replies: int = 0
    #: Latency of its answers, milliseconds, from the request's sending to
    #: its answer, over the recent window (``None`` before any answer).
    p50_ms: float | None = None
    p95_ms: float | None = None
    #: Its intercept answers by kind: ``allow``, ``block``, ``rewrite``,
    #: ``silent`` (no answer in time), ``crashed`` (failed or exited first).
    intercepts: dict[str, int] = {}
    #: Its process's resident memory, bytes (its own, not its children's);
    #: ``None`` while it has no process up, or if it cannot be read.
    rss_bytes: int | None = None
    #: Its process's CPU use, percent of one core, since the last look (the
    #: first look: since it started); ``None`` like ``rss_bytes``.
    cpu_percent: float | None = None
    #: CPU seconds its process has used, user and system (``None`` like ``rss_bytes``).
    cpu_s: float | None = None


class HandshakeInfo(msgspec.Struct):
    """How its last start's handshake went (``zot ext doctor`` shows it)."""

    #: Seconds from spawn to its ``hello`` (``None``: none came).
    hello_s: float | None = None
    #: Seconds from spawn to ready (``None``: not ready).
    ready_s: float | None = None
    #: Whether zotd took it as ready without a ``ready`` frame (the reference's
    #: auto-ready after its registrations, or an MCP server's ``initialize``).
    auto_ready: bool = False
    #: Frames it sent before its ``hello`` or otherwise out of order, by type.
    out_of_order: list[str] = []


class ExtensionInfo(msgspec.Struct):
    """One extension in ``list_extensions``."""

    name: str
    version: str
    description: str
    language: str
    scope: str
    dir: str
    enabled: bool
    state: str
    pid: int | None
    restarts: int
    #: Why it was last restarted ("" if never).
    restart_reason: str
    exit_code: int | None
    commands: list[str]
    tools: list[str]
    events: list[str]
    intercepts: list[str]
    log: str
    last_error: str
    log_tail: list[str]
    #: What its ``hello`` listed under ``capabilities``.
    capabilities: list[str] = []
    #: Replies it sent for requests no longer pending (dropped).
    late_replies: int = 0
    #: Problems with its manifest that do not stop it (an unknown key, ...).
    warnings: list[str] = []
    #: Seconds since its process started, while it runs; else ``None``.
    uptime_s: float | None = None
    #: Names it registered that another holds: ``/cmd`` or ``tool``, with why.
    shadowed: list[Shadowed] = []
    #: While it serves nothing (not ``ready``): why, and what to do about it,
    #: in the words of the errors (``weather is disabled; run `zot ext enable
    #: weather```); else "".
    hint: str = ""
    #: The other copies of this name found and not used (this one is), with why.
    passed_over: list[PassedOver] = []
    #: The skills it serves (their ``list_skills`` names), from its manifest's ``skills``.
    skills: list[str] = []
    #: What it speaks: ``zot`` or ``mcp`` (an MCP server zotd is the client of).
    kind: str = "zot"
    #: ``workspace`` (one process per project directory) or ``shared`` (one
    #: for the whole daemon).
    sharing: str = "workspace"
    #: How many workspaces use this process (1 unless ``shared``).
    workspaces: int = 1
    #: Calls, errors, latency, intercept answers, memory and CPU.
    metrics: Metrics = msgspec.field(default_factory=Metrics)
    #: Its last start's handshake (``None`` before any start).
    handshake: HandshakeInfo | None = None


class ExtensionsData(msgspec.Struct):
    """``data`` of ``list_extensions``."""

    extensions: list[ExtensionInfo]


class CommandsData(msgspec.Struct, omit_defaults=True):
    """``data`` of ``list_commands``: the commands by name, and the
    registrations hidden because another holds the name (left out when
    there are none)."""

    commands: list[CommandInfo]
    shadowed: list[ShadowedInfo] = []


class ToolsData(msgspec.Struct, omit_defaults=True):
    """``data`` of ``list_tools``: the tools by name, and the registrations
    hidden because another holds the name (left out when there are none)."""

    tools: list[ToolInfo]
    shadowed: list[ShadowedInfo] = []


class InvokeData(msgspec.Struct, gc=False):
    """``data`` of ``invoke_command``: the extension's ``command_response``."""

    extension: str
    action: str
    prompt: str = ""
    insert: str = ""
    display: str = ""
    error: str = ""
    #: A panel the command opened (``panel_render`` and ``panel_close``
    #: pushes follow on this connection), else ``None``.
    open_panel: PanelSpec | None = None
    #: With ``action`` ``tool_prompt``: the tool to run (through the agent's
    #: guards) before the model's turn on ``prompt``, and its arguments.
    tool_name: str | msgspec.UnsetType = msgspec.UNSET
    tool_args: Any = msgspec.UNSET


class CallData(msgspec.Struct, gc=False):
    """``data`` of ``call_tool``: the extension's ``tool_result``.

    ``structured_content`` and ``activate_tools`` (current zot) are left out
    unless the extension sent them.
    """

    extension: str
    content: list[Block]
    is_error: bool = False
    structured_content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    activate_tools: list[str] | msgspec.UnsetType = msgspec.UNSET


class CancelData(msgspec.Struct, gc=False):
    """``data`` of ``cancel``: whether the call was still in flight (else it
    had been answered already, and nothing changed)."""

    cancelled: bool


class EmitData(msgspec.Struct, gc=False):
    """``data`` of ``emit_event``: the extensions the event was queued for."""

    delivered: list[str]


class InterceptData(msgspec.Struct, gc=False):
    """``data`` of ``intercept``. ``extension`` names the guard that blocked.

    ``args`` (a ``tool_call``'s rewritten arguments) and ``text`` (an
    ``assistant_message``'s replaced text) are ``None`` unless a guard
    changed them; ``rewritten_by`` names those guards in order.
    """

    block: bool
    reason: str = ""
    extension: str = ""
    args: Any = None
    text: str | None = None
    rewritten_by: list[str] = []
    #: ``before_agent_start`` only: the system prompt the guards left
    #: (``rewritten_by`` names who changed it); left out for other events.
    system_prompt: str | msgspec.UnsetType = msgspec.UNSET


class ExtChangeData(msgspec.Struct):
    """``data`` of ``ext_install``, ``ext_remove``, ``ext_enable``, ``ext_disable``.

    ``extension`` is what the caller's workspace now runs under that name
    (``None`` after a removal that revealed nothing, or if it is not in the
    caller's workspace).
    """

    name: str
    dir: str
    scope: str
    extension: ExtensionInfo | None


class ExtReloadData(msgspec.Struct):
    """``data`` of ``ext_reload`` (the reloaded extensions of the caller's
    workspace) and of ``ext_trust`` (its project-local extensions)."""

    extensions: list[ExtensionInfo]


class SkillInfo(msgspec.Struct):
    """One skill: ``name`` is ``<extension in kebab-case>:<skill>``, ``path``
    its ``SKILL.md``, ``description`` from its front matter."""

    name: str
    extension: str
    path: str
    description: str


class SkillsData(msgspec.Struct):
    """``data`` of ``list_skills``."""

    skills: list[SkillInfo]


class EnvData(msgspec.Struct):
    """``data`` of ``ext_env``: the variables the extension gets beyond the
    allowlist (names only, never values): from its manifest (``manifest``),
    from ``zotd.toml`` (``config``) and from ``zot ext env --allow``
    (``allowed``), less ``denied``; ``variables`` is what it gets now
    (present in the daemon's environment)."""

    name: str
    variables: list[str]
    manifest: list[str] = []
    config: list[str] = []
    allowed: list[str] = []
    denied: list[str] = []


class LogsData(msgspec.Struct):
    """``data`` of ``ext_logs``."""

    path: str
    lines: list[str]


class WorkspaceStatus(msgspec.Struct):
    """One workspace in ``status``."""

    path: str
    clients: int
    extensions: int
    ready: int
    #: Extension processes of its own running now (shared ones are in
    #: :attr:`StatusData.shared`).
    processes: int = 0
    #: Its own extensions' metrics, by name (shared ones' are in :attr:`StatusData.shared`).
    metrics: dict[str, Metrics] = {}


class SharedStatus(msgspec.Struct):
    """One shared extension in ``status``: one process for every workspace using it."""

    name: str
    dir: str
    state: str
    pid: int | None
    #: The workspaces using it (their paths).
    workspaces: list[str]
    #: Its metrics, for every workspace using it.
    metrics: Metrics = msgspec.field(default_factory=Metrics)


class StatusData(msgspec.Struct):
    """``data`` of ``status``."""

    pid: int
    zotd_version: str
    socket: str
    uptime_s: float
    workspaces: list[WorkspaceStatus]
    #: The shared extensions (``scope: shared``), by name.
    shared: list[SharedStatus] = []

    @property
    def processes(self) -> int:
        """Extension processes running in all: the workspaces' own and the shared ones."""
        return sum(ws.processes for ws in self.workspaces) + sum(
            1 for s in self.shared if s.pid is not None
        )


class Empty(msgspec.Struct, gc=False):
    """``data`` of requests with nothing to say (``subscribe``, ``shutdown``)."""
