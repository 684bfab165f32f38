"""Taking connections in: the accept loop, refusals, the open-file limit.

:func:`accept_loop` is ``trio.serve_listeners`` for one listener, but with
a backoff on the errors that mean "out of file descriptors or memory for
now" and one log line per such episode instead of one per failure (trio's
logs every failure, ten times a second). :func:`refuse` answers a
connection zotd will not serve with one error frame and closes it.
:func:`raise_fd_limit` lifts the soft ``RLIMIT_NOFILE`` so that
``max_connections`` can be reached.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
from collections.abc import Awaitable, Callable
from typing import NoReturn

import msgspec
import trio

from ..protocol import agent as ap

log = logging.getLogger(__name__)

#: accept() errors that mean "not now" rather than "never": the kernel is out
#: of file descriptors (ours or the system's) or of buffer memory. The same
#: set as trio.serve_listeners's ACCEPT_CAPACITY_ERRNOS.
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})

#: The first wait after such an error; each further failure doubles it, up to
#: :data:`BACKOFF_MAX`, and an accepted connection resets it. Connections
#: meanwhile wait in the socket's backlog.
BACKOFF_FIRST = 0.01
BACKOFF_MAX = 1.0

#: How long a refused connection gets to send its first request (whose id
#: the error frame answers, so that a client library sees it as the reply to
#: its ``hello``), and then to take the frame, before it is closed.
REFUSAL_TIMEOUT = 1.0

#: At most this much of a refused connection's first line is read; a longer
#: one is answered with ``id: null``.
_FIRST_LINE_MAX = 4096

#: File descriptors kept besides the connections: extensions' pipes and
#: logs, the watchdog, trio's own, the listener, the lock.
FD_RESERVE = 1024


async def accept_loop(
    listener: trio.SocketListener,
    handler: Callable[[trio.SocketStream], Awaitable[object]],
    nursery: trio.Nursery,
) -> NoReturn:
    """Accepts connections forever, each handled in a task of ``nursery``.

    On an error of :data:`CAPACITY_ERRNOS` it waits (:data:`BACKOFF_FIRST`,
    doubling up to :data:`BACKOFF_MAX`) and tries again; the first failure
    of an episode is logged (a warning), the others are counted, and the
    accept that ends it logs how many there were.

    Cancellation closes the listener (as ``trio.serve_listeners`` does);
    the handlers' tasks live in ``nursery`` and are not affected.

    Raises:
        OSError: any other accept() error (it ends the daemon: accepting
            cannot go on).
    """
    async with listener:
        failures = 0
        began = 0.0
        delay = BACKOFF_FIRST
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in CAPACITY_ERRNOS:
                    raise
                if failures == 0:
                    began = trio.current_time()
                    log.warning(
                        "cannot accept connections: %s; retrying every %g s at most "
                        "(connections wait in the socket's backlog meanwhile)",
                        os.strerror(exc.errno),
                        BACKOFF_MAX,
                    )
                failures += 1
                await trio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            if failures:
                log.warning(
                    "accepting connections again, after %d failed attempts in %.1f s",
                    failures,
                    trio.current_time() - began,
                )
                failures = 0
                delay = BACKOFF_FIRST
            nursery.start_soon(handler, stream)


class _FirstRequest(msgspec.Struct):
    id: ap.Id | None = None


def _first_id(buffered: bytes) -> ap.Id | None:
    line, newline, _ = buffered.partition(b"\n")
    if not newline:
        return None
    try:
        return msgspec.json.decode(line, type=_FirstRequest).id
    except msgspec.DecodeError:
        return None


async def refuse(stream: trio.SocketStream, code: str, message: str) -> None:
    """Answers the connection's first request with one error frame
    (``code``, ``message``) and closes the connection.

    It waits up to :data:`REFUSAL_TIMEOUT` for that request (no request in
    time, or an unreadable one: the frame has ``id: null``), then up to as
    long again for the peer to take the frame and hang up; a peer that does
    not cooperate costs at most that, and at most 4 KiB of memory. The
    connection is closed however this ends, cancellation included (which
    is re-raised).
    """
    buffered = b""
    try:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            with trio.move_on_after(REFUSAL_TIMEOUT):
                while b"\n" not in buffered and len(buffered) < _FIRST_LINE_MAX:
                    chunk = await stream.receive_some(_FIRST_LINE_MAX - len(buffered))
                    if not chunk:
                        break
                    buffered += chunk
            with trio.move_on_after(REFUSAL_TIMEOUT):
                await stream.send_all(ap.fail(_first_id(buffered), None, code, message))
                await stream.send_eof()
                # Closing with requests unread would reset the connection and
                # lose the frame: read (and drop) until the peer hangs up.
                while await stream.receive_some(4096):
                    pass
    finally:
        await trio.aclose_forcefully(stream)


def raise_fd_limit(wanted: int) -> tuple[int, int]:
    """Raises the soft ``RLIMIT_NOFILE`` to ``wanted``, or to the hard limit
    if that is lower; never lowers it. Extensions inherit the new limit.

    Returns:
        The (soft, hard) limits now.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:  # macOS caps it below the hard limit
            log.info("cannot raise the open-file limit to %d: %s", target, exc)
        else:
            soft = target
    return soft, hard
