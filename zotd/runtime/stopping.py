"""Ending an extension's process: the stop escalation, and the kill.

A graceful stop (reference, "Lifecycle", step 6) is the supervisor's
``shutdown`` frame and stdin closed, then :func:`wind_down`: a wait of
``shutdown_timeout`` for the process to exit, then SIGTERM to its process
group and a wait of ``kill_timeout``, then SIGKILL and another. A refused or
stuck extension is killed at once (:func:`kill`); a supervisor cancelled
while its process lives kills the group and reaps it (:func:`kill_and_reap`).

Signals go to the whole group (see :mod:`.process`), so wrappers such as
``sh -c`` take their children with them. Whether the process has exited is
the supervisor's ``exited`` event, set once its ``wait`` has returned.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import trio

from ..model.config import Config
from .process import Process

__all__ = ["kill", "kill_and_reap", "wind_down"]


async def wind_down(
    process: Process, exited: trio.Event, config: Config, note: Callable[[str], None]
) -> None:
    """Waits ``shutdown_timeout`` for ``exited``, then SIGTERMs the process's
    group and waits ``kill_timeout``, then SIGKILLs it and waits
    ``kill_timeout`` again; ``note`` gets a line before each signal. Returns
    once ``exited`` is set, or after the last wait. The caller has sent
    ``shutdown`` and closed stdin.

    Cancellation raises :exc:`trio.Cancelled` at once and leaves the
    escalation where it was: no further signal is sent.
    """
    with trio.move_on_after(config.shutdown_timeout):
        await exited.wait()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if exited.is_set():
            break
        note(f"did not exit after shutdown; sending {signal.Signals(sig).name}")
        process.signal_group(sig)
        with trio.move_on_after(config.kill_timeout):
            await exited.wait()


async def kill_and_reap(process: Process, config: Config) -> int | None:
    """SIGKILLs the process's group and waits for it to exit, up to
    ``kill_timeout``; returns its exit code, or ``None`` if that wait ran out.

    Shielded: cancellation does not cut it short (it is what a cancelled
    supervisor does on its way out); ``kill_timeout`` alone bounds it.
    """
    process.signal_group(signal.SIGKILL)
    with trio.CancelScope(shield=True), trio.move_on_after(config.kill_timeout):
        return await process.wait()
    return None


def kill(process: Process) -> None:
    """SIGKILLs the process's group now (a refused or stuck extension); its
    supervisor reaps it."""
    process.signal_group(signal.SIGKILL)
