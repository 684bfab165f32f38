"""Tests of zotd.runtime.streams and zotd.runtime.outbox: LineReader and
Outbox over real pipes, real Unix sockets, and Trio's in-memory streams
(the path for streams without an fd)."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio
import trio.testing

from zotd.protocol.lines import Oversized
from zotd.runtime import outbox as outbox_module
from zotd.runtime import streams
from zotd.runtime.outbox import Outbox
from zotd.runtime.streams import LineReader, fileno_of

Kind = Literal["pipe", "socket", "memory"]

ALL_KINDS: list[Kind] = ["pipe", "socket", "memory"]
FD_KINDS: list[Kind] = ["pipe", "socket"]

#: No test should come near this; it turns a hang into a failure.
TIMEOUT = 10.0

#: Bigger than a pipe's buffer (64 KiB) and a Unix socket's send buffer.
BIG = 1024 * 1024


@asynccontextmanager
async def open_pair(
    kind: Kind,
) -> AsyncIterator[tuple[trio.abc.SendStream, trio.abc.ReceiveStream]]:
    """A one-way channel: (the end written to, the end read from); both closed after."""
    send: trio.abc.SendStream
    receive: trio.abc.ReceiveStream
    if kind == "pipe":
        r, w = os.pipe()
        receive, send = trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)
    elif kind == "socket":
        a, b = trio.socket.socketpair()
        send, receive = trio.SocketStream(a), trio.SocketStream(b)
    else:
        send, receive = trio.testing.memory_stream_one_way_pair()
    try:
        yield send, receive
    finally:
        with trio.CancelScope(shield=True):
            await send.aclose()
            await receive.aclose()


def raw_fd(stream: trio.abc.SendStream | trio.abc.ReceiveStream) -> int:
    fileno = fileno_of(stream)
    assert fileno is not None
    return fileno()


def pending(stream: trio.abc.ReceiveStream) -> bytes:
    """What can be read from a real fd right now, without waiting (b"" if nothing)."""
    try:
        return os.read(raw_fd(stream), BIG)
    except BlockingIOError:
        return b""


def fill(stream: trio.abc.SendStream) -> int:
    """Writes to a real fd until the kernel takes no more; returns how much it took."""
    fd = raw_fd(stream)
    total = 0
    chunk = b"\0" * 65536
    while True:
        try:
            total += os.write(fd, chunk)
        except BlockingIOError:
            return total


async def read_to_eof(stream: trio.abc.ReceiveStream, pause: float = 0.0) -> bytes:
    """Everything until end of stream; ``pause`` seconds between small reads drains slowly."""
    data = bytearray()
    size = 16384 if pause else 65536
    while True:
        chunk = await stream.receive_some(size)
        if not chunk:
            return bytes(data)
        data += chunk
        if pause:
            await trio.sleep(pause)


async def read_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        assert chunk, f"end of stream after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


def frames(count: int, tag: str = "f") -> list[bytes]:
    return [f"{tag}{i:04d}\n".encode() for i in range(count)]


class CountingOs:
    """Stands in for the ``os`` module inside zotd.runtime.streams (reads) or
    zotd.runtime.outbox (writes), counting writes per fd."""

    def __init__(self) -> None:
        self.writes: dict[int, int] = {}
        self.failed_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def read(self, fd: int, size: int) -> bytes:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            self.failed_reads += 1
            raise

    def write(self, fd: int, data: bytes | memoryview) -> int:
        self.writes[fd] = self.writes.get(fd, 0) + 1
        return os.write(fd, data)


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_reader_waits_after_a_short_read_instead_of_reading_in_vain(
    kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = CountingOs()
    monkeypatch.setattr(streams, "os", counting)
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            got: list[list[bytes | Oversized]] = []

            async def reader() -> None:
                async for lines in LineReader(receive, max_line=1024):
                    got.append(lines)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                for n in range(5):
                    await trio.testing.wait_all_tasks_blocked()  # the reader waits
                    await send.send_all(b"line %d\n" % n)
                await trio.testing.wait_all_tasks_blocked()
                await send.aclose()
            assert got == [[b"line %d" % n] for n in range(5)]
            # Each short read drained the stream: the next one waited for data
            # first, so no read came back empty-handed (the first read, before
            # anything was known, may).
            assert counting.failed_reads <= 1


# --- fileno_of -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_fileno_of(kind: Kind) -> None:
    async with open_pair(kind) as (send, receive):
        send_fileno, receive_fileno = fileno_of(send), fileno_of(receive)
        if kind == "memory":
            assert send_fileno is None
            assert receive_fileno is None
            return
        assert send_fileno is not None
        assert receive_fileno is not None
        if isinstance(send, trio.lowlevel.FdStream):
            assert send_fileno() == send.fileno()
        if isinstance(send, trio.SocketStream):
            assert send_fileno() == send.socket.fileno()
        assert send_fileno() >= 0
        assert receive_fileno() >= 0
        assert send_fileno() != receive_fileno()
        # Asked again after a close, it tells so (its number may be reused).
        await send.aclose()
        assert send_fileno() == -1
        assert receive_fileno() >= 0


def reuse_number(number: int, end: Literal["read", "write"]) -> int:
    """Puts one end of a new, unrelated pipe at fd ``number`` (which must be free);
    returns the other end. The caller closes both."""
    r, w = os.pipe()  # may well get ``number`` itself, the lowest free
    mine, other = (r, w) if end == "read" else (w, r)
    if other == number:
        moved = os.dup(other)
        os.close(other)
        other = moved
    if mine != number:
        os.dup2(mine, number)
        os.close(mine)
    return other


# --- Outbox: writing --------------------------------------------------------------------


@pytest.mark.parametrize("kind", FD_KINDS)
@pytest.mark.parametrize("how", ["put_nowait", "put"])
async def test_lone_frame_is_written_inline(kind: Kind, how: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=4)
            # No writer task has run, and putting takes no checkpoint: the frame
            # is in the kernel by the time the put returns.
            with trio.testing.assert_no_checkpoints():
                if how == "put":
                    await outbox.put(b"hello\n")
                else:
                    assert outbox.put_nowait(b"hello\n") is True
            assert len(outbox) == 0
            assert pending(receive) == b"hello\n"

            # Another lone frame goes the same way; one of a busy stream
            # (alone=False) is queued for the writer.
            assert outbox.put_nowait(b"again\n") is True
            assert pending(receive) == b"again\n"
            assert outbox.put_nowait(b"second\n", alone=False) is True
            assert len(outbox) == 1
            assert pending(receive) == b""

            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                assert await read_exactly(receive, 7) == b"second\n"
                assert len(outbox) == 0
                outbox.close()
            assert await read_to_eof(receive) == b""


async def test_memory_stream_frames_go_through_the_writer() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair("memory") as (send, receive):
            outbox = Outbox(send, limit=4)
            # Without an fd there is no inline write: the frame waits for run().
            assert outbox.put_nowait(b"one\n") is True
            await outbox.put(b"two\n")
            assert len(outbox) == 2
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                assert await read_exactly(receive, 8) == b"one\ntwo\n"
                outbox.close()
            assert await read_to_eof(receive) == b""


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_frames_put_together_go_in_one_write_in_order(
    kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = CountingOs()
    monkeypatch.setattr(outbox_module, "os", counting)
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=100)
            sent = frames(50)
            for frame in sent:
                assert outbox.put_nowait(frame, alone=False) is True
            assert len(outbox) == 50
            if kind != "memory":
                assert pending(receive) == b""  # queued, not written
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                expected = b"".join(sent)
                assert await read_exactly(receive, len(expected)) == expected
                if kind != "memory":
                    assert counting.writes == {raw_fd(send): 1}
                outbox.close()
            assert await read_to_eof(receive) == b""


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_frames_put_during_a_pending_flush_follow_the_inline_one(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=100)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                await trio.testing.wait_all_tasks_blocked()
                sent = frames(20)
                # Back to back, with no checkpoint: the first goes inline, the
                # rest (a busy stream's) wait for the writer, which sends them
                # together.
                await outbox.put(sent[0])
                for frame in sent[1:]:
                    await outbox.put(frame, alone=False)
                assert len(outbox) == 19
                expected = b"".join(sent)
                assert await read_exactly(receive, len(expected)) == expected
                outbox.close()
            assert await read_to_eof(receive) == b""


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_burst_from_one_task_arrives_in_order_without_loss(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=16)  # the burst fills it: puts wait for room
            sent = frames(200)
            received = b""

            async def reader() -> None:
                nonlocal received
                received = await read_to_eof(receive)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                nursery.start_soon(reader)
                await trio.testing.wait_all_tasks_blocked()
                for frame in sent:
                    await outbox.put(frame)
                outbox.close()
            assert received == b"".join(sent)


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_order_is_kept_when_a_big_frame_is_partly_written(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=8)
            big = bytes(range(256)) * (BIG // 256) + b"\n"
            small = frames(60)
            received = b""

            async def slow_reader() -> None:
                nonlocal received
                received = await read_to_eof(receive, pause=0.001)

            async def producer() -> None:
                for frame in small:
                    await outbox.put(frame)
                    await trio.sleep(0.002)
                outbox.close()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                await trio.testing.wait_all_tasks_blocked()
                assert outbox.put_nowait(big) is True
                assert len(outbox) == 1  # the part the kernel did not take
                nursery.start_soon(producer)
                nursery.start_soon(slow_reader)
            assert len(received) == len(big) + sum(map(len, small))
            assert received == big + b"".join(small)


async def test_lone_frame_waits_for_a_flush_of_queued_frames() -> None:
    """A frame put while the writer is part-way through frames that were queued
    (not written inline) must not be written into the middle of them."""
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            outbox = Outbox(send, limit=8)
            big = b"A" * BIG + b"\n"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                await trio.testing.wait_all_tasks_blocked()
                outbox.put_nowait(big, alone=False)
                # The writer takes it, fills the pipe, and waits for room.
                await trio.testing.wait_all_tasks_blocked()
                # The peer reads some; before the writer wakes, a lone frame.
                head = pending(receive)
                assert 0 < len(head) < len(big)
                outbox.put_nowait(b"B\n")
                outbox.close()
                rest = await read_to_eof(receive)
            assert head + rest == big + b"B\n"


@pytest.mark.parametrize("kind", FD_KINDS)
@pytest.mark.parametrize("path", ["inline", "queued"])
async def test_outbox_does_not_write_through_a_reused_fd_number(kind: Kind, path: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, _receive):
            outbox = Outbox(send, limit=4)
            old = raw_fd(send)
            # Its owner closes the stream behind the outbox's back, and the
            # number goes to an unrelated pipe.
            await send.aclose()
            other_r = reuse_number(old, "write")
            os.set_blocking(other_r, False)
            try:
                if path == "inline":
                    with pytest.raises(trio.BrokenResourceError):
                        outbox.put_nowait(b"frame\n")
                else:
                    assert outbox.put_nowait(b"frame\n", alone=False) is True
                with pytest.raises(trio.BrokenResourceError):
                    await outbox.run()
                with pytest.raises(BlockingIOError):
                    os.read(other_r, 100)  # nothing went to the unrelated pipe
            finally:
                os.close(old)
                os.close(other_r)


# --- Outbox: limit ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_put_nowait_says_no_when_limit_frames_wait(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=3)
            sent = frames(3)
            for frame in sent:
                assert outbox.put_nowait(frame, alone=False) is True
            assert outbox.put_nowait(b"dropped\n", alone=False) is False
            assert outbox.put_nowait(b"dropped\n") is False
            assert len(outbox) == 3
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                outbox.close()
            assert await read_to_eof(receive) == b"".join(sent)


async def test_put_nowait_limit_counts_queued_frames_not_the_inline_one() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            outbox = Outbox(send, limit=2)
            assert outbox.put_nowait(b"inline\n") is True
            assert outbox.put_nowait(b"q1\n", alone=False) is True
            assert outbox.put_nowait(b"q2\n", alone=False) is True
            assert outbox.put_nowait(b"q3\n", alone=False) is False
            assert len(outbox) == 2
            assert pending(receive) == b"inline\n"


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_put_waits_for_room_then_succeeds(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=2)
            sent = frames(2)
            for frame in sent:
                assert outbox.put_nowait(frame, alone=False) is True
            put_done = trio.Event()

            async def late_put() -> None:
                await outbox.put(b"late\n")
                put_done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(late_put)
                await trio.testing.wait_all_tasks_blocked()
                assert not put_done.is_set()  # no writer yet: no room
                assert len(outbox) == 2
                nursery.start_soon(outbox.run)
                await put_done.wait()
                outbox.close()
            assert await read_to_eof(receive) == b"".join(sent) + b"late\n"


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_forced_frame_is_queued_past_the_limit(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=2)
            sent = frames(2)
            for frame in sent:
                assert outbox.put_nowait(frame, alone=False) is True
            assert outbox.put_nowait(b"reply\n", alone=False) is False
            assert outbox.put_nowait(b"reply\n", force=True) is True
            assert outbox.put_nowait(b"forced\n", alone=False, force=True) is True
            assert len(outbox) == 4
            assert outbox.put_nowait(b"dropped\n") is False  # still full for the rest
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                outbox.close()
            assert await read_to_eof(receive) == b"".join(sent) + b"reply\nforced\n"


# --- Outbox: close ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_close_flushes_then_closes(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=10)
            sent = frames(5)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                await trio.testing.wait_all_tasks_blocked()
                for frame in sent:
                    assert outbox.put_nowait(frame, alone=False) is True
                outbox.close()
                with pytest.raises(trio.BrokenResourceError):
                    outbox.put_nowait(b"after\n")
                with pytest.raises(trio.BrokenResourceError):
                    await outbox.put(b"after\n")
            # run() returned without error; the peer sees every frame, then EOF.
            assert await read_to_eof(receive) == b"".join(sent)
            with pytest.raises(trio.BrokenResourceError):
                outbox.put_nowait(b"after\n", alone=False)
            with pytest.raises(trio.ClosedResourceError):
                await send.send_all(b"x")


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_close_of_an_idle_outbox_ends_the_writer(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=10)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.run)
                await outbox.put(b"only\n")
                await trio.testing.wait_all_tasks_blocked()  # the writer parks again
                outbox.close()
            assert await read_to_eof(receive) == b"only\n"


# --- Outbox: the peer goes away -----------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_writer_raises_when_the_peer_is_gone(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=10)
            await receive.aclose()
            assert outbox.put_nowait(b"queued\n", alone=False) is True
            with pytest.raises(trio.BrokenResourceError):
                await outbox.run()
            with pytest.raises(trio.BrokenResourceError):
                outbox.put_nowait(b"later\n")
            with pytest.raises(trio.BrokenResourceError):
                outbox.put_nowait(b"later\n", alone=False)
            with pytest.raises(trio.BrokenResourceError):
                await outbox.put(b"later\n")
            # run() closed its stream on the way out.
            with pytest.raises(trio.ClosedResourceError):
                await send.send_all(b"x")


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_inline_write_to_a_gone_peer_raises(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=10)
            await receive.aclose()
            with pytest.raises(trio.BrokenResourceError):
                outbox.put_nowait(b"lone\n")
            with pytest.raises(trio.BrokenResourceError):
                await outbox.put(b"again\n")
            with pytest.raises(trio.BrokenResourceError):
                await outbox.run()
            with pytest.raises(trio.BrokenResourceError):
                outbox.put_nowait(b"later\n", alone=False)


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_writer_blocked_on_a_full_stream_raises_when_the_peer_goes(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=10)
            assert fill(send) > 0
            raised: list[BaseException] = []

            async def writer() -> None:
                try:
                    await outbox.run()
                except trio.BrokenResourceError as exc:
                    raised.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(writer)
                await outbox.put(b"stuck\n")  # the stream is full: queued
                await trio.testing.wait_all_tasks_blocked()
                assert not raised
                await receive.aclose()
            assert len(raised) == 1
            with pytest.raises(trio.BrokenResourceError):
                await outbox.put(b"later\n")


@pytest.mark.parametrize("kind", FD_KINDS)
@pytest.mark.parametrize("ending", ["cancel", "peer_gone"])
async def test_put_waiting_for_room_is_released_when_the_writer_ends(
    kind: Kind, ending: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            outbox = Outbox(send, limit=2)
            fill(send)  # the peer does not read: the writer gets stuck
            writer_scope = trio.CancelScope()
            put_outcome: list[BaseException | None] = []

            async def writer() -> None:
                with writer_scope:
                    try:
                        await outbox.run()
                    except trio.BrokenResourceError:
                        pass

            async def blocked_put() -> None:
                try:
                    await outbox.put(b"waits\n")
                except trio.BrokenResourceError as exc:
                    put_outcome.append(exc)
                else:
                    put_outcome.append(None)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(writer)
                assert outbox.put_nowait(b"taken\n", alone=False) is True
                await trio.testing.wait_all_tasks_blocked()  # writer waits for room
                assert outbox.put_nowait(b"q1\n", alone=False) is True
                assert outbox.put_nowait(b"q2\n", alone=False) is True
                assert outbox.put_nowait(b"q3\n", alone=False) is False
                nursery.start_soon(blocked_put)
                await trio.testing.wait_all_tasks_blocked()
                assert put_outcome == []  # still waiting for room
                if ending == "cancel":
                    writer_scope.cancel()
                else:
                    await receive.aclose()
            assert len(put_outcome) == 1
            assert isinstance(put_outcome[0], trio.BrokenResourceError)
            with pytest.raises(trio.ClosedResourceError):
                await send.send_all(b"x")  # the writer closed the stream on its way out


# --- LineReader ---------------------------------------------------------------------------


async def collect(reader: LineReader) -> list[list[bytes | Oversized]]:
    return [lines async for lines in reader]


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_lines_split_across_reads_are_joined(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            steps: list[list[bytes | Oversized]] = []

            async def read_all() -> None:
                steps.extend(await collect(LineReader(receive, max_line=100)))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_all)
                # Each piece is read on its own before the next is sent.
                for piece in [b"hel", b"lo\nwor", b"ld\nx\ny\n"]:
                    await send.send_all(piece)
                    await trio.testing.wait_all_tasks_blocked()
                await send.aclose()
            assert steps == [[b"hello"], [b"world", b"x", b"y"]]


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_unterminated_last_line_is_given_at_eof(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            await send.send_all(b"a\nb\nlast")
            await send.aclose()
            steps = await collect(LineReader(receive, max_line=100))
            assert steps == [[b"a", b"b"], [b"last"]]


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_empty_stream_gives_nothing(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            await send.aclose()
            assert await collect(LineReader(receive, max_line=100)) == []


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_oversized_lines_are_reported(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            lines: list[bytes | Oversized] = []

            async def read_all() -> None:
                for step in await collect(LineReader(receive, max_line=8)):
                    lines.extend(step)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_all)
                for piece in [
                    b"short\n" + b"x" * 20 + b"\n12345678\n",
                    b"z" * 6,  # a line that grows too long over two reads
                    b"z" * 6 + b"\nok\n",
                    b"y" * 30,  # too long, and unterminated at EOF
                ]:
                    await send.send_all(piece)
                    await trio.testing.wait_all_tasks_blocked()
                await send.aclose()
            assert lines == [
                b"short",
                Oversized(20),
                b"12345678",
                Oversized(12),
                b"ok",
                Oversized(30),
            ]


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("when", ["while_waiting", "between_steps"])
async def test_closing_the_stream_ends_iteration(kind: Kind, when: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            steps: list[list[bytes | Oversized]] = []
            got_first = trio.Event()
            may_go_on = trio.Event()
            finished = trio.Event()

            async def read_all() -> None:
                async for lines in LineReader(receive, max_line=100):
                    steps.append(lines)
                    got_first.set()
                    await may_go_on.wait()
                finished.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_all)
                await send.send_all(b"one\ntail")
                await got_first.wait()
                if when == "while_waiting":
                    may_go_on.set()
                    await trio.testing.wait_all_tasks_blocked()  # reader waits for data
                    assert not finished.is_set()
                    await receive.aclose()
                else:
                    await receive.aclose()
                    may_go_on.set()
            assert finished.is_set()
            # "like end of stream does": the unterminated tail read so far comes out last.
            assert steps == [[b"one"], [b"tail"]]


@pytest.mark.parametrize("kind", FD_KINDS)
async def test_closed_stream_is_not_read_through_a_reused_fd_number(kind: Kind) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_pair(kind) as (send, receive):
            reader = LineReader(receive, max_line=100)
            await send.send_all(b"mine\n")
            assert await reader.__anext__() == [b"mine"]
            old = raw_fd(receive)
            await receive.aclose()
            # Another part of the daemon opens something that gets the old number.
            other_w = reuse_number(old, "read")
            try:
                os.write(other_w, b"someone else's\n")
                with pytest.raises(StopAsyncIteration):
                    await reader.__anext__()
            finally:
                os.close(old)
                os.close(other_w)


async def test_socket_reader_ends_at_half_close() -> None:
    with trio.fail_after(TIMEOUT):
        a, b = trio.socket.socketpair()
        async with trio.SocketStream(a) as ours, trio.SocketStream(b) as theirs:
            await theirs.send_all(b"req1\nreq2\n")
            await theirs.send_eof()
            assert await collect(LineReader(ours, max_line=100)) == [[b"req1", b"req2"]]
            # Our direction still works after their half-close.
            await ours.send_all(b"reply\n")
            assert await theirs.receive_some(100) == b"reply\n"


async def test_reader_lets_other_tasks_run_while_data_never_runs_out() -> None:
    """A peer has filled a 1 MiB pipe: every read finds data and none waits;
    the reader still lets another task of the same run make progress."""
    with trio.fail_after(TIMEOUT):
        async with open_pair("pipe") as (send, receive):
            try:
                fcntl.fcntl(raw_fd(send), fcntl.F_SETPIPE_SZ, BIG)
            except OSError as exc:  # pragma: no cover - depends on the host's limits
                if exc.errno in (errno.EPERM, errno.EINVAL):
                    pytest.skip(f"cannot grow a pipe to {BIG} bytes: {exc}")
                raise
            line = b"x" * 1023 + b"\n"
            data = line * (BIG // len(line))
            assert os.write(raw_fd(send), data) == len(data)  # all of it, at once
            await send.aclose()

            count = 0

            async def counter() -> None:
                nonlocal count
                while True:
                    count += 1
                    await trio.lowlevel.checkpoint()

            seen: list[int] = []
            total = 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(counter)
                await trio.lowlevel.checkpoint()  # the counter is up and running
                async for lines in LineReader(receive, max_line=2048):
                    seen.append(count)  # no checkpoint in this loop's body
                    total += len(lines)
                nursery.cancel_scope.cancel()
            assert total == BIG // len(line)
            assert len(seen) >= BIG // streams.READ_SIZE
            # The counter runs once per scheduler batch; the reader yields once per step.
            assert seen[-1] - seen[0] >= len(seen) - 2
