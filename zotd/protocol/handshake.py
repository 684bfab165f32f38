"""The extension handshake, sans-IO: frames and the time in, actions out.

Modelled on h11's ``Connection``. The supervisor feeds :class:`Handshake`
every frame the extension sends (:meth:`~Handshake.receive`) and wakes it at
its :attr:`~Handshake.deadline` (:meth:`~Handshake.tick`), passing the time in
each time: it never reads a clock, never does I/O, and answers each call with
an :data:`Action` for the caller to carry out. Its :class:`Phase` says where
the handshake stands; a frame that is illegal in the phase is a protocol
error, answered with :class:`Refuse`.

The rules (the reference, "Lifecycle"; both windows count from the spawn)::

    HELLO ──hello──▶ REGISTERING ──ready / quiet / grace──▶ READY
      │ ready_grace      ▲
      ▼                  │ hello
    LATE ────────────────┘
    HELLO, LATE ──another frame, a wrong name, hello_timeout──▶ REFUSED

- The first frame must be ``hello`` (anything else is refused), naming the
  extension as its ``extension.json`` does (else refused). The answer is
  ``hello_ack`` (:class:`Greet`).
- No ``hello`` within ``ready_grace``: agents stop waiting for it
  (:class:`Settle`), but it may still say ``hello`` until ``hello_timeout``,
  when it is refused.
- After ``hello`` it registers (``register_command``, ``register_tool``,
  ``subscribe``) until it sends ``ready``. Without ``ready`` it is ready once
  ``ready_idle`` passes with no registration frame (a second ``hello``
  counts as one), or at ``ready_grace`` after the spawn; a ``hello`` that came
  late still gets one ``ready_idle`` window. Only registrations keep it
  registering: replies, progress and notes do not (an extension serving
  calls without ever sending ``ready`` must not wait out the grace).
- Registrations, replies and notifications are legal from ``hello`` on, also
  after ``ready`` (a late registration), and are passed on (:data:`DELIVER`).
- A second ``hello`` is ignored (noted in its log); so is a second ``ready``
  (quietly).
- Frames of a type this version does not know pass in every phase, never
  refused (a newer extension's frames). Lines that are no frame at all are
  not the handshake's business: the reader notes and skips them in every
  phase, before and after ``hello``.
- Once refused, nothing the extension says counts (:class:`Ignore`).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Final

import msgspec

from . import extension as ep
from .frames import UnknownFrame

#: Frames of the registration window: each one keeps an extension that sends
#: no ``ready`` registering for another ``ready_idle``.
REGISTRATIONS: Final = (ep.Hello, ep.RegisterCommand, ep.RegisterTool, ep.Subscribe)


class Phase(StrEnum):
    """Where the handshake stands."""

    #: Spawned; waiting for ``hello`` (an agent's ``hello`` waits too).
    HELLO = "hello"
    #: No ``hello`` within ``ready_grace``: agents no longer wait; it may still
    #: say ``hello`` until ``hello_timeout``.
    LATE = "late"
    #: ``hello`` accepted; registering until ``ready``, quiet or the grace.
    REGISTERING = "registering"
    #: Done: every frame but ``hello`` and ``ready`` is passed on.
    READY = "ready"
    #: It broke the protocol (and is to be killed): nothing it says counts.
    REFUSED = "refused"


#: The phases as module constants: the hot path compares them with ``is``,
#: and an enum member's lookup on its class is much slower than a global's.
_HELLO: Final = Phase.HELLO
_LATE: Final = Phase.LATE
_REGISTERING: Final = Phase.REGISTERING
_READY: Final = Phase.READY
_REFUSED: Final = Phase.REFUSED


# --- actions ------------------------------------------------------------------
# (Frozen msgspec Structs, not dataclasses: equal and hashed by their fields
# alike, and a Struct costs the daemon's start some 10 us to define, where a
# frozen dataclass costs about 500.)


class Deliver(msgspec.Struct, frozen=True):
    """Pass the frame on: a reply, a registration, a notification, a panel,
    progress, ``shutdown_ack``, or a type this version does not know."""


class Greet(msgspec.Struct, frozen=True):
    """``hello`` accepted: answer ``hello_ack``; it may register now.
    ``note``, if any, is a warning for its log and its listing (a ``hello``
    naming another name than the manifest: it runs under the manifest's)."""

    hello: ep.Hello
    note: str | None = None


class Ready(msgspec.Struct, frozen=True):
    """It is ready: by its ``ready`` frame (``note`` is ``None``), or by quiet
    or the grace, which ``note`` says for its log."""

    note: str | None = None


class Settle(msgspec.Struct, frozen=True):
    """No ``hello`` within ``ready_grace``: agents stop waiting for it (it is
    not refused yet)."""


class Ignore(msgspec.Struct, frozen=True):
    """Drop the frame; ``note``, if any, is for its log."""

    note: str | None = None


class Refuse(msgspec.Struct, frozen=True):
    """A protocol error: it broke the handshake, and is to be stopped."""

    reason: str


Action = Deliver | Greet | Ready | Settle | Ignore | Refuse

#: The actions that carry nothing of their own, made once (:data:`DELIVER` is
#: the answer to nearly every frame).
DELIVER: Final = Deliver()
SETTLE: Final = Settle()
IGNORE: Final = Ignore()
_READY_BY_FRAME: Final = Ready()
_SECOND_HELLO: Final = Ignore("ignored a second `hello`")


class Handshake:
    """The handshake of one extension process, from its spawn on.

    Args:
        name: the name its ``extension.json`` gives (the one it runs under).
        spawned: when it was spawned (the caller's clock, in seconds).
        hello_timeout: how long after the spawn it may take to say ``hello``.
        ready_grace: how long after the spawn agents wait for it, and the
            latest it is made ready without ``ready``.
        ready_idle: the quiet (no registration frame) after which it is ready
            without ``ready``.
        strict_name: refuse a ``hello`` naming another name (else: a warning).
    """

    __slots__ = (
        "_grace",
        "_hello_by",
        "_hello_timeout",
        "_quiet",
        "_ready_grace",
        "_ready_idle",
        "_settle_by",
        "_strict_name",
        "name",
        "phase",
    )

    def __init__(
        self,
        name: str,
        *,
        spawned: float,
        hello_timeout: float,
        ready_grace: float,
        ready_idle: float,
        strict_name: bool = False,
    ) -> None:
        self.name = name
        self._strict_name = strict_name
        #: Where it stands (read it; only the handshake moves it).
        self.phase: Phase = _HELLO
        self._hello_timeout = hello_timeout
        self._ready_grace = ready_grace
        self._ready_idle = ready_idle
        self._hello_by = spawned + hello_timeout
        self._settle_by = spawned + ready_grace
        #: While registering: when quiet, and when the grace, makes it ready.
        self._quiet = math.inf
        self._grace = math.inf

    @property
    def deadline(self) -> float:
        """When :meth:`tick` is next due (``inf``: never again).

        A registration frame moves it later: a caller that wakes at a
        deadline that has since moved gets ``None`` from :meth:`tick` and
        waits for the new one.
        """
        phase = self.phase
        if phase is _HELLO:
            return min(self._hello_by, self._settle_by)
        if phase is _LATE:
            return self._hello_by
        if phase is _REGISTERING:
            return min(self._quiet, self._grace)
        return math.inf

    @property
    def settled(self) -> bool:
        """Whether agents need no longer wait for it (late, ready or refused)."""
        return self.phase in (_LATE, _READY, _REFUSED)

    def receive(self, frame: ep.ExtensionFrame | UnknownFrame, now: float) -> Action:
        """What to do with a frame the extension sent at ``now``."""
        phase = self.phase
        if phase is _READY:  # the usual case: every reply, every note
            if isinstance(frame, ep.Hello):
                return _SECOND_HELLO
            return IGNORE if isinstance(frame, ep.Ready) else DELIVER
        if phase is _REGISTERING:
            if isinstance(frame, REGISTRATIONS):
                self._quiet = now + self._ready_idle
                return _SECOND_HELLO if isinstance(frame, ep.Hello) else DELIVER
            if isinstance(frame, ep.Ready):
                self.phase = _READY
                return _READY_BY_FRAME
            return DELIVER
        if phase is _REFUSED:
            return IGNORE
        # HELLO or LATE: nothing but `hello` is legal yet.
        if isinstance(frame, UnknownFrame):
            return DELIVER
        if not isinstance(frame, ep.Hello):
            tag = type(frame).__struct_config__.tag
            return self._refuse(f"first frame must be `hello`, got `{tag}`")
        note = None
        if frame.name != self.name:
            if self._strict_name:
                return self._refuse(
                    f"`hello` names {frame.name!r} but extension.json names {self.name!r}; "
                    "they must match (strict_hello_name)"
                )
            note = (
                f"`hello` names {frame.name!r} but extension.json names {self.name!r}; "
                f"it runs as {self.name!r}"
            )
        self.phase = _REGISTERING
        self._quiet = now + self._ready_idle
        self._grace = max(self._settle_by, self._quiet)  # a late hello: one quiet window
        return Greet(frame, note)

    def tick(self, now: float) -> Action | None:
        """What the time ``now`` brings: ``None`` before :attr:`deadline`."""
        if now < self.deadline:
            return None
        phase = self.phase
        if phase is _REGISTERING:
            self.phase = _READY
            if now >= self._grace:  # both at once: the grace says why
                return Ready(f"no `ready` within {self._ready_grace:g} s; proceeding without it")
            return Ready(f"no `ready` frame; ready after {self._ready_idle:g} s of quiet")
        if phase is _HELLO and now < self._hello_by:
            self.phase = _LATE
            return SETTLE
        return self._refuse(f"sent no `hello` frame within {self._hello_timeout:g} s")

    def _refuse(self, reason: str) -> Refuse:
        self.phase = _REFUSED
        return Refuse(reason)
