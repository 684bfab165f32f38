"""Telling a client's hangup from its half-close, after its input ended.

A client may half-close after its last request (it still reads the
replies) or hang up (nobody is left to read them); end of input looks the
same either way. Only the socket's state tells them apart, so while the
connection has requests in flight :func:`watch_hangup` looks at it every
:data:`HANGUP_CHECK` seconds (``POLLHUP``, without waiting).
"""

from __future__ import annotations

import logging
import select
from collections.abc import Callable

import trio

from .streams import fileno_of

#: The session's logger: its lines are about the connection, as they were.
log = logging.getLogger("zotd.runtime.session")

#: After a client's input ends with requests in flight, how often to look
#: whether it hung up (then they are cancelled) or only half-closed.
HANGUP_CHECK = 0.1


async def watch_hangup(
    stream: trio.abc.Stream,
    in_flight: Callable[[], int],
    drained: trio.Event,
    cancel_all: trio.CancelScope,
    number: int,
) -> None:
    """Cancels ``cancel_all`` if the peer of ``stream`` hangs up while
    ``in_flight()`` is not 0; returns once it is 0 (``drained`` is set
    then), or at once if the stream has no socket to look at.

    Cancellation ends the watch where it waits, cancelling nothing.
    """
    fileno = fileno_of(stream)
    if fileno is None:
        return
    while in_flight():
        with trio.move_on_after(HANGUP_CHECK):
            await drained.wait()
        if in_flight() and hung_up(fileno()):
            log.debug("client %d: hung up; cancelling its requests", number)
            cancel_all.cancel()
            return


def hung_up(fd: int) -> bool:
    """Whether the peer of socket ``fd`` has closed it entirely (not just its
    writing side): ``POLLHUP`` without waiting."""
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLHUP)
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))
