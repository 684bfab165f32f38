"""The restart policy of one extension, as a pure tracker.

Like an Erlang/OTP supervisor (``[restart]`` in ``zotd.toml``,
:class:`~zotd.model.config.RestartPolicy`): an extension that ends on its own
is started again after a backoff that doubles from ``backoff_initial`` up to
``backoff_max`` with each restart still inside ``window``; one more restart
than ``intensity`` within ``window`` seconds means it is broken, and it is
left stopped until reloaded.

A spawn that fails for a transient reason (:data:`TRANSIENT_ERRNOS`: too
many open files, no memory, no process slot) counts as a crash and is
restarted the same way; one that fails for good (no such file, permission
denied, bad executable format) is left failed at once.

Sans-IO: the caller passes the time in (``trio.current_time()`` in the
workspace, plain numbers in tests) and does the waiting itself.
"""

from __future__ import annotations

import errno
import signal
from collections import deque

import msgspec

from .config import RestartPolicy

#: Why a spawn may fail now and work later: the daemon or the machine is
#: short of descriptors, memory or processes for a moment.
TRANSIENT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM})


def spawn_error(argv0: str, exc: OSError) -> tuple[str, bool]:
    """Why ``argv0`` could not be started, and whether that is transient
    (worth a restart after the backoff) rather than for good.

    The message names the error: ``cannot start python3: Too many open files
    (EMFILE)``.
    """
    code = exc.errno
    name = errno.errorcode.get(code, "") if code is not None else ""
    text = exc.strerror or str(exc)
    detail = f"{text} ({name})" if name and name not in text else text
    return f"cannot start {argv0}: {detail}", code in TRANSIENT_ERRNOS


def describe_exit(code: int | None) -> str:
    """How a process ended, from its exit code (``-N`` for signal ``N``)."""
    if code is None:
        return "stopped"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Again(msgspec.Struct, frozen=True):
    """Start it again once ``delay`` seconds have passed."""

    delay: float

    def message(self, reason: str) -> str:
        """What the extension's log and state say, after why it ended."""
        return f"{reason}; restarting in {self.delay:g} s"


class GiveUp(msgspec.Struct, frozen=True):
    """Leave it stopped (``failed``): ``restarts`` restarts within ``window`` s already."""

    restarts: int
    window: float

    def message(self, reason: str) -> str:
        """What the extension's log and state say, after why it ended."""
        return (
            f"{reason}; restarted {self.restarts} times in {self.window:g} s, so it is "
            "left stopped until `zot ext reload`"
        )


class RestartTracker:
    """The restarts of one extension under ``policy``, for as long as it is kept.

    Call :meth:`on_exit` when a run ends on its own, and :meth:`restarted`
    when the next run is started (after the backoff), each with the time now.
    """

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        #: When each restart still inside the window happened, oldest first.
        self._recent: deque[float] = deque()

    def on_exit(self, now: float, exit_code: int | None) -> Again | GiveUp | None:
        """What to do about a run that ended on its own at ``now``.

        ``exit_code`` is the process's (negative for a signal, ``None`` if
        unknown or if zotd failed the run itself: a transient spawn error, a
        stdout closed while the process kept running). ``None`` means the policy does not restart this exit
        (``never``, or ``on-failure`` after a clean exit 0).
        """
        policy = self.policy
        if policy.policy == "never" or (policy.policy == "on-failure" and exit_code == 0):
            return None
        recent = self._recent
        while recent and recent[0] <= now - policy.window:
            recent.popleft()
        if len(recent) >= policy.intensity:
            return GiveUp(restarts=len(recent), window=policy.window)
        return Again(min(policy.backoff_initial * 2 ** len(recent), policy.backoff_max))

    def restarted(self, now: float) -> None:
        """The extension was started again at ``now``."""
        self._recent.append(now)
