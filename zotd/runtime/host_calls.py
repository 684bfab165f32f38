"""Current zot's ext -> host ``call_tool``: an extension calls a tool.

An extension whose ``hello`` listed ``call_tool`` may send
``{"type":"call_tool","id":..,"name":..,"args":{..},"parent_id":..}``;
it gets exactly one host ``tool_result`` of the same ``id`` back, unless it
gives the call up itself (``call_tool_cancel``) or stops. The rules (the
chain, the cap, the refusals) are :mod:`zotd.model.call_chain`'s; this
carries them out:

* ``name`` a tool of an extension in the workspace: the workspace's
  ``tool_call`` guards are asked first, like for an agent's call (the
  payload carries ``origin_extension``; a block is an error result with its
  reason; rewritten arguments are used), then the tool is called
  (:meth:`Requests.start_call <.requests.Requests.start_call>`) for a
  :class:`~.callers.Caller` with the agent at the root of the chain, no UI,
  the calling extension as its origin and the tools above it.
* any other name goes to an agent as a ``host_tool_call`` push (to the
  agent at the root of the chain if its ``hello`` listed ``host_tools``,
  else to the first joined agent that did), answered with its
  ``host_tool_result`` request (:meth:`HostCalls.on_result`); with no such
  agent, an error result says so.

Each call is one task in the workspace's nursery (:class:`HostCall`, at most
:data:`~zotd.model.call_chain.MAX_OUTSTANDING` per extension), in a cancel
scope whose deadline is :func:`~zotd.model.call_chain.time_limit` of
``tool_timeout`` (60 s at most): the guards and the tool both count. What
ends a call early, all without waiting:

* ``call_tool_cancel``, or the calling extension stopping: given up, no
  reply (the extension tool's call is withdrawn, so its extension is sent
  ``cancel``/``tool_cancel``; a forwarded call is forgotten, and the
  agent's late answer gets ``not_found``);
* the end of the call named as ``parent_id`` (:meth:`Served.end
  <.callers.Served.end>`), or the agent it was forwarded to leaving: an
  error result.

Results are capped (:func:`~zotd.model.call_chain.cap`) and queued on the
extension's stdin (``send_nowait``): nothing here blocks the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import trio

from ..model import call_chain
from ..model.call_chain import Kind, Parent
from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep
from ..protocol.frames import is_json_object
from .callers import HOST_TOOLS, Caller, Served
from .panels import Subscriber

if TYPE_CHECKING:
    from .dispatch import Connection
    from .extension import Extension
    from .workspace import Workspace

log = logging.getLogger(__name__)


def _nothing() -> None:
    pass


def _json(value: str) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(value))


class HostCall(msgspec.Struct, eq=False):
    """One ``call_tool`` of an extension, from its request to its reply.

    Attributes:
        ext: the extension that made it.
        id: its ``id`` (the reply's).
        name: the tool it calls.
        args: the tool's arguments (a JSON object).
        caller: who the tool is called for (the extension, under its chain).
        parent: the call it was made under (``parent_id``), if any.
        scope: its task's cancel scope; its deadline is the call's.
        call_id: zotd's id of it, for the guards and for an agent.
        agent: the agent it was forwarded to, if any.
    """

    ext: Extension
    id: ep.Id
    name: str
    args: msgspec.Raw
    caller: Caller
    parent: Served | None
    scope: trio.CancelScope
    call_id: str
    agent: Subscriber | None = None
    #: Set once it has its outcome (below), or was given up.
    settled: trio.Event = msgspec.field(default_factory=trio.Event)
    content: list[ep.Block] = msgspec.field(default_factory=list)
    is_error: bool = False
    structured: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    #: Given up: no reply.
    silent: bool = False
    #: Withdraws the extension tool's call (see Requests.start_call).
    withdraw: Callable[[], None] = _nothing

    def answer(
        self,
        content: list[ep.Block],
        is_error: bool = False,
        structured: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET,
    ) -> None:
        """Its outcome (the first one counts)."""
        if self.settled.is_set():
            return
        self.content, self.is_error, self.structured = content, is_error, structured
        self.settled.set()

    def fail(self, message: str) -> None:
        """An error result saying ``message``."""
        self.answer([ep.TextBlock(message)], True)

    def end(self, message: str) -> None:
        """Ends it now with an error result (its task wakes and replies)."""
        self.fail(message)
        self.scope.cancel()

    def give_up(self) -> None:
        """Ends it now without a reply."""
        self.silent = True
        self.settled.set()
        self.scope.cancel()

    def parent_ended(self) -> None:
        """``on_end`` of the call it was made under."""
        tool = self.parent.tool if self.parent is not None else "?"
        self.end(f"call_tool {self.name!r} ended: the tool call it was made for ({tool}) ended")


class HostCalls:
    """The ``call_tool`` requests of one workspace's extensions.

    Args:
        workspace: whose tools and agents serve them.
    """

    def __init__(self, workspace: Workspace) -> None:
        self._ws = workspace
        #: The calls in flight, by extension, by their ``id``.
        self._calls: dict[Extension, dict[ep.Id, HostCall]] = {}
        #: The calls forwarded to an agent, by ``call_id``.
        self._forwarded: dict[str, HostCall] = {}
        #: The joined agents whose ``hello`` listed ``host_tools``, oldest first.
        self._agents: dict[Subscriber, None] = {}
        self._serial = 0

    # --- the extension's side -----------------------------------------------------

    def on_frame(self, ext: Extension, frame: ep.CallToolRequest | ep.CallToolCancel) -> None:
        """An extension's ``call_tool`` or ``call_tool_cancel``."""
        if isinstance(frame, ep.CallToolCancel):
            call = self._calls.get(ext, {}).get(frame.id)
            if call is not None:  # (an unknown or finished id is ignored, as zot does)
                call.give_up()
            return
        calls = self._calls.get(ext, {})
        served = ext.serving.get(frame.parent_id) if isinstance(frame.parent_id, str) else None
        verdict = call_chain.vet(
            frame.id,
            frame.name,
            parent_id=frame.parent_id,
            parent=None if served is None else Parent(served.tool, served.caller.chain),
            capable=ep.CALL_TOOL in ext.capabilities,
            serving=bool(ext.serving),
            in_flight=calls,
            outstanding=len(calls),
        )
        if verdict.kind is Kind.DROP:
            ext.note(verdict.reason)
            return
        if verdict.kind is Kind.REFUSE:
            self._send(ext, frame.id, frame.name, [ep.TextBlock(verdict.reason)], True)
            return
        if not is_json_object(frame.args):
            reason = "call_tool refused: `args` must be a JSON object"
            self._send(ext, frame.id, frame.name, [ep.TextBlock(reason)], True)
            return
        limit = call_chain.time_limit(self._ws.config.tool_timeout)
        self._serial += 1
        call = HostCall(
            ext,
            frame.id,
            frame.name,
            frame.args,
            _caller_under(served, ext.name, verdict.chain),
            served,
            trio.CancelScope(deadline=trio.current_time() + limit),
            f"{ext.name}/{self._serial}",
        )
        try:
            self._ws.start_soon(self._run, call, limit)
        except RuntimeError:  # the workspace is not running (any more)
            reason = "call_tool refused: the workspace is stopping"
            self._send(ext, frame.id, frame.name, [ep.TextBlock(reason)], True)
            return
        self._calls.setdefault(ext, {})[frame.id] = call
        if served is not None:
            served.on_end.append(call.parent_ended)

    def extension_stopped(self, name: str) -> None:
        """The extension stopped: its calls still running are given up."""
        for ext in [e for e in self._calls if e.name == name and not e.running]:
            for call in list(self._calls.pop(ext).values()):
                call.give_up()

    def extension_left(self, ext: Extension) -> None:
        """A shared extension no longer uses this workspace (it is stopping):
        its calls running here are answered now, with an error result, and
        given up (their tasks end with the workspace)."""
        for call in list(self._calls.pop(ext, {}).values()):
            message = f"call_tool {call.name!r} failed: the workspace it ran in stopped"
            self._send(ext, call.id, call.name, [ep.TextBlock(message)], True)
            call.withdraw()
            call.give_up()

    async def _run(self, call: HostCall, limit: float) -> None:
        """Carries ``call`` out and replies; never raises but ``Cancelled``
        (the workspace stopping: its extensions are gone then)."""
        try:
            with call.scope:
                if call.settled.is_set():  # ended before its task started
                    pass
                elif call.name in self._ws.registry.tools:
                    await self._call_extension(call, limit)
                else:
                    await self._forward(call)
            # (nothing, unless its deadline passed before it had an outcome)
            call.fail(f"call_tool {call.name!r} did not finish within {limit:g} s")
        except Exception as exc:  # a bug of ours: the extension still gets its reply
            log.exception("extension %s: call_tool %r failed", call.ext.name, call.name)
            call.fail(f"call_tool {call.name!r} failed in zotd: {exc!r}")
        finally:
            self._forget(call)
        if not call.silent:
            self._send(call.ext, call.id, call.name, call.content, call.is_error, call.structured)

    async def _call_extension(self, call: HostCall, limit: float) -> None:
        payload = {
            "tool_id": _json(call.call_id),
            "tool_name": _json(call.name),
            "tool_args": call.args,
            "origin_extension": _json(call.ext.name),
        }
        try:
            verdict = await self._ws.intercept("tool_call", payload)
        except RequestError as exc:
            call.fail(f"call_tool {call.name!r}: {exc.message}")
            return
        if verdict.block:
            reason = verdict.reason or "no reason given"
            call.fail(f"tool {call.name!r} was blocked by {verdict.extension}: {reason}")
            return
        args = call.args
        if isinstance(verdict.args, msgspec.Raw):
            args = verdict.args
        elif verdict.args is not None:
            args = msgspec.Raw(msgspec.json.encode(verdict.args))

        def done(outcome: ap.CallData | RequestError) -> None:
            if isinstance(outcome, RequestError):
                call.fail(outcome.message)
            else:
                call.answer(outcome.content, outcome.is_error, outcome.structured_content)

        try:
            # Its own deadline a little past the call's: the call's scope ends it first.
            call.withdraw = self._ws.start_call(
                call.name, args, limit + 1.0, done, caller=call.caller
            )
        except RequestError as exc:
            call.fail(exc.message)
            return
        await call.settled.wait()

    # --- the agents' side ---------------------------------------------------------

    async def _forward(self, call: HostCall) -> None:
        agent = self._agent_for(call.caller)
        if agent is None:
            call.fail(
                f"no tool {call.name!r}: no extension in this workspace has it, and no agent "
                "that runs tools of its own (`host_tools` in its hello) is connected"
            )
            return
        call.agent = agent
        self._forwarded[call.call_id] = call
        # `parent_id`: the agent's own request, which only the agent that made it knows.
        parent = call.caller.request_id if agent is call.caller.client else None
        push = ap.HostToolCallPush(call.call_id, call.ext.name, call.name, call.args, parent)
        agent.deliver(ap.encode(push))
        await call.settled.wait()

    def _agent_for(self, caller: Caller) -> Subscriber | None:
        """The agent at the root of the chain if it runs host tools, else the
        first joined agent that does, else ``None``."""
        if caller.client is not None and caller.client in self._agents:
            return caller.client
        return next(iter(self._agents), None)

    def on_result(self, client: Subscriber, req: ap.HostToolResult) -> ap.Empty:
        """An agent's ``host_tool_result``.

        Raises:
            RequestError: no such call is waiting (``not_found``: unknown,
                answered, given up, past its deadline), or it was sent to
                another connection (``bad_request``).
        """
        call = self._forwarded.get(req.call_id)
        if call is None:
            raise RequestError(
                ap.ErrorCode.NOT_FOUND,
                f"no host tool call {req.call_id!r} is waiting (unknown, answered already, "
                "given up, or past its deadline)",
            )
        if call.agent is not client:
            raise RequestError(
                ap.ErrorCode.BAD_REQUEST,
                f"host tool call {req.call_id!r} was sent to another connection",
            )
        del self._forwarded[req.call_id]
        call.answer(list(req.content), req.is_error)
        return ap.Empty()

    def agent_joined(self, agent: Connection) -> None:
        """An agent joined the workspace (its ``hello`` lists its capabilities)."""
        if HOST_TOOLS in agent.capabilities:
            self._agents[agent] = None

    def client_left(self, client: Subscriber) -> None:
        """The agent left: the calls forwarded to it fail."""
        self._agents.pop(client, None)
        for call in [c for c in self._forwarded.values() if c.agent is client]:
            call.end(f"call_tool {call.name!r} failed: the agent running it left")

    # --- bookkeeping ------------------------------------------------------------------

    def _forget(self, call: HostCall) -> None:
        calls = self._calls.get(call.ext)
        if calls is not None and calls.get(call.id) is call:
            del calls[call.id]
            if not calls:
                del self._calls[call.ext]
        if self._forwarded.get(call.call_id) is call:
            del self._forwarded[call.call_id]
        if call.parent is not None:
            try:
                call.parent.on_end.remove(call.parent_ended)
            except ValueError:
                pass  # (it has ended: Served.end took its callbacks)
        call.withdraw()  # (a call answered already has nothing to withdraw)

    def _send(
        self,
        ext: Extension,
        rid: ep.Id,
        name: str,
        content: list[ep.Block],
        is_error: bool,
        structured: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET,
    ) -> None:
        """Queues the reply to ``call_tool`` ``rid``, capped (a full stdin
        queue drops it, and notes that in the extension's log)."""
        capped = call_chain.cap(content, structured)
        frame = ep.HostToolResult(
            id=rid,
            name=name,
            content=capped.content,
            is_error=is_error,
            truncated=capped.truncated,
            structured_content=capped.structured,
        )
        ext.send_nowait(ep.encode(frame), force=True)  # a reply owed: never dropped


def _caller_under(served: Served | None, origin: str, chain: tuple[str, ...]) -> Caller:
    """Who an extension's call is for: the caller of the call it is made
    under (its agent, and whatever else it knows of it), without UI (the
    call is the extension's, not the agent's), with ``origin`` and ``chain``."""
    if served is None:
        return Caller(origin=origin, chain=chain)
    return msgspec.structs.replace(served.caller, interactive=False, origin=origin, chain=chain)
