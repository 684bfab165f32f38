"""What a workspace answers: the request logic of the agent protocol.

Listing, commands, tool calls, events and intercepts, as methods of
:class:`Requests`, the base of :class:`~zotd.runtime.workspace.Workspace`
(which owns the state they read: its extensions, registry, panels and
settings, declared below). Lifetime (starting, restarting, reloading and
stopping extensions) stays in the workspace.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

import msgspec
import trio

from ..model import hints
from ..model.config import Config
from ..model.errors import RequestError
from ..model.registry import Registry
from ..protocol import agent as ap
from ..protocol import extension as ep
from ..protocol.frames import is_json_object
from . import lookup, system_prompt
from .audit_trail import AuditTrail, recording
from .callers import Caller, ServedCall
from .extension import Extension
from .guard_order import Orders
from .intercept import Decision, Outcome
from .panels import Panels, Subscriber

log = logging.getLogger(__name__)

#: The interceptable events' names, encoded once (the `event` of a payload).
_EVENT_NAMES = {name: msgspec.Raw(msgspec.json.encode(name)) for name in ep.INTERCEPTABLE}

#: The caller of a call nobody made: no agent, no UI.
_NOBODY = Caller()

#: The tool error of an interactive tool called by a caller without UI (zot's words).
_NOT_INTERACTIVE = (
    "tool %r is interactive: interactive extension tools require an interactive host "
    "(an agent whose hello lists the `interactive` capability)"
)


def _nothing() -> None:
    pass


class Requests:
    """The requests of one workspace's agents (see :mod:`zotd.runtime.session`)."""

    root: Path
    extensions: dict[str, Extension]
    registry: Registry
    panels: Panels
    _config: Config
    #: Guards that have rewritten an event (see zotd.runtime.intercept).
    _rewriters: set[str]
    #: The last ``sequence`` given to an event (see :meth:`stamp`).
    sequence: int
    #: Where every intercept decision is recorded (the hub's; none in process tests).
    audit: AuditTrail | None = None

    @functools.cached_property
    def _cwd(self) -> msgspec.Raw:
        return msgspec.Raw(msgspec.json.encode(str(self.root)))

    @functools.cached_property
    def _orders(self) -> Orders:
        """The guards of each event in order (sorted again only when they change)."""
        return Orders(self._priority)

    def info_of(self, ext: Extension) -> ap.ExtensionInfo:
        """An extension as ``list_extensions`` shows it."""
        commands = [c.name for c in self.registry.commands_of(ext.name)]
        tools = [t.name for t in self.registry.tools_of(ext.name)]
        why = self.why_not(ext)
        hint = why.clause() if why is not None else ""
        return ext.info(commands, tools, self.registry.shadowed_of(ext.name), hint)

    def list_extensions(self) -> ap.ExtensionsData:
        """Every extension, by name."""
        return ap.ExtensionsData(
            extensions=[self.info_of(self.extensions[n]) for n in sorted(self.extensions)]
        )

    def list_commands(self) -> ap.CommandsData:
        return ap.CommandsData(
            commands=self.registry.command_infos(), shadowed=self.registry.shadowed("command")
        )

    def list_tools(self) -> ap.ToolsData:
        return ap.ToolsData(
            tools=self.registry.tool_infos(), shadowed=self.registry.shadowed("tool")
        )

    def why_not(self, ext: Extension) -> hints.Why | None:
        """Why ``ext`` serves nothing now and what to do, or ``None`` if it is ready."""
        return lookup.why_not(ext, self.root)

    def missing(self, kind: str, name: str) -> RequestError:
        """The error for a command or tool (``kind``) no running extension holds."""
        return lookup.missing(self.registry, self.extensions, self.root, kind, name)

    async def invoke_command(
        self, name: str, args: str, client: Subscriber | None = None
    ) -> ap.InvokeData:
        """Runs ``/name`` (matched whatever its case); bounded by
        ``command_timeout``. A panel the extension opens belongs to
        ``client``: its frames go there. The reply is the extension's
        ``command_response`` (see :func:`_invoke_data`).

        The deadline covers queueing the frame (a full stdin waits) and the
        wait for the reply. Cancellation (the agent's ``cancel``, a hangup)
        withdraws the request: the extension is sent ``cancel`` if it has
        not answered, a later reply is dropped and counted, and
        :exc:`trio.Cancelled` propagates. A reply read before the
        cancellation has opened its panel already.

        Raises:
            RequestError: no such command (``not_found``, ``unavailable``),
                ``timeout``, or the extension is not running, dies or
                answers nonsense (``extension_failed``).
        """
        name = name.removeprefix("/")
        cmd = self.registry.command(name)  # whatever its case, as zot matches it
        if cmd is None:
            raise self.missing("command", name)
        name = cmd.name  # the extension's spelling, in command_invoked too
        ext = self.extensions[cmd.extension]
        args = args.strip()
        timeout = self._config.command_timeout

        def opened(reply: ep.CommandResponse) -> None:
            # Now, in the reader: the extension may redraw the panel in its
            # very next frame.
            if reply.open_panel is not None and client is not None:
                self.panels.open(ext.name, reply.open_panel.id, client)

        with trio.move_on_after(timeout) as scope:
            reply = await ext.request(
                lambda rid: ep.encode(ep.CommandInvoked(id=rid, name=name, args=args)),
                ep.CommandResponse,
                on_reply=opened,
            )
        if scope.cancelled_caught:
            raise RequestError(
                ap.ErrorCode.TIMEOUT, f"/{name} ({ext.name}) did not answer within {timeout:g} s"
            )
        return _invoke_data(ext.name, name, reply)

    def panel_input(
        self, client: Subscriber, req: ap.PanelKey | ap.PanelResize | ap.PanelClose
    ) -> None:
        """Passes a client's key, resize or close on to the panel's extension
        (:meth:`Panels.input`).

        Raises:
            RequestError: the client has no such panel open, or (without
                ``extension``) more than one; the extension's input is full.
        """
        self.panels.input(client, req)

    def start_call(
        self,
        name: str,
        args: msgspec.Raw,
        timeout_s: float | None,
        done: Callable[[ap.CallData | RequestError], None],
        *,
        alone: bool = True,
        progress: Callable[[str, ep.ToolProgress], None] | None = None,
        caller: Caller | None = None,
    ) -> Callable[[], None]:
        """Starts a tool call, bounded by ``timeout_s`` or ``tool_timeout``.

        ``alone=False`` says other calls are being started in the same breath
        (see :meth:`Extension.ask`). ``progress(extension, frame)`` gets the
        call's ``tool_progress`` frames. ``caller`` says who the call is for
        (see :mod:`zotd.runtime.callers`): an interactive tool (current zot)
        has no deadline but ``timeout_s`` for an agent that can show UI,
        fails at once, with a tool error, for an agent that cannot, and
        keeps its deadline for an extension's call.

        ``done`` gets the result, or the error, exactly once (from the task
        that reads the extension's reply, or from its expiry task; at once,
        before this returns, for an interactive tool that cannot run),
        unless the call is withdrawn first with the function this returns.

        Raises:
            RequestError: no such tool, bad arguments, the extension is not running.
        """
        tool = self.registry.tools.get(name)
        if tool is None:
            raise self.missing("tool", name)
        if not is_json_object(args):
            raise RequestError(ap.ErrorCode.BAD_REQUEST, "`args` must be a JSON object")
        if timeout_s is not None and timeout_s <= 0:
            raise RequestError(ap.ErrorCode.BAD_REQUEST, "`timeout_s` must be positive")
        ext = self.extensions[tool.extension]
        caller = caller if caller is not None else _NOBODY
        timeout: float | None = timeout_s if timeout_s is not None else self._config.tool_timeout
        if tool.interactive:
            if caller.interactive:
                timeout = timeout_s  # the user takes the time it takes
            elif not caller.origin:  # an agent without UI: nobody could answer it
                done(ap.CallData(ext.name, [ep.TextBlock(_NOT_INTERACTIVE % name)], True))
                return _nothing
            # (an extension's call: within its own deadline, as in zot)
        call = ServedCall(ext, name, args, timeout, done, caller, progress)
        call.rid = rid = ext.ask(
            call.frame,
            ep.ToolResult,
            call.on_reply,
            timeout=timeout,
            alone=alone,
            progress=None if progress is None else call.on_progress,
        )
        ext.serving[rid] = call
        return call.withdraw

    async def call_tool(self, name: str, args: msgspec.Raw, timeout_s: float | None) -> ap.CallData:
        """:meth:`start_call`, awaited: returns the result or raises its error."""
        result: list[ap.CallData | RequestError] = []
        finished = trio.Event()

        def done(outcome: ap.CallData | RequestError) -> None:
            result.append(outcome)
            finished.set()

        withdraw = self.start_call(name, args, timeout_s, done)
        try:
            await finished.wait()
        finally:
            withdraw()
        if isinstance(result[0], RequestError):
            raise result[0]
        return result[0]

    def stamp(self, payload: dict[str, msgspec.Raw]) -> dict[str, msgspec.Raw]:
        """``payload`` with what zotd adds to every event (current zot's common
        payload): ``cwd`` (the workspace, unless the agent gave one) and
        ``sequence`` (strictly increasing in this workspace, shared by events
        and intercepts)."""
        self.sequence += 1
        stamped = {**payload, "sequence": msgspec.Raw(b"%d" % self.sequence)}
        if "cwd" not in payload:
            stamped["cwd"] = self._cwd
        return stamped

    def emit_event(self, event: str, payload: dict[str, msgspec.Raw]) -> ap.EmitData:
        """Queues the event for every running subscriber; never waits on one."""
        line = ep.encode_event(self.stamp(payload))
        delivered = [
            ext.name
            for ext in self.extensions.values()
            if event in ext.events and ext.send_nowait(line)
        ]
        return ap.EmitData(delivered=delivered)

    async def intercept(self, event: str, payload: dict[str, msgspec.Raw]) -> ap.InterceptData:
        """Asks the extensions intercepting ``event`` whether it may go ahead.

        Their verdicts count in order of priority, then name; the first
        block wins and rewrites chain (see :mod:`zotd.runtime.intercept`). The whole
        decision is bounded by ``intercept_timeout``; a guard that has not
        answered by then, or that fails, counts as allow (reference,
        "event_intercept_response"). Rewritten tool arguments must fit the
        tool's schema (for an extension's tool), else the call is blocked.
        Raises ``RequestError`` (``frame_too_large``) only when the event, as
        sent or as rewritten, would not fit in a guard's frame: never allow
        what the guards could not read.

        Cancellation (the agent's ``cancel``, a hangup) withdraws every
        question still in flight (each guard still thinking is sent
        ``cancel``; its late answer is dropped), then :exc:`trio.Cancelled`
        propagates; no verdict is given (nor recorded). Every other decision,
        a failed one too, goes to the audit trail (:mod:`.audit_trail`).
        """
        payload = self.stamp({"event": _EVENT_NAMES[event], **payload})
        guards = self._orders.of(
            event,
            [e for e in self.extensions.values() if event in e.intercepts and e.running],
            self._config,
        )
        config, out = self._config, Outcome()
        with recording(self.audit, self.root, event, payload, out):
            if event == "before_agent_start":
                return await system_prompt.decide(
                    guards, payload, config.intercept_timeout, config.max_frame_bytes, out
                )
            if not guards:
                await trio.lowlevel.checkpoint()
                return ap.InterceptData(block=False)
            decision = Decision(
                guards,
                event,
                payload,
                self._rewriters,
                self.registry.tools,
                max_frame=config.max_frame_bytes,
                outcome=out,
            )
            await decision.run(config.intercept_timeout)
        if out.blocked_by:
            return ap.InterceptData(block=True, reason=out.reason, extension=out.blocked_by)
        return ap.InterceptData(
            block=False, args=out.args, text=out.text, rewritten_by=out.rewritten_by
        )

    def _priority(self, name: str) -> int:
        manifest = self.extensions[name].found.manifest
        return self._config.priority_for(name, manifest.priority if manifest else 0)


def _invoke_data(extension: str, command: str, reply: ep.CommandResponse) -> ap.InvokeData:
    """The ``invoke_command`` reply for an extension's ``command_response``.

    Current zot's actions come through: ``open_panel`` (its panel was
    opened as the reply was read) and ``tool_prompt``, whose ``tool_name``
    and ``tool_args`` (``{}`` if absent) are set for it alone. A reply that
    cannot be carried out (an unknown action, ``open_panel`` without a
    panel, ``tool_prompt`` without a tool name or with arguments that are
    not a JSON object) becomes ``noop`` with an ``error`` that says why,
    unless the extension gave an error of its own.
    """
    data = ap.InvokeData(
        extension=extension,
        action=reply.action,
        prompt=reply.prompt,
        insert=reply.insert,
        display=reply.display,
        error=reply.error,
        open_panel=reply.open_panel,
    )
    wrong = _unusable(reply)
    if wrong:
        data.action = "noop"
        data.error = reply.error or f"/{command} ({extension}) answered {wrong}"
    elif reply.action == "tool_prompt":
        data.tool_name = reply.tool_name
        data.tool_args = reply.tool_args if reply.tool_args is not msgspec.UNSET else _NO_ARGS
    return data


#: The arguments of a ``tool_prompt`` that gave none.
_NO_ARGS = msgspec.Raw(b"{}")


def _unusable(reply: ep.CommandResponse) -> str:
    """What makes ``reply`` impossible to carry out, in words, or ``""``."""
    if reply.action not in ep.ACTIONS:
        return f"with unknown action {reply.action!r}"
    if reply.action == "open_panel" and reply.open_panel is None:
        return "with action 'open_panel' but no `open_panel` panel"
    if reply.action != "tool_prompt":
        return ""
    if not reply.tool_name:
        return "with action 'tool_prompt' but no `tool_name`"
    if reply.tool_args is not msgspec.UNSET and not is_json_object(reply.tool_args):
        return f"with action 'tool_prompt' whose `tool_args` for {reply.tool_name!r} are not a JSON object"
    return ""
