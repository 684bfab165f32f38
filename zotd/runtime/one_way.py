"""Current zot's one-way frames, passed on to agents: ``submit``,
``submit_slash``, ``clear_notes``, and a spontaneous ``open_panel``.

An extension may send these at any time; each already counted against its
noise budget (:mod:`zotd.runtime.inbox`). ``clear_notes``, ``submit`` and
``submit_slash`` go to the workspace's subscribed agents as push frames of
the same ``type``, naming the extension: ``submit``'s text trimmed (an empty
one is dropped), ``submit_slash`` only when its trimmed text starts with
``/`` (else it is noted in the extension's log, as zot logs its refusal).

A spontaneous ``open_panel`` opens the panel (:meth:`.panels.Panels.show`)
on the agent whose tool call the extension is serving, since that is where
the user waits for the answer: of the calls it serves, the latest made by an
agent that can show UI, else the latest with an agent at its root (an
extension's ``call_tool`` on an agent's behalf). Serving none, it opens on
every subscriber of the workspace; with nobody to show it to, it is dropped
and noted. Its renders, keys and closes then flow as for a command's panel.

Nothing here waits: push frames are queued on the clients' outboxes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol import agent as ap
from ..protocol import extension as ep
from .panels import Subscriber

if TYPE_CHECKING:
    from .extension import Extension
    from .workspace import Workspace

log = logging.getLogger(__name__)


def route(ws: Workspace, ext: Extension, frame: ep.OneWay) -> None:
    """Passes ``frame`` on to the workspace's agents (see the module's docstring)."""
    if isinstance(frame, ep.OpenPanel):
        open_panel(ws, ext, frame.panel)
    elif isinstance(frame, ep.ClearNotes):
        _broadcast(ws, ap.encode(ap.ClearNotesPush(ext.name)))
    elif isinstance(frame, ep.Submit):
        text = frame.text.strip()
        if text:
            _broadcast(ws, ap.encode(ap.SubmitPush(ext.name, text)))
        else:
            ext.note("ignored `submit` without text")
    else:
        text = frame.text.strip()
        if text.startswith("/"):
            _broadcast(ws, ap.encode(ap.SubmitSlashPush(ext.name, text)))
        else:
            ext.note(f"refused `submit_slash` {text[:200]!r}: its text must start with `/`")


def opener(ext: Extension) -> Subscriber | None:
    """The agent a spontaneous panel of ``ext`` belongs to: the one at the root
    of the latest tool call it serves whose agent can show UI, else of the
    latest with an agent at all; ``None`` if it serves no agent's call."""
    callers = [s.caller for s in ext.serving.values() if s.caller.client is not None]
    with_ui = [c for c in callers if c.interactive]
    chosen = (with_ui or callers)[-1:]
    return chosen[0].client if chosen else None


def open_panel(ws: Workspace, ext: Extension, panel: ep.PanelSpec) -> None:
    """Opens ``panel`` on :func:`opener`, else on every subscriber."""
    client = opener(ext)
    clients = [client] if client is not None else list(ws.subscribers)
    if not clients:
        ext.note(f"dropped `open_panel` {panel.id!r}: no agent is there to show it")
        return
    log.debug("extension %s: panel %r opened on %d client(s)", ext.name, panel.id, len(clients))
    ws.panels.show(ext.name, panel, clients)


def _broadcast(ws: Workspace, frame: bytes) -> None:
    for sub in list(ws.subscribers):
        sub.push(frame)
