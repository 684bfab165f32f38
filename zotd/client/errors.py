"""The client library's exceptions: :class:`ZotdError`, :class:`NotRunning`, :class:`WrongUser`.

Plain classes (no I/O), shared by the sans-IO connection and the transport.
"""

from __future__ import annotations

from pathlib import Path


class ZotdError(Exception):
    """A request failed. ``code`` is an :class:`~zotd.protocol.agent.ErrorCode` value,
    or ``not_running``, ``cannot_connect``, ``wrong_user`` or ``connection_lost``
    for failures of the connection itself, or ``bad_reply`` for a reply this
    client cannot read."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


class NotRunning(ZotdError):
    """No daemon answers on the socket."""

    def __init__(self, socket: Path) -> None:
        super().__init__(
            "not_running",
            f"zotd is not running (nothing answers on {socket}); start it with `zotd start`",
        )


class WrongUser(ZotdError):
    """The process serving the socket runs as another user: nothing was sent to it."""

    def __init__(self, socket: str, uid: int, expected: int) -> None:
        super().__init__(
            "wrong_user",
            f"refusing to talk to {socket}: it is served by uid {uid}, not by you "
            f"(uid {expected}), and was sent nothing; another user holds "
            "this socket path: stop their process, or set ZOTD_SOCKET to a path in a "
            "directory only you can write",
        )
        self.socket = socket
        self.uid = uid
