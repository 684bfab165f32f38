"""Checking rewritten tool arguments against the tool's schema: bounded, off the event loop.

A guard that rewrites a call's arguments gets them checked against the
tool's JSON Schema (:meth:`~zotd.model.registry.Tool.check_args`). The
check is plain Python and may be slow, and some of it holds the GIL (a
backtracking ``pattern`` such as ``^(a+)+$``, ``uniqueItems`` sorting a long
array), so no thread can keep it from stalling the event loop. Hence:

* a check that may hold the GIL for long (:func:`~zotd.model.args.may_stall`)
  runs in a child process (``python -I``, in ``/``: nothing from the
  daemon's working directory is imported), killed at the deadline; the
  others run in a worker thread (abandoned at the deadline: it finishes on
  its own);
* at most :data:`MAX_CHILDREN` children and :data:`MAX_THREADS` threads check
  at once, daemon-wide; a check waits for its turn inside its deadline;
* results are remembered (:class:`Results`): the same arguments for the
  same schema are not checked again, and arguments whose check ran for
  :data:`SLOW` seconds or more without finishing are refused at once (a
  guard repeating a backtracking rewrite costs one child, not one a call).

It fails closed: a check that cannot be made (no time left, the child
failed or could not be started) raises :exc:`Unchecked`, and the caller
refuses the rewrite.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Final, TypeVar

import msgspec
import trio

import zotd

from ..model import args as model_args
from ..model.registry import Tool
from . import threads

log = logging.getLogger(__name__)

V = TypeVar("V")

#: Checks in child processes at once, daemon-wide.
MAX_CHILDREN: Final = 4
#: Checks in worker threads at once, daemon-wide (abandoned ones included).
MAX_THREADS: Final = 4
#: Results remembered.
MAX_RESULTS: Final = 256
#: Seconds a check must have run, without finishing, for its arguments to be
#: refused without a check from then on.
SLOW: Final = 1.0

#: The child's program: the daemon's own import path, then the check.
_CHILD: Final = "import sys; sys.path[:0] = sys.argv[1:]; from zotd.model.args import main; main()"


class Unchecked(Exception):
    """The check could not be made; the message says why."""


class Results:
    """What earlier checks found, by schema and arguments (pure; time is passed in).

    Remembers, for the last :data:`MAX_RESULTS` pairs, either the result of a
    check that finished, or how long a check ran without finishing (if that
    was :data:`SLOW` seconds or more).
    """

    __slots__ = ("_done", "_slow")

    def __init__(self) -> None:
        self._done: OrderedDict[bytes, str | None] = OrderedDict()
        self._slow: OrderedDict[bytes, float] = OrderedDict()

    @staticmethod
    def key(schema: bytes, args: bytes) -> bytes:
        """The pair's key (a digest: arguments may be megabytes)."""
        digest = hashlib.blake2b(digest_size=20)
        digest.update(len(schema).to_bytes(8, "big"))
        digest.update(schema)
        digest.update(args)
        return digest.digest()

    def get(self, key: bytes) -> tuple[bool, str | None]:
        """``(True, result)`` if a check of ``key`` finished, else ``(False, None)``."""
        if key not in self._done:
            return False, None
        self._done.move_to_end(key)
        return True, self._done[key]

    def slow(self, key: bytes) -> float | None:
        """How long a check of ``key`` ran without finishing, if that was
        :data:`SLOW` seconds or more; else ``None``."""
        return self._slow.get(key)

    def finished(self, key: bytes, result: str | None) -> None:
        """A check of ``key`` found ``result``."""
        _put(self._done, key, result)
        self._slow.pop(key, None)

    def cut_short(self, key: bytes, seconds: float) -> None:
        """A check of ``key`` was stopped after ``seconds`` (remembered from :data:`SLOW` on)."""
        if seconds >= SLOW:
            _put(self._slow, key, max(seconds, self._slow.get(key, 0.0)))


def _put(table: OrderedDict[bytes, V], key: bytes, value: V) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > MAX_RESULTS:
        table.popitem(last=False)


class _State:
    """The daemon-wide bounds and memory of checks (one per trio run)."""

    def __init__(self) -> None:
        self.children = trio.CapacityLimiter(MAX_CHILDREN)
        self.threads = trio.CapacityLimiter(MAX_THREADS)
        self.results = Results()


_state: trio.lowlevel.RunVar[_State] = trio.lowlevel.RunVar("zotd_argcheck")


def _current() -> _State:
    try:
        return _state.get()
    except LookupError:
        state = _State()
        _state.set(state)
        return state


async def check_args(tool: Tool, args: msgspec.Raw, deadline: float) -> str | None:
    """:meth:`Tool.check_args`, bounded by ``deadline`` and off the event loop.

    Returns what does not fit, or ``None`` if the arguments fit.

    Raises:
        Unchecked: the check could not be made by ``deadline`` (waiting for
            its turn included), or its child failed or could not be started;
            or one of these arguments was cut short after :data:`SLOW` s before.

    Cancellation abandons the thread (it finishes on its own, its answer
    dropped) or kills the child, then raises :exc:`trio.Cancelled`.
    """
    state = _current()
    schema, raw = bytes(tool.schema), bytes(args)
    key = Results.key(schema, raw)
    known, result = state.results.get(key)
    if known:
        await trio.lowlevel.checkpoint()
        return result
    slow = state.results.slow(key)
    if slow is not None:
        await trio.lowlevel.checkpoint()
        raise Unchecked(
            f"a check of these arguments already ran for {slow:.1f} s without finishing"
        )
    started: float | None = None
    in_child = model_args.may_stall(schema, raw)
    limiter = state.children if in_child else state.threads
    with trio.move_on_at(deadline):
        if not in_child:
            async with limiter:
                started = trio.current_time()
                result = await threads.run_sync(tool.check_args, args, abandon_on_cancel=True)
        else:
            async with limiter:
                started = trio.current_time()
                result = await _check_in_child(schema, raw)
        state.results.finished(key, result)
        return result
    if started is None:
        if limiter.available_tokens == 0:
            busy = f"all {limiter.total_tokens:g} {'children' if in_child else 'threads'}"
            raise Unchecked(f"{busy} checking arguments were busy until the deadline")
        raise Unchecked("no time was left to check them")
    state.results.cut_short(key, trio.current_time() - started)
    raise Unchecked("the check did not finish in time")


async def _kill(process: trio.Process) -> None:
    process.kill()  # nothing to save in a checker: no SIGTERM first, no grace
    await trio.lowlevel.checkpoint()


def _import_path() -> list[str]:
    """Where the child finds zotd and its libraries: where this zotd came
    from, then this process's import path without the working directory
    (``""`` or its absolute path: a cloned repository's ``zotd/`` there must
    not be imported)."""
    root = str(Path(zotd.__file__).resolve().parent.parent)
    here = os.getcwd()
    return [root, *(p for p in sys.path if os.path.isabs(p) and p not in (root, here))]


async def _check_in_child(schema: bytes, args: bytes) -> str | None:
    """The check in a child process, killed if cancelled.

    Raises:
        Unchecked: the child could not be started, failed, or said nothing readable.
    """
    try:
        done = await trio.run_process(
            [sys.executable, "-I", "-c", _CHILD, *_import_path()],
            stdin=b"[" + schema + b"," + args + b"]",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd="/",
            deliver_cancel=_kill,
        )
    except OSError as exc:
        raise Unchecked(f"the checker could not be started: {exc}") from None
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        log.info("argcheck: the checker failed (%d): %s", done.returncode, last)
        raise Unchecked(f"the checker failed (exit status {done.returncode})")
    try:
        message = msgspec.json.decode(done.stdout)
    except msgspec.DecodeError:
        raise Unchecked("the checker's answer could not be read") from None
    if message is not None and not isinstance(message, str):
        raise Unchecked("the checker's answer could not be read")
    return message
