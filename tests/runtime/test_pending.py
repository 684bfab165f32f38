"""The pending-request table (zotd/runtime/pending.py), in virtual time:
``MockClock(autojump_threshold=0)`` (pytest-trio's ``autojump_clock``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import trio
import trio.testing

from zotd.model.errors import RequestError
from zotd.runtime.pending import PendingTable, Slot

EXACT = 1e-9


@dataclass
class Reply:
    text: str


@dataclass
class Other:
    pass


class Recorder:
    """Callbacks and expiries, in the order they came, with their times."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, object]] = []

    def expired(self, rid: str, slot: object = None) -> None:
        self.events.append((trio.current_time(), "expired", rid))

    def callback(self, name: str) -> Callable[[Reply | RequestError], None]:
        def record(outcome: Reply | RequestError) -> None:
            self.events.append((trio.current_time(), name, outcome))

        return record


def table(recorder: Recorder | None = None) -> PendingTable[str]:
    return PendingTable(on_expire=(recorder or Recorder()).expired)


# --- slots ------------------------------------------------------------------------


async def test_a_waiting_task_gets_the_reply() -> None:
    slot: Slot[Reply, str] = Slot(Reply)
    got: list[Reply] = []

    async def wait() -> None:
        got.append(await slot.wait())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert slot.resolve(Reply("hi"))
    assert got == [Reply("hi")]
    assert slot.done


async def test_a_reply_that_came_first_is_returned_at_once() -> None:
    slot: Slot[Reply, str] = Slot(Reply)
    assert slot.resolve(Reply("early"))
    assert await slot.wait() == Reply("early")


async def test_a_failed_slot_raises_its_error() -> None:
    slot: Slot[Reply, str] = Slot(Reply)
    slot.fail(RequestError("extension_failed", "gone"))
    with pytest.raises(RequestError, match="gone"):
        await slot.wait()


def test_a_reply_of_another_type_is_not_taken() -> None:
    slot: Slot[Reply, str] = Slot(Reply)
    assert not slot.resolve(Other())
    assert not slot.done  # the caller fails it, saying what came


async def test_only_the_first_outcome_counts() -> None:
    recorder = Recorder()
    slot: Slot[Reply, str] = Slot(Reply, recorder.callback("cb"))
    slot.resolve(Reply("first"))
    slot.fail(RequestError("timeout", "too late"))
    assert slot.resolve(Reply("second"))  # of the right type, but changes nothing
    assert [outcome for _, _, outcome in recorder.events] == [Reply("first")]


async def test_a_callback_gets_the_reply_or_the_error_instead_of_a_task() -> None:
    recorder = Recorder()
    ok: Slot[Reply, str] = Slot(Reply, recorder.callback("ok"))
    bad: Slot[Reply, str] = Slot(Reply, recorder.callback("bad"))
    ok.resolve(Reply("fine"))
    error = RequestError("extension_failed", "crashed")
    bad.fail(error)
    assert [(name, outcome) for _, name, outcome in recorder.events] == [
        ("ok", Reply("fine")),
        ("bad", error),
    ]


def test_on_reply_runs_before_the_callback_and_only_for_a_reply() -> None:
    order: list[str] = []
    slot: Slot[Reply, str] = Slot(
        Reply, lambda _: order.append("callback"), on_reply=lambda r: order.append(r.text)
    )
    slot.resolve(Reply("hook"))
    assert order == ["hook", "callback"]
    failed: Slot[Reply, str] = Slot(
        Reply, lambda _: order.append("failed"), on_reply=lambda r: order.append("never")
    )
    failed.fail(RequestError("timeout", "late"))
    assert order == ["hook", "callback", "failed"]


def test_a_bug_in_a_hook_or_a_callback_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(_: object) -> None:
        raise ValueError("bug")

    slot: Slot[Reply, str] = Slot(Reply, boom, on_reply=boom)
    with caplog.at_level(logging.ERROR, logger="zotd.runtime.pending"):
        assert slot.resolve(Reply("x"))
    assert caplog.messages == ["a reply's hook failed", "a reply's callback failed"]


async def test_a_cancelled_wait_is_withdrawn_and_a_later_reply_wakes_nobody(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slot: Slot[Reply, str] = Slot(Reply)
    with trio.move_on_after(1):
        await slot.wait()
    assert not slot.done
    assert slot.resolve(Reply("late"))  # no task to wake: nothing breaks
    assert await slot.wait() == Reply("late")


def test_progress_is_kept_for_the_reader() -> None:
    updates: list[str] = []
    slot: Slot[Reply, str] = Slot(Reply, progress=updates.append)
    assert slot.progress is not None
    slot.progress("half way")
    assert updates == ["half way"]


# --- the table --------------------------------------------------------------------


def test_ids_count_up_and_are_never_reused() -> None:
    pending = table()
    assert [pending.new_id() for _ in range(3)] == ["1", "2", "3"]
    pending.add("1", Slot(Reply))
    pending.pop("1")
    assert pending.new_id() == "4"


def test_slots_are_held_by_id_until_popped() -> None:
    pending = table()
    slot: Slot[Reply, str] = Slot(Reply)
    assert not pending
    pending.add("7", slot)
    assert len(pending) == 1
    assert pending.get("7") is slot
    assert pending.get("8") is None
    assert pending.pop("7") is slot
    assert pending.pop("7") is None
    assert len(pending) == 0


async def test_fail_all_fails_every_slot_and_forgets_them() -> None:
    recorder = Recorder()
    pending = table(recorder)
    for rid in "abc":
        pending.add(rid, Slot(Reply, recorder.callback(rid)))
    error = RequestError("shutting_down", "stopped")
    pending.fail_all(error)
    assert [(name, outcome) for _, name, outcome in recorder.events] == [
        ("a", error),
        ("b", error),
        ("c", error),
    ]
    assert len(pending) == 0


def test_a_callback_may_withdraw_others_while_all_fail() -> None:
    pending = table()
    failed: list[str] = []

    def withdraw_b(_: object) -> None:
        failed.append("a")
        pending.pop("b")

    pending.add("a", Slot(Reply, withdraw_b))
    pending.add("b", Slot(Reply, lambda _: failed.append("b")))
    pending.fail_all(RequestError("extension_failed", "gone"))
    assert failed == ["a", "b"]  # b had been taken from the table already


# --- expiry, in virtual time ------------------------------------------------------


async def test_a_request_fails_with_timeout_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    pending = table(recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending.expire)
        start = trio.current_time()
        pending.add(pending.new_id(), Slot(Reply, recorder.callback("call")), timeout=5)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    (t1, what1, rid), (t2, what2, error) = recorder.events
    assert (what1, rid, what2) == ("expired", "1", "call")  # told first, then failed
    assert t1 == t2 == pytest.approx(start + 5, abs=EXACT)
    assert isinstance(error, RequestError)
    assert (error.code, error.message) == ("timeout", "no reply in time")
    assert len(pending) == 0


async def test_each_deadline_is_kept_whatever_the_order_they_came_in(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    pending = table(recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending.expire)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        for rid, timeout in [("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", 1.0)]:
            pending.add(rid, Slot(Reply, recorder.callback(rid)), timeout=timeout)
        await trio.sleep(1.5)
        pending.add("e", Slot(Reply, recorder.callback("e")), timeout=0.1)  # sooner than c
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    failed = [(round(t - start, 6), name) for t, name, _ in recorder.events if name != "expired"]
    assert failed == [(1.0, "b"), (1.0, "d"), (1.6, "e"), (2.0, "c"), (3.0, "a")]


async def test_an_answered_request_does_not_expire(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    pending = table(recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending.expire)
        slot: Slot[Reply, str] = Slot(Reply, recorder.callback("call"))
        pending.add("1", slot, timeout=5)
        await trio.sleep(1)
        popped = pending.pop("1")
        assert popped is not None
        popped.resolve(Reply("in time"))
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert [name for _, name, _ in recorder.events] == ["call"]


async def test_a_request_without_timeout_waits_for_ever(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    pending = table(recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending.expire)
        pending.add("1", Slot(Reply, recorder.callback("call")))
        await trio.sleep(86_400)  # a day
        nursery.cancel_scope.cancel()
    assert recorder.events == []
    assert len(pending) == 1


async def test_a_deadline_added_before_expiry_runs_is_kept(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    pending = table(recorder)
    start = trio.current_time()
    pending.add("1", Slot(Reply, recorder.callback("call")), timeout=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending.expire)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert [(round(t - start, 6), name) for t, name, _ in recorder.events] == [
        (2.0, "expired"),
        (2.0, "call"),
    ]


async def test_a_request_asked_from_an_expiry_callback_keeps_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A callback that asks again (a retry, say) while the due ones are failed.
    recorder = Recorder()
    pending = table(recorder)

    def retry(outcome: Reply | RequestError) -> None:
        recorder.callback("first")(outcome)
        pending.add("2", Slot(Reply, recorder.callback("retry")), timeout=1)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pending.expire)
        pending.add("1", Slot(Reply, retry), timeout=1)
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    failed = [(round(t - start, 6), name) for t, name, _ in recorder.events if name != "expired"]
    assert failed == [(1.0, "first"), (2.0, "retry")]


async def test_cancelled_expiry_leaves_requests_pending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    pending = table(recorder)
    with trio.move_on_after(1):
        pending.add("1", Slot(Reply, recorder.callback("call")), timeout=5)
        await pending.expire()
    await trio.sleep(10)
    assert recorder.events == []
    assert len(pending) == 1
