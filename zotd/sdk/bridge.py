"""The runtime's face to what handlers do: the loop, reached from any thread.

:class:`Bridge` is the half of :class:`~zotd.sdk.runtime.Runtime` that
:class:`~zotd.sdk.actions.Actions` talks to: it writes frames on the event
loop's thread (:meth:`Bridge.send`), runs what other threads ask there
(:meth:`Bridge.soon`), makes, opens, redraws and closes the panels handlers
open themselves, merges a tool call's progress, and gives the host's panel
events to the live panel they are for. Imported with the runtime, once the
handshake is out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from ..protocol import extension as ep
from .panels import KeyPress, LivePanel, LivePanels
from .requests import Request
from .stdio import Stdio


class Bridge:
    """The event loop, as handlers' actions reach it (a base class of ``Runtime``).

    Args:
        stdio: where frames are written.
    """

    def __init__(self, stdio: Stdio) -> None:
        self._stdio = stdio
        #: The running loop, once ``main()`` has started.
        self.loop: asyncio.AbstractEventLoop | None = None
        self.live_panels = LivePanels()

    def send(self, frame: msgspec.Struct) -> None:
        """Writes ``frame`` (left out and logged if it cannot be encoded); only
        ever called on the event loop's thread: one frame, one write loop,
        never interleaved with another."""
        self._stdio.send((frame,))

    def on_loop(self) -> bool:
        """Whether the caller runs on this runtime's event loop."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def live_panel(self, panel_id: str) -> LivePanel:
        """A new :class:`LivePanel` (from any thread), not open yet (see :meth:`open_live`)."""
        keys: asyncio.Queue[KeyPress | None] = asyncio.Queue()
        return LivePanel(panel_id, self.panel_out, keys)

    def open_live(self, panel: LivePanel, spec: ep.PanelSpec, request: Request | None) -> None:
        """On the loop: opens ``panel`` (for ``request``, which closes it if cancelled)."""
        if request is not None:
            if request.cancelled:
                panel.ended()  # too late: the host gave up the call
                return
            request.on_cancel.append(panel.close)
        self.live_panels.opened(panel)
        self.send(ep.OpenPanel(panel=spec))

    def panel_out(self, panel: LivePanel, frame: ep.PanelRender | ep.PanelClose) -> None:
        """Sends a live panel's redraw or close (from any thread); nothing
        once it is closed."""

        def out() -> None:
            if panel.closed:
                return
            if isinstance(frame, ep.PanelClose):
                self.live_panels.closing(panel)
            self.send(frame)

        self.soon("panel", out)

    def close_panel(self, panel_id: str) -> None:
        """On the loop: ``ext.close_panel()`` (a live panel's waiters see it closed)."""
        self.live_panels.close_id(panel_id)
        self.send(ep.PanelClose(panel_id=panel_id))

    def queue_progress(self, request: Request, frame: ep.ToolProgress) -> None:
        """On the loop: sends ``frame`` for ``request`` now, or merged, later."""
        assert self.loop is not None
        request.queue_progress(frame, self.loop, self.send)

    def soon(self, what: str, do: Callable[..., None], *args: Any) -> None:
        """Runs ``do(*args)`` on the event loop: now if called there, else soon."""
        loop = self.loop
        if loop is None:
            raise RuntimeError(f"{what}() works once run() has started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            do(*args)
            return
        try:
            loop.call_soon_threadsafe(do, *args)
        except RuntimeError:
            pass  # the loop is closed: the extension is leaving

    def to_live_panel(self, frame: ep.PanelKey | ep.PanelResize | ep.PanelClose) -> bool:
        """Gives a panel event to the live panel it is for; ``False`` if none
        takes it (a resize never: it goes to ``@ext.on_panel_resize``)."""
        if isinstance(frame, ep.PanelKey):
            return self.live_panels.key(frame.panel_id, frame.key, frame.text)
        if isinstance(frame, ep.PanelClose):
            return self.live_panels.closed(frame.panel_id)
        return False
