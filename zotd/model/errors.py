"""The one exception type that crosses from the daemon's core to a client reply."""

from __future__ import annotations

from ..protocol.agent import ErrorCode


class RequestError(Exception):
    """A request failed; ``code`` is an agent-protocol :class:`ErrorCode`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def extension_failed(message: str) -> RequestError:
    """The extension serving a request is not running, died, or answered nonsense."""
    return RequestError(ErrorCode.EXTENSION_FAILED, message)
