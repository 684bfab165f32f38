"""Panels a handler opens itself, and waits on: ``ext.open_panel()``.

Current zot lets an extension open a panel at any time (an ``open_panel``
frame of its own, not a command's answer), typically from an interactive
tool that asks the user something. :class:`LivePanel` is such a panel: the
handler redraws it, closes it, and awaits the keys typed into it
(:meth:`LivePanel.key`, or ``async for``). While it is open, its keys and
its close come to it, not to ``@ext.on_panel_key`` / ``@ext.on_panel_close``
(:class:`LivePanels` routes them, on the event loop, in the order they
came).

Imported before the handshake (see :mod:`zotd.sdk.extension`): no asyncio
here; the queue a panel's keys wait in is the runtime's to make.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import msgspec

from ..protocol.ext_frames import PanelClose, PanelRender

if TYPE_CHECKING:
    import asyncio


class KeyPress(msgspec.Struct, frozen=True):
    """A key the user pressed in a panel: ``key`` names it (``up``,
    ``enter``, ``escape``, ``a``, ...), ``text`` is what it types (may be ``""``)."""

    key: str
    text: str = ""


class LivePanel:
    """A panel opened with ``ext.open_panel()``, until it is closed.

    Use it in an ``async def`` handler: ``await panel.key()`` is the next
    key (``None`` once the panel is closed, by the user or by you), and
    ``async for key in panel`` goes through them until then. As an ``async
    with`` block, it is closed when the block ends. ``render`` and
    ``close`` work from any thread.

    Args:
        panel_id: its id, carried by its events.
        send: sends one of its frames, from any thread; on the loop, drops
            it once the panel is closed (the runtime's ``panel_out``).
        keys: where its keys wait (an empty queue; ``None`` once it is closed).
    """

    def __init__(
        self,
        panel_id: str,
        send: Callable[[LivePanel, PanelRender | PanelClose], None],
        keys: asyncio.Queue[KeyPress | None],
    ) -> None:
        self.id = panel_id
        self._send = send
        self._keys = keys
        #: Closed (by either side): no more keys will come.
        self.closed = False

    async def key(self) -> KeyPress | None:
        """The next key pressed in it; ``None`` once it is closed."""
        if self.closed and self._keys.empty():
            return None
        pressed = await self._keys.get()
        if pressed is None:
            self._keys.put_nowait(None)  # for the next one who asks
        return pressed

    def __aiter__(self) -> LivePanel:
        return self

    async def __anext__(self) -> KeyPress:
        pressed = await self.key()
        if pressed is None:
            raise StopAsyncIteration
        return pressed

    async def __aenter__(self) -> LivePanel:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def render(self, *, title: str = "", lines: Sequence[str] | str = (), footer: str = "") -> None:
        """Redraws it whole (what is left out is blank); any thread."""
        lines = lines.splitlines() if isinstance(lines, str) else [str(line) for line in lines]
        self._send(self, PanelRender(panel_id=self.id, title=title, lines=lines, footer=footer))

    def close(self) -> None:
        """Closes it (once; later calls do nothing); any thread."""
        self._send(self, PanelClose(panel_id=self.id))

    # --- on the loop, from LivePanels -------------------------------------------------

    def pressed(self, key: KeyPress) -> None:
        if not self.closed:
            self._keys.put_nowait(key)

    def ended(self) -> None:
        if not self.closed:
            self.closed = True
            self._keys.put_nowait(None)


class LivePanels:
    """The open :class:`LivePanel` objects, by id; touched on the loop only."""

    def __init__(self) -> None:
        self._open: dict[str, LivePanel] = {}

    def opened(self, panel: LivePanel) -> None:
        """``panel`` was opened (one that had its id is taken to be gone)."""
        old = self._open.get(panel.id)
        if old is not None and old is not panel:
            old.ended()
        self._open[panel.id] = panel

    def closing(self, panel: LivePanel) -> None:
        """The extension closes ``panel``."""
        if self._open.get(panel.id) is panel:
            del self._open[panel.id]
        panel.ended()

    def close_id(self, panel_id: str) -> None:
        """The extension closes ``panel_id`` with ``ext.close_panel()``."""
        panel = self._open.pop(panel_id, None)
        if panel is not None:
            panel.ended()

    def key(self, panel_id: str, key: str, text: str) -> bool:
        """A key the host says was pressed in ``panel_id``, given to its live
        panel; ``False`` if it has none."""
        panel = self._open.get(panel_id)
        if panel is None:
            return False
        panel.pressed(KeyPress(key, text))
        return True

    def closed(self, panel_id: str) -> bool:
        """The host closed ``panel_id``: its live panel ends; ``False`` if it has none."""
        panel = self._open.pop(panel_id, None)
        if panel is None:
            return False
        panel.ended()
        return True

    def end_all(self) -> None:
        """The host is gone: every panel is closed, its waiters woken."""
        panels, self._open = list(self._open.values()), {}
        for panel in panels:
            panel.ended()
