"""How one run of an extension ended, and how that is judged.

A run ends in one of four ways: it was asked to stop (with the error code
its pending requests fail with), zotd failed it itself (a transient spawn
error, a stdout closed while the process ran, a stuck stdin: a crash with no
exit code), it was refused for a protocol error, or its process exited on
its own. :class:`Outcome` records the first two as they happen; once the run
is over it gives the final state, the error for the requests still pending,
and what the restart policy (:mod:`zotd.model.restart`) judges. Plain
synchronous code: the supervisor passes in what it saw.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.errors import RequestError
from ..model.restart import describe_exit
from ..protocol.agent import ErrorCode
from .status import State

__all__ = ["Outcome"]


class Outcome:
    """What one extension's run ended by, recorded as it happens."""

    def __init__(self) -> None:
        #: The code a stop was first asked with (``None``: not asked to stop).
        self.stop_code: str | None = None
        #: Why zotd failed this run itself (a transient spawn error, a stdout
        #: closed while running): a crash to restart from, with no exit code.
        self.failure: str | None = None

    def judge(
        self,
        state: State,
        last_error: str,
        exit_code: int | None,
        *,
        spawned: bool,
        refused: bool,
    ) -> tuple[State, str, str | None]:
        """The run's final state and last error, and the line for its log
        (``None``: none), from its state and last error when it ended."""
        end = describe_exit(exit_code)
        if self.failure is not None and self.stop_code is None:
            return State.FAILED, self.failure, end if spawned else None
        if not spawned:
            return state, last_error, None
        if refused or state == State.FAILED:
            return State.FAILED, last_error, None
        if self.stop_code is not None or exit_code == 0:
            return State.EXITED, last_error, end
        return State.FAILED, last_error or end, end

    def unanswered(
        self, name: str, exit_code: int | None, stderr: Sequence[str] = ()
    ) -> RequestError:
        """The error the requests still pending when the run ended fail with:
        the stop's code if it was asked to stop, else ``extension_failed``,
        with the last lines of its ``stderr`` if it was not asked to stop."""
        message = f"extension {name!r} {describe_exit(exit_code)} before replying"
        if stderr and self.stop_code is None:
            message += "; its stderr ends: " + " | ".join(stderr)
        return RequestError(self.stop_code or ErrorCode.EXTENSION_FAILED, message)

    def crash(self, exit_code: int | None, *, spawned: bool) -> str | None:
        """Why a run that ended unasked and unrefused counts as a crash:
        zotd's own failure, else the process's exit; ``None`` if no process
        was spawned (broken, disabled, untrusted)."""
        if self.failure is not None:
            return self.failure
        return describe_exit(exit_code) if spawned else None

    def judged_exit_code(self, exit_code: int | None) -> int | None:
        """The exit code the restart policy judges: the process's, or ``None``
        when zotd failed the run itself (so ``on-failure`` restarts it even if
        the process, told to shut down, then exited 0)."""
        return None if self.failure is not None else exit_code
