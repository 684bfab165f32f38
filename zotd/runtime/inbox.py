"""What an extension says: its stdout read, decoded, counted and routed,
and its handshake kept.

:class:`Inbox` is the reader of one extension process (:class:`~.calls.Calls`
is its stdin)::

    stdout line ─ decode ─ Handshake.receive ─┬─ DELIVER: route
                                              └─ the rest: hello_ack, ready, refuse, ...

The rules of the handshake are :mod:`zotd.protocol.handshake`'s, sans-IO;
the inbox feeds it the frames and the time (:meth:`Inbox.keep_time` wakes it
at its deadlines) and carries out what it decides. Routed: replies and
progress to the pending requests they answer; registrations, subscriptions,
notifications and panels to the host. Noise (see :mod:`zotd.model.noise`)
past the extension's budget is dropped, and the reader then pauses now and
then: a flood slows the flooder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import trio

from ..model.config import Config
from ..model.errors import extension_failed
from ..model.noise import PER_SECOND, Noise
from ..protocol import extension as ep
from ..protocol.agent import HandshakeInfo
from ..protocol.frames import FrameError, UnknownFrame, is_json_object
from ..protocol.handshake import (
    DELIVER,
    Action,
    Greet,
    Handshake,
    Ignore,
    Phase,
    Ready,
    Refuse,
    Settle,
)
from ..protocol.lines import Oversized
from ..protocol.tool_results import salvage
from .pending import PendingTable, Slot
from .status import Host, State
from .streams import LineReader

if TYPE_CHECKING:
    from .extension import Extension

#: The supervisor's logger: what zotd logs about an extension has one name.
log = logging.getLogger("zotd.runtime.extension")

_REFUSED = Phase.REFUSED  # (globals: faster than the enum's attributes, on every line)
_READY = Phase.READY

#: While over its noise budget, the reader pauses this long after every
#: :data:`~zotd.model.noise.PAUSE_EVERY` dropped lines.
NOISE_PAUSE = 0.01

#: The most out-of-order frames kept in a run's :class:`HandshakeInfo`.
MAX_OUT_OF_ORDER = 16

Reply = ep.ToolResult | ep.CommandResponse | ep.EventInterceptResponse
_REPLIES = (ep.ToolResult, ep.CommandResponse, ep.EventInterceptResponse)
#: The replies a ready extension's reader hands straight to their requests
#: (what the handshake would pass on anyway): a tool's result, a guard's answer.
_STRAIGHT = frozenset({ep.ToolResult, ep.EventInterceptResponse})


class Inbox:
    """Reads and routes what one extension process writes to its stdout, and
    keeps its handshake.

    Args:
        ext: the extension, as its host knows it (and whose state it reports).
        host: where registrations, notifications and panels go.
        pending: the requests sent to it, whose replies come here.
        config: the handshake's deadlines, and the longest line read.
        spawned: when the process was spawned (trio time).
        on_ready: makes it ready (the handshake is done).
        on_refuse: fails it with a reason and kills it (a protocol error).
    """

    __slots__ = (
        "_ext",
        "_host",
        "_max",
        "_on_ready",
        "_on_refuse",
        "_pending",
        "_record",
        "_spawned",
        "_timer",
        "handshake",
        "noise",
    )

    def __init__(
        self,
        ext: Extension,
        *,
        host: Host,
        pending: PendingTable[ep.ToolProgress],
        config: Config,
        spawned: float,
        on_ready: Callable[[], None],
        on_refuse: Callable[[str], None],
    ) -> None:
        self._ext = ext
        self._host = host
        self._pending = pending
        self._max = config.max_frame_bytes
        self._on_ready = on_ready
        self._on_refuse = on_refuse
        self.handshake = Handshake(
            ext.name,
            spawned=spawned,
            hello_timeout=config.hello_timeout,
            ready_grace=config.ready_grace,
            ready_idle=config.ready_idle,
            strict_name=config.strict_hello_name,
        )
        self.noise = Noise()
        #: The cancel scope that sleeps until the handshake's next deadline.
        self._timer: trio.CancelScope | None = None
        #: How this run's handshake goes, as ``list_extensions`` shows it.
        self._spawned = spawned
        self._record = ext.handshake = HandshakeInfo()

    @property
    def refused(self) -> bool:
        """Whether it broke the handshake (it is killed; nothing it says counts)."""
        return self.handshake.phase is _REFUSED

    async def run(self, stdout: trio.abc.ReceiveStream, done: trio.Event) -> None:
        """Reads and routes ``stdout`` until its end; then sets ``done``.

        Cancellation stops the reading at once (lines already read are
        routed first: routing never waits), and ``done`` is set all the same.
        Closing the stream is the caller's.
        """
        noise, handshake = self.noise, self.handshake
        decode_all = ep.decode_extension_frames
        try:
            async for lines in LineReader(stdout, self._max):
                # Ready, every line a frame (the usual case): decoded at once,
                # and a reply goes straight to its request (the handshake
                # passes replies on once ready).
                frames = decode_all(lines) if handshake.phase is _READY else None
                if frames is None:
                    self._one_by_one(lines, trio.current_time())
                else:
                    now = None  # when these lines came (all at once), if anything asks
                    for frame in frames:
                        if type(frame) in _STRAIGHT and handshake.phase is _READY:
                            self._on_reply(frame)  # type: ignore[arg-type]
                        else:
                            if now is None:
                                now = trio.current_time()
                            self._route(frame, now)
                if noise.pause_due():
                    await trio.sleep(NOISE_PAUSE)
        finally:
            done.set()

    def _one_by_one(self, lines: list[bytes | Oversized], now: float) -> None:
        for line in lines:
            if isinstance(line, Oversized):
                if self._noisy():
                    self._ext.note(
                        f"dropped a {line.size}-byte line: longer than the "
                        f"{self._max}-byte frame limit"
                    )
            elif line and not line.isspace():
                self.on_line(line, now)

    def on_line(self, line: bytes, now: float) -> None:
        """Routes one line of its stdout, read at ``now`` (trio time)."""
        if self.handshake.phase is _REFUSED:
            return  # (as below: before decoding it)
        try:
            frame = ep.decode_extension_frame(line)
        except FrameError as exc:
            self._on_bad_frame(exc, line)
            return
        self._route(frame, now)

    def _route(self, frame: ep.ExtensionFrame | UnknownFrame, now: float) -> None:
        """Does what the handshake says with a frame, or routes it."""
        if self.handshake.phase is _REFUSED:
            return  # it is being killed; nothing it says counts
        action = self.handshake.receive(frame, now)
        if action is not DELIVER:
            self._recorded(frame, action, now)
            self._carry_out(action)
        elif isinstance(frame, _REPLIES):
            self._on_reply(frame)
        elif isinstance(frame, ep.Notify):
            if self._noisy():
                self._host.on_notify(self._ext, frame)
        elif isinstance(frame, ep.ToolProgress):
            self._on_progress(frame)
        elif isinstance(frame, ep.PanelRender | ep.PanelClose):
            if self._noisy():  # a flood of redraws slows the flooder alone
                self._host.on_panel(self._ext, frame)
        elif isinstance(frame, ep.RegisterCommand):
            self._ext.registrations.append(frame)
            self._report_shadow(self._host.on_register_command(self._ext, frame))
        elif isinstance(frame, ep.RegisterTool):
            if not is_json_object(frame.schema):
                self._ext.note(f"tool {frame.name!r} refused: `schema` must be a JSON object")
                return
            self._ext.registrations.append(frame)
            self._report_shadow(self._host.on_register_tool(self._ext, frame))
        elif isinstance(frame, ep.Subscribe):
            self._subscribe(frame)
        elif isinstance(frame, ep.CallToolRequest | ep.CallToolCancel):
            self._host.on_host_call(self._ext, frame)
        elif isinstance(frame, ep.OneWay):
            if self._noisy():
                self._host.on_one_way(self._ext, frame)
        elif isinstance(frame, ep.ShutdownAck):
            log.debug("extension %s: shutdown_ack", self._ext.name)
        elif isinstance(frame, UnknownFrame) and self._noisy():
            log.debug("extension %s: ignored unknown frame type %r", self._ext.name, frame.type)

    # --- the handshake ----------------------------------------------------------

    async def keep_time(self) -> NoReturn:
        """Wakes the handshake at its deadlines; runs until cancelled (it owns
        nothing: cancellation just ends it).

        One cancel scope sleeps until the next deadline. ``hello`` brings it
        nearer (:meth:`_carry_out` moves the scope); a registration moves the
        quiet later, and a wake-up at a deadline that has moved finds
        nothing due and sleeps on.
        """
        handshake = self.handshake
        while True:
            with trio.CancelScope(deadline=handshake.deadline) as self._timer:
                await trio.sleep_forever()
            self._timer = None
            now = trio.current_time()
            action = handshake.tick(now)
            if action is not None:
                if isinstance(action, Ready):
                    self._record.ready_s = round(now - self._spawned, 3)
                    self._record.auto_ready = True
                self._carry_out(action)

    def _recorded(
        self, frame: ep.ExtensionFrame | UnknownFrame, action: Action, now: float
    ) -> None:
        """Keeps what a frame the handshake did not just pass on says of it:
        when ``hello`` and ``ready`` came, and the frames out of order (one
        before ``hello``, a second ``hello`` or ``ready``)."""
        record = self._record
        if isinstance(action, Greet):
            record.hello_s = round(now - self._spawned, 3)
        elif isinstance(action, Ready):
            record.ready_s = round(now - self._spawned, 3)
        elif len(record.out_of_order) < MAX_OUT_OF_ORDER:
            tag = type(frame).__struct_config__.tag if isinstance(frame, ep.Frame) else "?"
            if isinstance(action, Refuse) and not isinstance(frame, ep.Hello):
                record.out_of_order.append(f"{tag} before hello")
            elif isinstance(frame, ep.Hello | ep.Ready):
                record.out_of_order.append(f"{tag} again")

    def _carry_out(self, action: Action) -> None:
        """Does what the handshake decided (about a frame, or the time)."""
        ext = self._ext
        if isinstance(action, Greet):
            ext.capabilities = list(action.hello.capabilities)
            ext.hello_warning = action.note or ""
            if action.note is not None:
                ext.note(action.note)
            ext.send_nowait(ep.encode(self._host.hello_ack(ext)))
        elif isinstance(action, Ready):
            if action.note is not None and ext.running:  # by quiet or the grace
                ext.note(action.note)  # (not once it is stopping)
            self._on_ready()
        elif isinstance(action, Refuse):
            self._on_refuse(action.reason)
        elif isinstance(action, Ignore):
            if action.note is not None:
                ext.note(action.note)
        elif isinstance(action, Settle):
            ext.settled.set()  # agents stop waiting; it may still say hello
        if self._timer is not None:
            self._timer.deadline = self.handshake.deadline

    # --- routing ------------------------------------------------------------------

    def _on_reply(self, frame: Reply) -> None:
        # Answered: the slot goes (an awaited request's `finally` pops it too).
        slot = self._pending.pop(str(frame.id))
        if slot is None or not slot.resolve(frame):
            self._unexpected(frame, slot)

    def _unexpected(self, frame: Reply, slot: Slot[Any, ep.ToolProgress] | None) -> None:
        """A reply to no request pending, or not of the type it expects."""
        tag = type(frame).__struct_config__.tag
        if slot is None:
            self._ext.late_replies += 1
            if self._noisy():
                self._ext.note(
                    f"dropped `{tag}` for id {frame.id!r}: no such request pending (answered "
                    "already, cancelled, or past its deadline)"
                )
        else:
            want = slot.expect.__struct_config__.tag
            slot.fail(
                extension_failed(
                    f"extension {self._ext.name!r} answered with `{tag}`, not `{want}`"
                )
            )

    def _on_progress(self, frame: ep.ToolProgress) -> None:
        slot = self._pending.get(str(frame.id))
        if slot is None or slot.expect is not ep.ToolResult:
            if self._noisy():
                self._ext.note(f"dropped `tool_progress` for id {frame.id!r}: no tool call pending")
        elif slot.progress is not None and self._noisy():
            try:
                slot.progress(frame)
            except Exception:  # a bug there must not take the reader down with it
                log.exception("a progress callback failed")

    def _on_bad_frame(self, exc: FrameError, line: bytes) -> None:
        if exc.type == "tool_result":  # blocks of a type zotd does not know?
            salvaged = salvage(line, self._ext.name)
            if salvaged is not None:
                self._on_reply(salvaged)
                return
        if self._noisy():
            preview = line[:200].decode("utf-8", "replace")
            self._ext.note(f"skipped a malformed line ({exc.message}): {preview}")
        slot = self._pending.pop(str(exc.id)) if exc.id is not None else None
        if slot is not None:
            slot.fail(
                extension_failed(
                    f"extension {self._ext.name!r} sent a malformed reply: {exc.message}"
                )
            )

    def _noisy(self) -> bool:
        """Counts one piece of noise; ``False`` if it is over budget (drop it quietly)."""
        admitted, ended = self.noise.admit(trio.current_time())
        if ended:
            self._ext.note(
                f"dropped {ended} notify frames and bad lines in one second "
                f"(more than {PER_SECOND} a second); reading its output more slowly"
            )
        return admitted

    def _subscribe(self, frame: ep.Subscribe) -> None:
        # Subscriptions add up, as in current zot: each frame adds its names.
        ext = self._ext
        events = set(frame.events)
        ext.events = ext.events | events
        unknown = events - ep.EVENTS
        if unknown:
            ext.note(f"subscribed to events zot does not send (yet): {sorted(unknown)}")
        ext.intercepts = ext.intercepts | (set(frame.intercept) & ep.INTERCEPTABLE)
        ignored = set(frame.intercept) - ep.INTERCEPTABLE
        if ignored:
            ext.note(f"cannot intercept {sorted(ignored)}: only {sorted(ep.INTERCEPTABLE)}")
        if ext.state == State.READY:
            self._host.on_changed(ext)

    def _report_shadow(self, reason: str | None) -> None:
        # `reason`: why a registration was refused or changed, for its log.
        if reason is not None:
            self._ext.note(reason)
        if self._ext.state == State.READY:
            self._host.on_changed(self._ext)  # a late registration
