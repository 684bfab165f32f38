"""Who is at the other end of a Unix socket: the peer's user id.

Both ends ask: the daemon refuses clients of another user, and a client
refuses a daemon of another user before it sends anything (its ``hello``
may carry a token). Plain synchronous code on any socket object with
``getsockopt`` (a stdlib or a trio socket).
"""

from __future__ import annotations

import socket
import struct
import sys
from typing import Protocol


class _HasGetsockopt(Protocol):
    def getsockopt(self, level: int, optname: int, buflen: int, /) -> int | bytes: ...


#: ``SOL_LOCAL`` and ``LOCAL_PEERCRED`` from <sys/un.h> on macOS and the
#: BSDs, where Python's socket module may not name them.
_SOL_LOCAL = getattr(socket, "SOL_LOCAL", 0)
_LOCAL_PEERCRED = getattr(socket, "LOCAL_PEERCRED", 0x001)
#: ``struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }``.
_XUCRED_SIZE = struct.calcsize("Ii") + 4 + 16 * 4


def peer_uid(sock: _HasGetsockopt) -> int | None:
    """The effective user id of the process at the other end of a connected
    Unix socket (taken when it connected or listened), if the platform can
    tell: ``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS and the BSDs
    (what ``getpeereid`` reads). None elsewhere, or if the call fails."""
    try:
        if sys.platform == "linux":
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return int(struct.unpack("3i", _as_bytes(raw))[1])
        if sys.platform == "darwin" or "bsd" in sys.platform:
            raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
            return int(struct.unpack_from("Ii", _as_bytes(raw))[1])
    except OSError:
        return None
    return None


def _as_bytes(raw: int | bytes) -> bytes:
    if not isinstance(raw, bytes):  # getsockopt with a buffer size returns bytes
        raise OSError("getsockopt returned no buffer")
    return raw
