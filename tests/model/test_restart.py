"""The restart policy as a pure tracker: backoff and intensity, time passed in."""

from __future__ import annotations

from typing import Literal

from zotd.model.config import RestartPolicy
from zotd.model.restart import Again, GiveUp, RestartTracker


def crash_loop(tracker: RestartTracker, now: float, runs_for: float) -> list[Again | GiveUp]:
    """Runs that each crash ``runs_for`` s after they start, until it gives up."""
    decisions: list[Again | GiveUp] = []
    while True:
        now += runs_for
        decision = tracker.on_exit(now, exit_code=1)
        assert decision is not None
        decisions.append(decision)
        if isinstance(decision, GiveUp):
            return decisions
        now += decision.delay
        tracker.restarted(now)


def test_backoff_doubles_then_five_restarts_in_the_window_fail() -> None:
    decisions = crash_loop(RestartTracker(RestartPolicy()), now=100.0, runs_for=0.0)
    assert decisions == [
        Again(0.5),
        Again(1.0),
        Again(2.0),
        Again(4.0),
        Again(8.0),
        GiveUp(restarts=5, window=60.0),
    ]


def test_backoff_stops_at_backoff_max() -> None:
    policy = RestartPolicy(backoff_initial=1, backoff_max=5, intensity=10, window=1000)
    decisions = crash_loop(RestartTracker(policy), now=0.0, runs_for=0.0)
    assert [d.delay for d in decisions if isinstance(d, Again)] == [1, 2, 4, 5, 5, 5, 5, 5, 5, 5]
    assert decisions[-1] == GiveUp(restarts=10, window=1000)


def test_restarts_older_than_the_window_are_forgotten() -> None:
    tracker = RestartTracker(RestartPolicy(intensity=2, window=10, backoff_initial=1))
    assert tracker.on_exit(0, exit_code=1) == Again(1)
    tracker.restarted(1)
    assert tracker.on_exit(2, exit_code=1) == Again(2)  # one restart in the window
    tracker.restarted(4)
    assert tracker.on_exit(5, exit_code=1) == GiveUp(restarts=2, window=10)
    # Exactly `window` after the first restart, it no longer counts.
    assert tracker.on_exit(11, exit_code=1) == Again(2)
    assert tracker.on_exit(14, exit_code=1) == Again(1)  # both are out of it


def test_a_slow_crash_loop_never_gives_up() -> None:
    tracker = RestartTracker(RestartPolicy(intensity=2, window=10, backoff_initial=1))
    now = 0.0
    for _ in range(20):
        now += 6
        decision = tracker.on_exit(now, exit_code=1)
        assert isinstance(decision, Again)
        now += decision.delay
        tracker.restarted(now)


def test_policies() -> None:
    def decide(
        policy: Literal["on-failure", "always", "never"], code: int | None
    ) -> Again | GiveUp | None:
        tracker = RestartTracker(RestartPolicy(policy=policy))
        return tracker.on_exit(0, exit_code=code)

    assert decide("never", 1) is None
    assert decide("on-failure", 0) is None
    assert decide("on-failure", 1) == Again(0.5)
    assert decide("on-failure", -9) == Again(0.5)  # killed by a signal
    assert decide("on-failure", None) == Again(0.5)
    assert decide("always", 0) == Again(0.5)


def test_messages() -> None:
    assert Again(8).message("exited with code 3") == "exited with code 3; restarting in 8 s"
    assert Again(0.5).message("killed by SIGKILL") == "killed by SIGKILL; restarting in 0.5 s"
    assert GiveUp(5, 60).message("exited with code 3") == (
        "exited with code 3; restarted 5 times in 60 s, so it is left stopped until "
        "`zot ext reload`"
    )
