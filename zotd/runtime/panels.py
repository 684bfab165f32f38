"""A workspace's open panels, and who has each open.

An extension's command reply may open a panel; it belongs to the client
that ran the command. A spontaneous ``open_panel`` (current zot) opens one
too: on the agent whose tool call the extension is serving, else on every
subscriber of the workspace (see :mod:`zotd.runtime.one_way`); so a panel
is open on one client or on several, its *owners*.

Its ``panel_render`` and ``panel_close`` frames go to its owners alone; their
keys and resizes go back to the extension. A panel closes when the extension
closes it, stops or exits ("extension", "stopped"), when an owner closes it
(the extension is told; the other owners hear "closed": whoever answers an
"ask the user" panel answers for all), and, for an owner, when another
client opens it again ("moved"). An owner that leaves just stops having
it; the extension is told when its last owner has gone.

Nothing here waits: frames are queued on the client's outbox or the
extension's stdin (``deliver``, ``send_nowait``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..model.errors import RequestError
from ..protocol import agent as ap
from ..protocol import extension as ep

#: (extension name, panel id).
Key = tuple[str, str]

#: Panels one extension may have open at once; opening one more closes its
#: oldest (as if the extension had closed it), so that an extension opening
#: panel after panel that nobody closes costs bounded memory.
MAX_PANELS = 64


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
        #: Open panels: (extension, panel id) -> the clients that have it open,
        #: in the order they were given it (never empty).
        self._owners: dict[Key, list[Subscriber]] = {}

    def open(self, extension: str, panel_id: str, client: Subscriber) -> None:
        """``client`` opened the panel (its command's reply said ``open_panel``)."""
        self.open_on(extension, panel_id, [client])

    def open_on(self, extension: str, panel_id: str, clients: Sequence[Subscriber]) -> None:
        """The panel is open on ``clients`` now (none: nothing changes). A client
        that had it and is not among them is told it "moved"; the others keep it."""
        key = (extension, panel_id)
        owners = list(dict.fromkeys(clients))
        if not owners:
            return
        for before in self._owners.get(key, ()):
            if before not in owners:
                before.deliver(ap.encode(ap.PanelClosePush(extension, panel_id, reason="moved")))
        if key not in self._owners:
            self._make_room(extension)
        self._owners[key] = owners

    def show(self, extension: str, panel: ep.PanelSpec, clients: Sequence[Subscriber]) -> None:
        """Opens ``panel`` on ``clients`` (:meth:`open_on`) and sends each an
        ``open_panel`` push: a spontaneous ``open_panel`` frame (current zot).
        A panel already open on one of them is redrawn there."""
        self.open_on(extension, panel.id, clients)
        frame = ap.encode(ap.OpenPanelPush(extension, panel))
        for client in dict.fromkeys(clients):
            client.deliver(frame)

    def owners(self, extension: str, panel_id: str) -> list[Subscriber]:
        """The clients that have the panel open (none if it is not open)."""
        return list(self._owners.get((extension, panel_id), ()))

    def on_frame(self, ext: Target, frame: ep.PanelRender | ep.PanelClose) -> None:
        """Routes an extension's ``panel_render`` or ``panel_close`` to the
        panel's owners; a frame for a panel that is not open is dropped, and
        noted in its log."""
        key = (ext.name, frame.panel_id)
        owners = self._owners.get(key)
        if owners is None:
            tag = type(frame).__struct_config__.tag
            ext.note(f"dropped `{tag}` for panel {frame.panel_id!r}: it is not open")
        elif isinstance(frame, ep.PanelRender):
            push = ap.encode(
                ap.PanelRenderPush(ext.name, frame.panel_id, frame.title, frame.lines, frame.footer)
            )
            for owner in owners:
                owner.deliver(push)
        else:
            self._closed(key, "extension")

    def extension_stopped(self, extension: str) -> None:
        """Closes the extension's panels; each owner is told ("stopped")."""
        for key in [key for key in self._owners if key[0] == extension]:
            self._closed(key, "stopped")

    def client_left(self, client: Subscriber) -> None:
        """``client`` no longer has its panels; a panel it was the last owner
        of is closed, and its extension told."""
        for key, owners in list(self._owners.items()):
            if client in owners:
                owners.remove(client)
                if not owners:
                    del self._owners[key]
                    self._tell_extension(key)

    def input(self, client: Subscriber, req: ap.PanelKey | ap.PanelResize | ap.PanelClose) -> None:
        """Passes a client's key, resize or close on to the panel's extension.

        Raises:
            RequestError: the client has no such panel open, or (without
                ``extension``) more than one; the extension's input is full.
        """
        owned = [
            key
            for key, owners in self._owners.items()
            if client in owners
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
            for other in self._owners.pop(key):
                if other is not client:
                    other.deliver(ap.encode(ap.PanelClosePush(key[0], key[1], reason="closed")))
            self._tell_extension(key)
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

    def _make_room(self, extension: str) -> None:
        """Closes the extension's oldest panel if it has :data:`MAX_PANELS` open."""
        mine = [key for key in self._owners if key[0] == extension]
        if len(mine) >= MAX_PANELS:
            oldest = mine[0]
            self._closed(oldest, "extension")
            self._tell_extension(oldest)
            ext = self._extensions.get(extension)
            if ext is not None:
                ext.note(f"closed panel {oldest[1]!r}: more than {MAX_PANELS} panels open at once")

    def _closed(self, key: Key, reason: str) -> None:
        """Forgets an open panel and tells each of its owners why."""
        frame = ap.encode(ap.PanelClosePush(key[0], key[1], reason=reason))
        for owner in self._owners.pop(key):
            owner.deliver(frame)

    def _tell_extension(self, key: Key) -> None:
        """Tells the extension of a panel just forgotten that it is closed."""
        ext = self._extensions.get(key[0])
        if ext is not None:
            ext.send_nowait(ep.encode(ep.PanelClose(panel_id=key[1])))
