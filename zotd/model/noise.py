"""An extension's noise budget: what it may say unasked, per second.

"Noise" is ``notify`` frames, panel redraws, progress and bad lines
(malformed, oversized, of unknown type, replies to no pending call). An
extension may send :data:`PER_SECOND` pieces of it a second; past that, the
rest of the second's noise is dropped (and counted, for its log once the
second is over), and its reader pauses every :data:`PAUSE_EVERY` dropped
pieces: a flood slows the flooder, not the daemon or the other extensions.

Pure: the caller passes the time in (any clock in seconds) and does the
pausing and the logging.
"""

from __future__ import annotations

#: Noise an extension may send per one-second window.
PER_SECOND = 500

#: While over budget, the reader pauses after this many dropped pieces.
PAUSE_EVERY = 100


class Noise:
    """Counts one extension's noise per one-second window.

    A window opens with the first piece of noise at least a second after the
    previous window opened.
    """

    __slots__ = ("_count", "_dropped", "_per_second", "_unpaused", "_window")

    def __init__(self, per_second: int = PER_SECOND) -> None:
        self._per_second = per_second
        self._window = float("-inf")
        self._count = 0
        self._dropped = 0
        self._unpaused = 0

    @property
    def dropped(self) -> int:
        """How many pieces were dropped in the current window."""
        return self._dropped

    def admit(self, now: float) -> tuple[bool, int]:
        """Counts one piece of noise at ``now``.

        Returns whether it is within budget (else drop it), and how many were
        dropped in the window that just ended, if this piece opened a new one
        (to report; else 0).
        """
        ended = 0
        if now - self._window >= 1.0:
            ended, self._window, self._count, self._dropped = self._dropped, now, 0, 0
        self._count += 1
        if self._count <= self._per_second:
            return True, ended
        self._dropped += 1
        self._unpaused += 1
        return False, ended

    def pause_due(self) -> bool:
        """Whether :data:`PAUSE_EVERY` pieces were dropped since the last pause
        was due (the reader then pauses once)."""
        if self._unpaused < PAUSE_EVERY:
            return False
        self._unpaused = 0
        return True
