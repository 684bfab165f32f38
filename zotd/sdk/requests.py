"""A request of the host being handled, and the progress it reports.

Each request (a tool call, a command, an intercept) is a :class:`Request`,
found by id while it runs and visible to its handler through the context
variable :data:`current` (copied into the worker thread): that is how
``ext.progress()`` knows its call and ``ext.cancelled()`` its request. A
tool call's progress updates are merged here: at most one ``tool_progress``
every :data:`PROGRESS_INTERVAL` seconds, the latest one.

Imported before the handshake (see :mod:`zotd.sdk.extension`): asyncio's
names here are annotations only.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import msgspec

from ..protocol.ext_frames import ToolProgress

if TYPE_CHECKING:
    import asyncio

#: Seconds between two ``tool_progress`` frames of one call; updates made in
#: between are merged (the latest is sent when the time comes, or just
#: before the call's result).
PROGRESS_INTERVAL = 0.05

Kind = Literal["tool", "command", "intercept"]


class Request(msgspec.Struct, eq=False):
    """A request of the host being handled: ``tool``, ``command`` or ``intercept``.

    ``cancelled`` is set on the loop and read from any thread; the rest is
    the loop's alone.
    """

    id: str
    kind: Kind
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    #: Answered or cancelled: nothing more goes out for it.
    finished: bool = False
    #: The latest progress not sent yet, its timer, and when the next may go.
    progress: ToolProgress | None = None
    timer: asyncio.TimerHandle | None = None
    next_progress: float = 0.0
    #: What to undo if the host cancels it (close the panels it opened).
    on_cancel: list[Callable[[], None]] = msgspec.field(default_factory=list)

    def finish(self) -> None:
        """Nothing more goes out for it: drops the progress not sent yet."""
        self.finished = True
        self.progress = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def queue_progress(
        self,
        frame: ToolProgress,
        loop: asyncio.AbstractEventLoop,
        send: Callable[[msgspec.Struct], None],
    ) -> None:
        """On the loop: sends ``frame`` now, or as the latest when the interval is up."""
        if self.finished:
            return
        self.progress = frame
        if self.timer is not None:
            return  # a send is due; it will take this one
        wait = self.next_progress - loop.time()
        if wait <= 0:
            self._flush_progress(loop, send)
        else:
            self.timer = loop.call_later(wait, self._flush_progress, loop, send)

    def _flush_progress(
        self, loop: asyncio.AbstractEventLoop, send: Callable[[msgspec.Struct], None]
    ) -> None:
        self.timer = None
        frame, self.progress = self.progress, None
        if frame is None or self.finished:
            return
        self.next_progress = loop.time() + PROGRESS_INTERVAL
        send(frame)


#: The request whose handler is running (in its task, or its worker thread).
current: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "zotd_sdk_request", default=None
)
