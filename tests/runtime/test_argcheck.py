"""The bounded argument check (zotd/runtime/argcheck.py): it fails closed,
remembers what it found, and its child imports nothing from the daemon's
working directory.

Real clock, real child processes; no test depends on how long anything takes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest
import trio

from zotd.model.registry import Tool
from zotd.runtime import argcheck
from zotd.runtime.argcheck import SLOW, Results, Unchecked, check_args

#: Checked in a worker thread (no pattern, short arguments).
PLAIN = Tool("t", "", msgspec.Raw(b'{"type": "object", "required": ["x"]}'), "ext")
#: Checked in a child process (a pattern).
PATTERNED = Tool(
    "m", "", msgspec.Raw(b'{"properties": {"x": {"type": "string", "pattern": "^a+$"}}}'), "ext"
)

#: A hang guard for a check that should be quick, generous for a busy machine.
WAIT = 30.0


def later() -> float:
    return trio.current_time() + WAIT


# --- Results: pure ------------------------------------------------------------------------


def test_results_remember_finished_checks_and_long_unfinished_ones() -> None:
    results = Results()
    a, b, c = (Results.key(b"{}", x) for x in (b"1", b"2", b"3"))
    assert Results.key(b"{}", b"1") == a and a != Results.key(b"{}1", b"")
    assert results.get(a) == (False, None)
    results.finished(a, "$: nope")
    results.finished(b, None)
    assert (results.get(a), results.get(b)) == ((True, "$: nope"), (True, None))
    # Cut short early (it had little time): tried again next time.
    results.cut_short(c, SLOW / 2)
    assert results.slow(c) is None
    # Cut short after running long: refused from then on.
    results.cut_short(c, SLOW * 2)
    assert results.slow(c) == SLOW * 2
    results.finished(c, None)
    assert results.slow(c) is None


def test_results_are_bounded() -> None:
    results = Results()
    keys = [Results.key(b"{}", str(i).encode()) for i in range(argcheck.MAX_RESULTS + 1)]
    for key in keys:
        results.finished(key, None)
        results.cut_short(key, SLOW)
    assert results.get(keys[0]) == (False, None) and results.slow(keys[0]) is None
    assert results.get(keys[-1]) == (True, None) and results.slow(keys[-1]) == SLOW


# --- check_args ---------------------------------------------------------------------------


async def test_both_ways_of_checking_say_what_does_not_fit() -> None:
    assert await check_args(PLAIN, msgspec.Raw(b'{"x": 1}'), later()) is None
    assert await check_args(PLAIN, msgspec.Raw(b"{}"), later()) == ("$: 'x' is a required property")
    assert await check_args(PATTERNED, msgspec.Raw(b'{"x": "aa"}'), later()) is None
    assert await check_args(PATTERNED, msgspec.Raw(b'{"x": "b"}'), later()) == (
        "$.x: 'b' does not match '^a+$'"
    )


async def test_a_check_with_no_time_left_fails_closed() -> None:
    for tool in (PLAIN, PATTERNED):
        with pytest.raises(Unchecked, match="no time was left to check them"):
            await check_args(tool, msgspec.Raw(b'{"x": "new"}'), trio.current_time())


async def test_a_check_waits_for_its_turn_within_the_deadline() -> None:
    state = argcheck._current()
    async with trio.open_nursery() as nursery:
        held = trio.Event()

        async def hold_all(task_status: trio.TaskStatus[None]) -> None:
            for _ in range(argcheck.MAX_CHILDREN):
                await state.children.acquire_on_behalf_of(object())
            task_status.started()
            await held.wait()

        await nursery.start(hold_all)
        with pytest.raises(Unchecked, match="all 4 children checking arguments were busy"):
            await check_args(PATTERNED, msgspec.Raw(b'{"x": "c"}'), trio.current_time() + 0.05)
        held.set()


async def test_a_finished_check_is_not_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    args = msgspec.Raw(b'{"x": "bb"}')
    assert await check_args(PATTERNED, args, later()) == "$.x: 'bb' does not match '^a+$'"

    async def no_child(schema: bytes, args: bytes) -> str | None:
        raise AssertionError("checked again")

    monkeypatch.setattr(argcheck, "_check_in_child", no_child)
    assert await check_args(PATTERNED, args, later()) == "$.x: 'bb' does not match '^a+$'"


async def test_a_checker_that_fails_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(argcheck, "_CHILD", "raise SystemExit(3)")
    with pytest.raises(Unchecked, match=r"the checker failed \(exit status 3\)"):
        await check_args(PATTERNED, msgspec.Raw(b'{"x": "d"}'), later())
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with pytest.raises(Unchecked, match="the checker could not be started"):
        await check_args(PATTERNED, msgspec.Raw(b'{"x": "e"}'), later())


async def test_the_child_imports_nothing_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cloned repository with a `zotd/` of its own, the daemon started in it.
    planted = tmp_path / "zotd" / "model"
    planted.mkdir(parents=True)
    marker = tmp_path / "ran"
    for init in (tmp_path / "zotd" / "__init__.py", planted / "__init__.py"):
        init.write_text("")
    (planted / "args.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef main():\n    print('null')\n"
    )
    monkeypatch.chdir(tmp_path)
    assert await check_args(PATTERNED, msgspec.Raw(b'{"x": "f"}'), later()) == (
        "$.x: 'f' does not match '^a+$'"
    )
    assert not marker.exists()
