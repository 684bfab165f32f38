"""An extension's noise budget (zotd/model/noise.py): pure, the time passed in."""

from __future__ import annotations

from zotd.model.noise import PAUSE_EVERY, PER_SECOND, Noise


def admit_many(noise: Noise, count: int, now: float) -> list[tuple[bool, int]]:
    return [noise.admit(now) for _ in range(count)]


def test_the_budget_is_500_a_second_with_a_pause_every_100_dropped() -> None:
    assert (PER_SECOND, PAUSE_EVERY) == (500, 100)


def test_within_budget_everything_is_admitted() -> None:
    noise = Noise()
    assert admit_many(noise, PER_SECOND, 10.0) == [(True, 0)] * PER_SECOND
    assert noise.dropped == 0
    assert not noise.pause_due()


def test_past_the_budget_the_rest_of_the_second_is_dropped() -> None:
    noise = Noise()
    admit_many(noise, PER_SECOND, 10.0)
    assert noise.admit(10.5) == (False, 0)
    assert noise.admit(10.999) == (False, 0)
    assert noise.dropped == 2


def test_the_next_window_reports_what_the_last_one_dropped_once() -> None:
    noise = Noise()
    admit_many(noise, PER_SECOND + 7, 10.0)
    assert noise.admit(11.0) == (True, 7)  # a new window: 7 to report
    assert noise.dropped == 0
    assert noise.admit(11.1) == (True, 0)  # reported once only


def test_a_window_opens_with_its_first_piece_not_on_the_second() -> None:
    noise = Noise(per_second=1)
    assert noise.admit(10.5) == (True, 0)
    assert noise.admit(11.4) == (False, 0)  # still the window opened at 10.5
    assert noise.admit(11.5) == (True, 1)


def test_a_quiet_gap_reports_nothing_dropped() -> None:
    noise = Noise(per_second=2)
    admit_many(noise, 2, 0.0)
    assert noise.admit(60.0) == (True, 0)


def test_the_first_piece_ever_opens_a_window() -> None:
    # Whatever the clock reads at first (trio's starts anywhere, even below 0).
    noise = Noise(per_second=1)
    assert noise.admit(-1e9) == (True, 0)
    assert noise.admit(-1e9) == (False, 0)


def test_a_pause_is_due_once_per_hundred_dropped() -> None:
    noise = Noise(per_second=0)
    admit_many(noise, PAUSE_EVERY - 1, 0.0)
    assert not noise.pause_due()
    noise.admit(0.0)
    assert noise.pause_due()
    assert not noise.pause_due()  # due once, then counted afresh
    admit_many(noise, PAUSE_EVERY, 0.1)
    assert noise.pause_due()


def test_admitted_pieces_bring_no_pause() -> None:
    noise = Noise(per_second=1000)
    admit_many(noise, 1000, 0.0)
    assert not noise.pause_due()


def test_drops_of_several_windows_add_up_towards_a_pause() -> None:
    # The reader pauses after a read that dropped enough, whichever second
    # the drops were counted in.
    noise = Noise(per_second=0)
    admit_many(noise, 60, 0.0)
    admit_many(noise, 40, 1.0)
    assert noise.pause_due()
