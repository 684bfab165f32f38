"""The restart policy of one extension, as a pure tracker.

Like an Erlang/OTP supervisor (``[restart]`` in ``zotd.toml``,
:class:`~zotd.model.config.RestartPolicy`): an extension that ends on its own
is started again after a backoff that doubles from ``backoff_initial`` up to
``backoff_max`` with each restart still inside ``window``; one more restart
than ``intensity`` within ``window`` seconds means it is broken, and it is
left stopped until reloaded.

Sans-IO: the caller passes the time in (``trio.current_time()`` in the
workspace, plain numbers in tests) and does the waiting itself.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .config import RestartPolicy


@dataclass(frozen=True, slots=True)
class Again:
    """Start it again once ``delay`` seconds have passed."""

    delay: float

    def message(self, reason: str) -> str:
        """What the extension's log and state say, after why it ended."""
        return f"{reason}; restarting in {self.delay:g} s"


@dataclass(frozen=True, slots=True)
class GiveUp:
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
        unknown). ``None`` means the policy does not restart this exit
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
