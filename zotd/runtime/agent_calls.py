"""An agent connection's tool calls in flight: the hot path, without a task each.

:class:`AgentCalls` is the tool-call half of a
:class:`~zotd.runtime.session.ClientSession`. The session counts a
``call_tool`` it may run in flight and hands it here; :meth:`AgentCalls.start`
starts it in the workspace (:meth:`Workspace.start_call
<zotd.runtime.requests.Requests.start_call>`), and an :class:`AgentCall`
keeps it until the outcome comes. That comes from the task that reads the
extension's answer (or from the extension's expiry task, at the call's
deadline): :meth:`AgentCall.done` encodes the reply and gives it to the
session (:meth:`Owner.call_answered`), which queues it and counts the call
done. No task, no cancel scope, no coroutine per call: a trio task and a
cancel scope per call cost over half of what a call cost the daemon (see
docs/performance.md).

A call the agent gives up (``cancel``), or whose agent goes away, is
withdrawn: its extension is told (``cancel``, or the frame is taken back
unsent), and its late answer is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep
from .callers import INTERACTIVE, Caller
from .panels import Subscriber

if TYPE_CHECKING:
    from .workspace import Workspace


class Owner(Subscriber, Protocol):
    """The connection whose calls they are (a ``ClientSession``): the agent
    at the root of each call (see :class:`~.callers.Caller`)."""

    workspace: Workspace | None
    #: What its ``hello`` said it can do (``interactive``, ``host_tools``).
    capabilities: frozenset[str]

    def call_answered(self, frame: bytes) -> None:
        """Queues a call's reply (never dropped); the call is done."""
        ...

    def failure(self, rid: ap.Id, command: str, exc: Exception) -> bytes:
        """The failed reply for ``exc``."""
        ...


def _nothing() -> None:
    pass


class AgentCall:
    """One tool call in flight: its outcome comes once, through :meth:`done`,
    unless it is withdrawn first."""

    __slots__ = ("calls", "rid", "tool", "withdraw")

    def __init__(self, calls: AgentCalls, rid: ap.Id, tool: str) -> None:
        self.calls = calls
        self.rid = rid
        self.tool = tool
        #: Takes the call back from its extension (set once it is started).
        self.withdraw: Callable[[], None] = _nothing

    def done(self, outcome: ap.CallData | RequestError) -> None:
        """The outcome: the reply is encoded and handed to the connection."""
        calls = self.calls
        if calls.table.pop(self, None) is None:
            return  # withdrawn
        self.withdraw = _nothing  # (it and its workspace's call refer to each other)
        owner, rid = calls.owner, self.rid
        try:
            if isinstance(outcome, RequestError):
                frame = owner.failure(rid, "call_tool", outcome)
            else:
                frame = ap.ok(rid, "call_tool", outcome)
        except Exception as exc:  # runs in an extension's reader: never let it fail
            frame = owner.failure(rid, "call_tool", exc)
        owner.call_answered(frame)

    def progress(self, extension: str, frame: ep.ToolProgress) -> None:
        """A ``tool_progress`` frame of the call, pushed to its agent."""
        push = ap.ToolProgressPush(
            self.rid, extension, self.tool, frame.message, frame.progress, frame.total
        )
        self.calls.owner.deliver(ap.encode(push))


class AgentCalls:
    """The tool calls of one connection in flight (see the module).

    Args:
        owner: the connection.
    """

    __slots__ = ("owner", "table")

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        #: The calls in flight, and their request ids (in the order they came).
        self.table: dict[AgentCall, ap.Id] = {}

    def __len__(self) -> int:
        return len(self.table)

    def start(self, req: ap.CallTool, *, alone: bool) -> None:
        """Starts a call the connection has counted in flight. Its reply, a
        failure to start it too, reaches :meth:`Owner.call_answered`.

        ``alone=False`` says other calls are being started in the same
        breath (see ``Workspace.start_call``)."""
        owner, rid = self.owner, req.id
        call = AgentCall(self, rid, req.name)
        table = self.table
        table[call] = rid
        try:
            assert owner.workspace is not None
            call.withdraw = owner.workspace.start_call(
                req.name,
                req.args,
                req.timeout_s,
                call.done,
                alone=alone,
                progress=call.progress,
                caller=Caller(owner, INTERACTIVE in owner.capabilities, "", (), rid),
            )
        except Exception as exc:
            del table[call]
            owner.call_answered(owner.failure(rid, "call_tool", exc))

    def cancel(self, rid: ap.Id) -> bool:
        """Withdraws the call with request id ``rid`` (the first, if the agent
        used one id twice); ``False`` if there is none in flight."""
        call = next((c for c, call_id in self.table.items() if call_id == rid), None)
        if call is None:
            return False
        del self.table[call]
        call.withdraw()
        call.withdraw = _nothing
        return True

    def withdraw_all(self) -> int:
        """Withdraws every call (the agent is gone); returns how many."""
        calls = list(self.table)
        self.table.clear()
        for call in calls:
            call.withdraw()
            call.withdraw = _nothing
        return len(calls)
