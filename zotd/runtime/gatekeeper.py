"""The gatekeeping of one agent connection: the ``hello`` deadline and eviction.

Two things close a connection from the daemon's side with an error frame
(``id`` and ``command`` null): no successful ``hello`` within
``client_hello_timeout`` (``hello_required``; a ``hello`` being answered
at the deadline is let finish, and decides), and whatever else the session
evicts it for (an unfinished request line past the hub's
``max_buffered_bytes``: ``busy``). The session then cancels the requests in
flight and gives the frame :data:`CLOSE_GRACE` seconds to be written.

The :class:`~zotd.runtime.session.ClientSession` owns one
:class:`Gatekeeper`; nothing here touches the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ..protocol import agent as ap

#: The session's logger: its lines are about the connection, as they were.
log = logging.getLogger("zotd.runtime.session")

#: How long a connection closed by the daemon (no ``hello`` in time, too many
#: bytes in unfinished lines) has to read the error frame before it is cut.
CLOSE_GRACE = 1.0


class Gatekeeper:
    """Who may stay on one connection.

    Args:
        number: the connection's serial number, for logs.
        hello_timeout: ``client_hello_timeout``.
        admitted: whether a ``hello`` has succeeded (the session's
            ``authenticated``).
        reply: queues a frame on the connection's outbox, never dropped.
        stop_reading: stops the session reading requests.
    """

    __slots__ = (
        "_admitted",
        "_hello_overdue",
        "_hello_scope",
        "_number",
        "_reply",
        "_stop_reading",
        "evicted",
        "hello_running",
        "hello_timeout",
    )

    def __init__(
        self,
        number: int,
        hello_timeout: float,
        *,
        admitted: Callable[[], bool],
        reply: Callable[[bytes], None],
        stop_reading: Callable[[], None],
    ) -> None:
        self.hello_timeout = hello_timeout
        #: Closed by the daemon (see :meth:`evict`).
        self.evicted = False
        #: A ``hello`` is being answered (set by the session around it).
        self.hello_running = False
        self._number = number
        self._admitted = admitted
        self._reply = reply
        self._stop_reading = stop_reading
        #: Ends the wait for ``hello`` (cancelled once one succeeded).
        self._hello_scope = trio.CancelScope()
        #: The deadline passed while a ``hello`` was being answered.
        self._hello_overdue = False

    async def await_hello(self, deadline: float) -> None:
        """Evicts the connection if no ``hello`` has succeeded by ``deadline``
        (trio time); a ``hello`` being answered then is let finish, and
        :meth:`hello_answered` decides.

        Returns at once, doing nothing, once :meth:`stop_waiting` has been
        called (a ``hello`` succeeded, or input ended). Cancellation ends
        the wait with nothing evicted.
        """
        with self._hello_scope:
            await trio.sleep_until(deadline)
            if self.hello_running:
                self._hello_overdue = True
            elif not self._admitted():
                self._evict_for_no_hello()

    def hello_answered(self) -> None:
        """A ``hello``'s reply is queued: the wait ends if it succeeded, and
        the connection is evicted if it failed past the deadline."""
        if self._admitted():
            self.stop_waiting()
        elif self._hello_overdue:
            self._evict_for_no_hello()

    def stop_waiting(self) -> None:
        """Ends :meth:`await_hello`: nothing more to wait for."""
        self._hello_scope.cancel()

    def evict(self, code: str, message: str) -> None:
        """Closes the connection from our side: the error frame is queued
        (``id`` and ``command`` null) and reading stops; the session then
        cancels the requests in flight and gives the frame
        :data:`CLOSE_GRACE`. Only the first eviction counts."""
        if self.evicted:
            return
        self.evicted = True
        self._reply(ap.fail(None, None, code, message))
        self._stop_reading()

    def _evict_for_no_hello(self) -> None:
        timeout = self.hello_timeout
        log.info("client %d: no hello in %g s; closing it", self._number, timeout)
        self.evict(
            ap.ErrorCode.HELLO_REQUIRED, f"no `hello` within {timeout:g} s; closing the connection"
        )
