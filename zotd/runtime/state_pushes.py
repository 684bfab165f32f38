"""A workspace's ``extension_state`` pushes, coalesced.

A change of an extension's state (or a new process under its name) is
pushed at once, in order with everything else the workspace pushes. A
change of its registrations alone (a registration after ``ready``) is held
back: the first is pushed in the next scheduling round, later ones at most
once per :data:`STATE_PUSH_INTERVAL`, each push carrying the latest of
everything held. The :class:`~zotd.runtime.workspace.Workspace` owns one
:class:`StatePushes` and runs its :meth:`~StatePushes.run` in its nursery.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping

import trio

from ..model.registry import Registry
from ..protocol import agent as ap
from .extension import Extension, State

#: At most one ``extension_state`` push per extension this often (seconds)
#: while only its registrations change (late registrations, in a burst);
#: a change of state is pushed at once. See :meth:`StatePushes.changed`.
STATE_PUSH_INTERVAL = 0.05


class StatePushes:
    """The ``extension_state`` pushes of one workspace.

    Args:
        extensions: the workspace's extensions by name (read, never changed).
        registry: the workspace's registry (what each push lists).
        subscribers: the workspace's subscribed clients (read, never changed).
        push: sends an encoded frame to every subscriber.
    """

    def __init__(
        self,
        extensions: Mapping[str, Extension],
        registry: Registry,
        subscribers: Collection[object],
        push: Callable[[bytes], None],
    ) -> None:
        self._extensions = extensions
        self._registry = registry
        self._subscribers = subscribers
        self._push = push
        #: The extensions whose push is held back (their registrations
        #: changed, their state did not), in order; what each name's last
        #: push showed (the extension and its state), and when it went
        #: (trio time).
        self._held: dict[str, Extension] = {}
        self._pushed: dict[str, tuple[Extension, str]] = {}
        self._pushed_at: dict[str, float] = {}
        self._held_changed = trio.Event()

    def changed(self, ext: Extension) -> None:
        """Tells the subscribers what ``ext`` is and holds now, coalesced.

        A change of state is pushed at once; a change of its registrations
        alone is held back (see the module's docstring). Each push lists
        all the extension's names (O(its tools) to build and send), so one
        push per registration would make a burst of N tools cost O(N²);
        held back, a burst costs one push per interval it lasts (a few),
        the last one complete, and the event loop stays free for
        everybody else's requests meanwhile.
        """
        if not self._subscribers:
            return
        last = self._pushed.get(ext.name)
        if last is not None and last[0] is ext and last[1] == ext.state:
            if ext.name not in self._held:
                self._held[ext.name] = ext
                self._held_changed.set()
            return
        self._held.pop(ext.name, None)  # what was held goes in this push
        self._send(ext)

    def removed(self, name: str) -> None:
        """Pushes that extension ``name`` is gone (what was held of it is dropped)."""
        self._held.pop(name, None)
        self._pushed.pop(name, None)
        self._pushed_at.pop(name, None)
        self._push(ap.encode(ap.ExtensionStatePush(name, "removed", [], [])))

    async def run(self) -> None:
        """Pushes the held-back states, each once its interval since its last
        push has passed; runs until cancelled.

        Cancellation ends it where it waits (for something held, or for an
        interval to pass); what is held then is never pushed.
        """
        while True:
            if not self._held:
                await self._held_changed.wait()
                self._held_changed = trio.Event()
                continue
            due = min(self._pushed_at.get(n, -math.inf) for n in self._held)
            due += STATE_PUSH_INTERVAL
            with trio.move_on_at(due):
                await self._held_changed.wait()
            self._held_changed = trio.Event()
            # At least one more round: whatever else arrives in this one joins.
            await trio.lowlevel.checkpoint()
            now = trio.current_time()
            for name, ext in list(self._held.items()):
                if self._pushed_at.get(name, -math.inf) + STATE_PUSH_INTERVAL <= now:
                    del self._held[name]
                    if self._subscribers and self._extensions.get(name) is ext:
                        self._send(ext)

    def _send(self, ext: Extension) -> None:
        self._pushed[ext.name] = (ext, ext.state)
        self._pushed_at[ext.name] = trio.current_time()
        frame = ap.ExtensionStatePush(
            extension=ext.name,
            state=ext.state,
            commands=self._registry.commands_of(ext.name),
            tools=self._registry.tools_of(ext.name),
            error=ext.last_error
            if ext.state in (State.FAILED, State.RESTARTING, State.UNTRUSTED)
            else "",
        )
        self._push(ap.encode(frame))
