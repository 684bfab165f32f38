"""A workspace's open panels, and who opened each.

An extension's command reply may open a panel; it belongs to the client
that ran the command. Its ``panel_render`` and ``panel_close`` frames go to
that client alone; the client's keys, resizes and close go back to the
extension. A panel closes when the extension closes it, stops or exits
("extension", "stopped"), when the client leaves (the extension is told),
and when another client opens it again ("moved").

Nothing here waits: frames are queued on the client's outbox or the
extension's stdin (``deliver``, ``send_nowait``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep

#: (extension name, panel id).
Key = tuple[str, str]


class Subscriber(Protocol):
    """A client connection that takes push frames."""

    def push(self, frame: bytes) -> None:
        """Queues an encoded push frame if the client subscribed; never blocks."""
        ...

    def deliver(self, frame: bytes) -> None:
        """Queues an encoded push frame meant for this client alone (its
        panels, its calls' progress), subscribed or not; never blocks."""
        ...


class Target(Protocol):
    """What panels need of an extension (:class:`~zotd.runtime.extension.Extension`)."""

    @property
    def name(self) -> str: ...

    def note(self, message: str) -> None:
        """Appends a line from the daemon to the extension's log."""
        ...

    def send_nowait(self, frame: bytes) -> bool:
        """Queues an encoded frame for the extension's stdin; ``False`` if it cannot."""
        ...


class Panels:
    """The open panels of one workspace.

    Args:
        extensions: the workspace's extensions by name (the live mapping).
    """

    def __init__(self, extensions: Mapping[str, Target]) -> None:
        self._extensions = extensions
        #: Open panels: (extension, panel id) -> the client that opened it.
        self._owners: dict[Key, Subscriber] = {}

    def open(self, extension: str, panel_id: str, client: Subscriber) -> None:
        """``client`` opened the panel (its command's reply said ``open_panel``)."""
        key = (extension, panel_id)
        before = self._owners.get(key)
        if before is not None and before is not client:
            self._closed(key, "moved")  # opened again, by another client: it moves
        self._owners[key] = client

    def on_frame(self, ext: Target, frame: ep.PanelRender | ep.PanelClose) -> None:
        """Routes an extension's ``panel_render`` or ``panel_close`` to the opener;
        a frame for a panel that is not open is dropped, and noted in its log."""
        key = (ext.name, frame.panel_id)
        owner = self._owners.get(key)
        if owner is None:
            tag = type(frame).__struct_config__.tag
            ext.note(f"dropped `{tag}` for panel {frame.panel_id!r}: it is not open")
        elif isinstance(frame, ep.PanelRender):
            owner.deliver(
                ap.encode(
                    ap.PanelRenderPush(
                        ext.name, frame.panel_id, frame.title, frame.lines, frame.footer
                    )
                )
            )
        else:
            self._closed(key, "extension")

    def extension_stopped(self, extension: str) -> None:
        """Closes the extension's panels; each client is told ("stopped")."""
        for key in [key for key in self._owners if key[0] == extension]:
            self._closed(key, "stopped")

    def client_left(self, client: Subscriber) -> None:
        """Closes the panels ``client`` had open; their extensions are told."""
        for key, owner in list(self._owners.items()):
            if owner is client:
                self._close(key)

    def input(self, client: Subscriber, req: ap.PanelKey | ap.PanelResize | ap.PanelClose) -> None:
        """Passes a client's key, resize or close on to the panel's extension.

        Raises:
            RequestError: the client has no such panel open, or (without
                ``extension``) more than one; the extension's input is full.
        """
        owned = [
            key
            for key, owner in self._owners.items()
            if owner is client
            and key[1] == req.panel_id
            and (not req.extension or key[0] == req.extension)
        ]
        if not owned:
            whose = f" of extension {req.extension!r}" if req.extension else ""
            raise RequestError(
                ap.ErrorCode.NOT_FOUND,
                f"no panel {req.panel_id!r}{whose} is open on this connection",
            )
        if len(owned) > 1:
            names = sorted(key[0] for key in owned)
            raise RequestError(
                ap.ErrorCode.BAD_REQUEST,
                f"panels {req.panel_id!r} of {names} are open: say which with `extension`",
            )
        key = owned[0]
        if isinstance(req, ap.PanelClose):
            self._close(key)
            return
        frame: ep.PanelKey | ep.PanelResize
        if isinstance(req, ap.PanelKey):
            frame = ep.PanelKey(panel_id=req.panel_id, key=req.key, text=req.text)
        else:
            frame = ep.PanelResize(panel_id=req.panel_id, width=req.width, height=req.height)
        ext = self._extensions.get(key[0])
        if ext is None or not ext.send_nowait(ep.encode(frame)):
            raise RequestError(
                ap.ErrorCode.EXTENSION_FAILED,
                f"extension {key[0]!r} is not taking input (not running, or not reading it)",
            )

    def _closed(self, key: Key, reason: str) -> None:
        """Forgets an open panel and tells the client that had it why."""
        owner = self._owners.pop(key)
        owner.deliver(ap.encode(ap.PanelClosePush(key[0], key[1], reason=reason)))

    def _close(self, key: Key) -> None:
        """Forgets an open panel and tells its extension to close it."""
        del self._owners[key]
        ext = self._extensions.get(key[0])
        if ext is not None:
            ext.send_nowait(ep.encode(ep.PanelClose(panel_id=key[1])))
