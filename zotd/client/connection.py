"""The client's side of the agent protocol, sans-IO: bytes in, events out.

:class:`Connection` keeps every rule of one connection to zotd and does no
I/O (h11's ``Connection`` is the model): it gives each request its id and
encodes it (:meth:`Connection.send` returns the line to write), splits what
the daemon wrote into lines with a bounded buffer
(:meth:`Connection.receive_data`), matches replies to the requests waiting
for them, hands ``tool_progress`` to its call's ``on_progress`` and every
other push frame out as an event, and fails what is in flight once the
connection is lost (:meth:`Connection.lose`). The transport
(:mod:`zotd.client.transport`) moves the bytes and wakes the callers; each
caller's *waiter* is the transport's, opaque here.

Requests are the protocol's Structs (:mod:`zotd.protocol.agent`), so a field
has one spelling. The two requests whose fields zotd passes to the
extensions as the agent wrote them (``emit_event``, ``intercept``), and
:meth:`Client.request <zotd.client.Client.request>`, go as fields
(:meth:`Connection.send_fields`): a Struct would add its defaults to them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from ..protocol import agent as ap
from ..protocol.frames import tags_of
from ..protocol.lines import DEFAULT_MAX_LINE, LineSplitter, Oversized
from .errors import ZotdError

log = logging.getLogger(__name__)

T = TypeVar("T")
W = TypeVar("W")

#: Requests zotd can give up when the client does (see ``cancel``).
CANCELLABLE: frozenset[type[msgspec.Struct]] = frozenset(
    {ap.CallTool, ap.InvokeCommand, ap.Intercept}
)
_CANCELLABLE_TAGS = tags_of(*CANCELLABLE)

ProgressCallback = Callable[[ap.ToolProgressPush], object]

_encode = msgspec.json.Encoder().encode

#: One decoder per type of reply data, made on first use.
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def tag_of(cls: type[msgspec.Struct]) -> str:
    """The ``type`` of a request Struct class, as the wire spells it."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str), f"{cls.__name__} has no string tag"
    return tag


def decode_data(cls: type[T], data: msgspec.Raw, request: type[msgspec.Struct] | str) -> T:
    """A reply's raw ``data`` as ``cls``; ``request`` is what it answers.

    Raises:
        ZotdError: ``bad_reply`` if it does not fit ``cls``.
    """
    decoder = _decoders.get(cls)
    if decoder is None:
        decoder = _decoders[cls] = msgspec.json.Decoder(cls)
    try:
        result: T = decoder.decode(data)
    except msgspec.ValidationError as exc:
        name = request if isinstance(request, str) else tag_of(request)
        raise ZotdError("bad_reply", f"zotd's reply to {name} did not fit: {exc}") from None
    return result


class Pending(Generic[W]):
    """A request in flight: who waits for it, and its reply once it came.

    :meth:`Connection.receive_data` hands it out as the event "the reply to
    this request came" (``reply`` is then set).
    """

    __slots__ = ("cancellable", "on_progress", "reply", "waiter")

    def __init__(self, waiter: W, on_progress: ProgressCallback | None, cancellable: bool) -> None:
        self.waiter = waiter
        self.on_progress = on_progress
        self.cancellable = cancellable
        self.reply: ap.RawResponse | None = None


#: What :meth:`Connection.receive_data` hands out: a reply came for a
#: request, or a push frame for :meth:`Client.notifications
#: <zotd.client.Client.notifications>`.
Event = Pending[W] | ap.Push


class Connection(Generic[W]):
    """One connection's protocol state: ids, requests in flight, pushes.

    Args:
        max_frame_bytes: the longest line either side may write (the
            daemon's ``max_frame_bytes``): a longer request fails here, and a
            longer line from the daemon is dropped unread, its buffer bounded.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_LINE) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._ids = itertools.count(1)
        self._pending: dict[int, Pending[W]] = {}
        self._lines = LineSplitter(max_frame_bytes)
        #: Why the connection was lost, once it was; then nothing can be sent.
        self.lost: str | None = None

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet finished or abandoned."""
        return len(self._pending)

    # --- out ------------------------------------------------------------------------

    def send(
        self, request: ap.Request, waiter: W, on_progress: ProgressCallback | None = None
    ) -> tuple[int, bytes]:
        """Gives ``request`` the next id and puts it in flight.

        ``on_progress`` gets the ``tool_progress`` frames of this request.

        Returns:
            The request's id and the line to write (newline included).

        Raises:
            ZotdError: ``connection_lost``, or ``frame_too_large`` (nothing is
                then in flight).
        """
        if self.lost is not None:
            raise ZotdError("connection_lost", self.lost)
        rid = request.id = next(self._ids)
        line = _encode(request) + b"\n"
        return rid, self._put(rid, line, waiter, on_progress, type(request) in CANCELLABLE)

    def send_fields(self, type: str, fields: dict[str, Any], waiter: W) -> tuple[int, bytes]:
        """As :meth:`send`, for a request given as its ``type`` and fields.

        Exactly these fields go, with ``id`` and ``type`` set here (over any
        in ``fields``): for the requests whose fields zotd passes through to
        the extensions, and for requests this library has no method for.
        """
        if self.lost is not None:
            raise ZotdError("connection_lost", self.lost)
        rid = next(self._ids)
        fields["id"] = rid
        fields["type"] = type
        line = _encode(fields) + b"\n"
        return rid, self._put(rid, line, waiter, None, type in _CANCELLABLE_TAGS)

    def _put(
        self,
        rid: int,
        line: bytes,
        waiter: W,
        on_progress: ProgressCallback | None,
        cancellable: bool,
    ) -> bytes:
        if len(line) - 1 > self.max_frame_bytes:
            # The daemon could only answer with an id-less error; say it here.
            raise ZotdError(
                "frame_too_large",
                f"a {len(line) - 1}-byte request is over the {self.max_frame_bytes}-byte limit",
            )
        self._pending[rid] = Pending(waiter, on_progress, cancellable)
        return line

    def finish(self, rid: int) -> ap.RawResponse:
        """Takes request ``rid`` out of flight, once its waiter was woken.

        Returns:
            Its successful reply.

        Raises:
            ZotdError: the reply's error, or ``connection_lost`` if the
                connection ended first.
        """
        reply = self._pending.pop(rid).reply
        if reply is None:
            raise ZotdError("connection_lost", self.lost or "no reply")
        if not reply.success:
            error = reply.error or ap.ErrorBody("internal", "failed without an error")
            raise ZotdError(error.code, error.message)
        return reply

    def abandon(self, rid: int) -> bytes | None:
        """Takes request ``rid`` out of flight, unanswered: its caller gave up.

        Returns:
            The ``cancel`` line to write, if zotd can still give the request
            up (a ``call_tool``, ``invoke_command`` or ``intercept`` with no
            reply yet, on a live connection); else ``None``. The replies to
            both, when they come, are for nobody and are dropped.
        """
        pending = self._pending.pop(rid)
        if not pending.cancellable or pending.reply is not None or self.lost is not None:
            return None
        return _encode(ap.CancelCall(id=next(self._ids), request_id=rid)) + b"\n"

    # --- in -------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event[W]]:
        """What a chunk the daemon wrote means, in order.

        Replies come out as the :class:`Pending` they answer (replies to no
        request in flight are dropped); ``tool_progress`` of a request sent
        with ``on_progress`` goes to that callback at once (an exception it
        raises is logged); other push frames come out as they are. Lines
        this client cannot read (a newer daemon's) and lines over
        ``max_frame_bytes`` are dropped.
        """
        events: list[Event[W]] = []
        pending = self._pending
        for line in self._lines.feed(data):
            if isinstance(line, Oversized):
                continue
            try:
                frame = ap.decode_reply(line)
            except msgspec.DecodeError:
                continue  # a newer daemon's frame we cannot read
            if isinstance(frame, ap.RawResponse):
                slot = pending.get(frame.id) if isinstance(frame.id, int) else None
                if slot is not None:
                    slot.reply = frame
                    events.append(slot)
                continue
            if type(frame) is ap.ToolProgressPush and isinstance(frame.request_id, int):
                slot = pending.get(frame.request_id)
                if slot is not None and slot.on_progress is not None:
                    try:
                        slot.on_progress(frame)
                    except Exception:  # the caller's bug must not stop the connection
                        log.exception("an on_progress callback failed")
                    continue
            events.append(frame)
        return events

    def lose(self, why: str) -> list[W]:
        """The connection ended: nothing more can be sent or received.

        Returns:
            The waiters of every request in flight, to be woken: their
            :meth:`finish` raises ``connection_lost`` with the first ``why``.
        """
        self.lost = self.lost or why
        return [p.waiter for p in self._pending.values()]
