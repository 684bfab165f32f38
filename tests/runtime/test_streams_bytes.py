"""Tests of the byte bounds of zotd.runtime.outbox and streams: an Outbox bounded by the
bytes not yet written (and frames taken back before they are written), and
LineReaders sharing a LineBudget of unfinished lines, over real pipes and
sockets (and in-memory streams where no fd is needed)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tests.runtime.test_streams import (
    ALL_KINDS,
    FD_KINDS,
    TIMEOUT,
    Kind,
    collect,
    fill,
    open_pair,
    pending,
    read_to_eof,
)
from zotd.runtime.outbox import Outbox
from zotd.runtime.streams import LineBudget, LineReader, OverBudget

KIB = 1024


def frame(size: int, tag: bytes = b"x") -> bytes:
    """A ``size``-byte frame, newline included."""
    return tag * (size - 1) + b"\n"


# --- Outbox: bytes -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_put_nowait_says_no_past_max_bytes_though_few_frames_wait(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=100, max_bytes=10 * KIB)
            sent = [frame(4 * KIB, b"a"), frame(4 * KIB, b"b")]
            for f in sent:
                assert outbox.put_nowait(f, alone=False) is True
            assert outbox.unwritten == 8 * KIB
            assert not outbox.full
            assert outbox.put_nowait(frame(4 * KIB, b"c"), alone=False) is False
            assert outbox.put_nowait(frame(2 * KIB, b"d"), alone=False) is True  # exactly 10 KiB
            assert outbox.full
            assert outbox.put_nowait(b"e\n", alone=False) is False
            assert outbox.put_nowait(b"reply\n", alone=False, force=True) is True
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                outbox.close()
            assert await read_to_eof(receive) == b"".join(sent) + frame(2 * KIB, b"d") + b"reply\n"


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_one_frame_bigger_than_max_bytes_goes_when_nothing_waits(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=100, max_bytes=2 * KIB)
            big = frame(64 * KIB)
            assert outbox.put_nowait(big, alone=False) is True
            assert outbox.put_nowait(b"small\n", alone=False) is False
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                outbox.close()
                assert await read_to_eof(receive) == big


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_bytes_of_a_write_under_way_count_until_written(kind: Kind) -> None:
    # The writer has taken the frames, but the peer reads none: they are
    # still unwritten, and a put waits for the peer, not for the writer.
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            fill(send)
            outbox = Outbox(send, limit=100, max_bytes=64 * KIB)
            big = frame(64 * KIB)
            assert outbox.put_nowait(big) is True
            put_done = trio.Event()

            async def late_put() -> None:
                await outbox.put(b"late\n")
                put_done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                nursery.start_soon(late_put)
                await trio.testing.wait_all_tasks_blocked()
                assert len(outbox) == 0  # taken by the writer ...
                assert outbox.unwritten == 64 * KIB  # ... and not written
                assert outbox.full and not put_done.is_set()
                data = bytearray()
                while not put_done.is_set():  # read; the put gets its room
                    data += await receive.receive_some(65536)
                outbox.close()
                data += await read_to_eof(receive)
            assert data.endswith(big + b"late\n")
            assert outbox.unwritten == 0


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_room_waits_for_bytes_to_be_written(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=100, max_bytes=4 * KIB)
            assert outbox.put_nowait(frame(5 * KIB), alone=False) is True
            roomy = trio.Event()

            async def wait_room() -> None:
                await outbox.room()
                roomy.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait_room)
                await trio.testing.wait_all_tasks_blocked()
                assert not roomy.is_set()
                nursery.start_soon(outbox.run)
                nursery.start_soon(read_to_eof, receive)
                await roomy.wait()
                outbox.close()


# --- Outbox: withdraw ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_a_keyed_frame_is_withdrawn_while_queued(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=2, max_bytes=8 * KIB)
            assert outbox.put_nowait(b"one\n", alone=False, key="1") is True
            assert outbox.put_nowait(frame(6 * KIB), alone=False, key="2") is True
            assert outbox.full
            assert outbox.withdraw("2") is True
            assert outbox.withdraw("2") is False  # once
            assert outbox.withdraw("nope") is False
            assert len(outbox) == 1 and outbox.unwritten == 4
            assert outbox.put_nowait(b"three\n", alone=False, key="3") is True
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                outbox.close()
            assert await read_to_eof(receive) == b"one\nthree\n"


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_a_frame_written_or_being_written_is_not_withdrawn(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=10)
            assert outbox.put_nowait(b"inline\n", key="1") is True  # written at once
            assert outbox.withdraw("1") is False
            assert pending(receive) == b"inline\n"
            fill(send)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                assert outbox.put_nowait(b"taken\n", alone=False, key="2") is True
                await trio.testing.wait_all_tasks_blocked()  # the writer took it, and waits
                assert outbox.withdraw("2") is False
                outbox.close()
                assert (await read_to_eof(receive)).endswith(b"taken\n")


async def test_a_put_waiting_for_room_gets_it_from_a_withdrawal() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            outbox = Outbox(send, limit=10, max_bytes=4 * KIB)
            assert outbox.put_nowait(frame(4 * KIB), alone=False, key="big") is True
            put_done = trio.Event()

            async def late_put() -> None:
                await outbox.put(b"late\n", alone=False)
                put_done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(late_put)
                await trio.testing.wait_all_tasks_blocked()
                assert not put_done.is_set()
                assert outbox.withdraw("big") is True
                await put_done.wait()
                nursery.start_soon(outbox.run)
                outbox.close()
            assert await read_to_eof(receive) == b"late\n"


# --- LineReader: a shared budget --------------------------------------------------------


async def test_readers_share_a_budget_and_the_one_past_it_is_refused() -> None:
    budget = LineBudget(100 * KIB)
    with trio.fail_after(TIMEOUT):
        async with (
            open_pair("socket") as (send_a, receive_a),
            open_pair("socket") as (send_b, receive_b),
        ):
            a = LineReader(receive_a, max_line=1024 * KIB, budget=budget)
            b = LineReader(receive_b, max_line=1024 * KIB, budget=budget)
            await send_a.send_all(b"done\n" + b"a" * (60 * KIB))
            got_a: list[bytes | object] = []
            async with trio.open_nursery() as nursery:

                async def read_a() -> None:
                    async for lines in a:
                        got_a.extend(lines)

                nursery.start_soon(read_a)
                await trio.testing.wait_all_tasks_blocked()
                assert got_a == [b"done"]
                assert budget.used == 60 * KIB  # the unfinished line is charged

                # b's line takes the budget past its limit: b gets the lines it
                # completed, then OverBudget, and its line is dropped.
                await send_b.send_all(b"first\n" + b"b" * (50 * KIB))
                assert await b.__anext__() == [b"first"]
                with pytest.raises(OverBudget):
                    await b.__anext__()
                assert budget.used == 60 * KIB
                b.close()
                assert budget.used == 60 * KIB

                # a still finishes its line.
                await send_a.send_all(b"a\n")
                await trio.testing.wait_all_tasks_blocked()
                assert got_a[-1] == b"a" * (60 * KIB + 1)
                assert budget.used == 0
                await send_a.send_all(b"tail")
                await trio.testing.wait_all_tasks_blocked()
                assert budget.used == 4
                await send_a.aclose()
            assert got_a[-1] == b"tail"
            assert budget.used == 0


async def test_closing_a_reader_gives_back_its_charge() -> None:
    budget = LineBudget(100 * KIB)
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            reader = LineReader(receive, max_line=1024 * KIB, budget=budget)
            await send.send_all(b"x\n" + b"y" * 1000)
            assert await reader.__anext__() == [b"x"]
            assert budget.used == 1000
            reader.close()
            assert budget.used == 0
            assert await collect(reader) == []


async def test_an_oversized_line_being_dropped_holds_nothing() -> None:
    budget = LineBudget(8 * KIB)
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            reader = LineReader(receive, max_line=4 * KIB, budget=budget)
            async with trio.open_nursery() as nursery:

                async def write() -> None:
                    await send.send_all(b"z" * (64 * KIB) + b"\nok\n")
                    await send.aclose()

                nursery.start_soon(write)
                steps = await collect(reader)
            assert [line for step in steps for line in step][-1] == b"ok"
            assert budget.used == 0


async def test_frames_behind_a_write_the_peer_does_not_read_stay_withdrawable() -> None:
    # The writer takes about WRITE_BATCH bytes at a time while keyed frames
    # wait, not everything: those behind a blocked write can still be taken back.
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            fill(send)
            outbox = Outbox(send, limit=100)
            big = [frame(100 * KIB, tag) for tag in (b"a", b"b", b"c")]
            for i, f in enumerate(big):
                assert outbox.put_nowait(f, alone=False, key=str(i)) is True
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                await trio.testing.wait_all_tasks_blocked()
                assert outbox.blocked
                assert outbox.withdraw("0") is False  # being written
                assert outbox.withdraw("2") is True
                assert outbox.withdraw("1") is True
                data = bytearray()
                while not data.endswith(big[0]):
                    data += await receive.receive_some(1 << 16)
                outbox.close()
                data += await read_to_eof(receive)
            assert b"b" not in data and b"c" not in data
