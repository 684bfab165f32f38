"""Open panels and who opened each: what the opener and the extension receive."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from zotd.model.errors import RequestError
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep
from zotd.runtime.panels import MAX_PANELS, Panels, Target


class Client:
    """A connection: the frames delivered to it alone, decoded."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    def push(self, frame: bytes) -> None:
        raise AssertionError("panel frames go to their opener alone, never broadcast")

    def deliver(self, frame: bytes) -> None:
        self.got.append(msgspec.json.decode(frame))


class Ext:
    """An extension: the frames sent to its stdin, and its log notes."""

    def __init__(self, name: str, taking_input: bool = True) -> None:
        self.name = name
        self.sent: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.taking_input = taking_input

    def note(self, message: str) -> None:
        self.notes.append(message)

    def send_nowait(self, frame: bytes) -> bool:
        if self.taking_input:
            self.sent.append(msgspec.json.decode(frame))
        return self.taking_input


def panels(*exts: Ext) -> Panels:
    table: dict[str, Target] = {e.name: e for e in exts}
    return Panels(table)


def test_renders_go_to_the_opener_alone() -> None:
    ext, a, b = Ext("p"), Client(), Client()
    open_panels = panels(ext)
    open_panels.open("p", "main", a)
    open_panels.on_frame(ext, ep.PanelRender(panel_id="main", title="T", lines=["x"]))
    assert a.got == [
        {
            "type": "panel_render",
            "extension": "p",
            "panel_id": "main",
            "title": "T",
            "lines": ["x"],
            "footer": "",
        }
    ]
    assert b.got == []


def test_a_frame_for_a_panel_not_open_is_dropped_and_noted() -> None:
    ext, a = Ext("p"), Client()
    open_panels = panels(ext)
    open_panels.on_frame(ext, ep.PanelRender(panel_id="nope"))
    open_panels.on_frame(ext, ep.PanelClose(panel_id="nope"))
    assert ext.notes == [
        "dropped `panel_render` for panel 'nope': it is not open",
        "dropped `panel_close` for panel 'nope': it is not open",
    ]
    assert a.got == []


def test_closed_by_the_extension_then_it_is_not_open() -> None:
    ext, a = Ext("p"), Client()
    open_panels = panels(ext)
    open_panels.open("p", "main", a)
    open_panels.on_frame(ext, ep.PanelClose(panel_id="main"))
    open_panels.on_frame(ext, ep.PanelRender(panel_id="main"))
    assert a.got == [
        {"type": "panel_close", "extension": "p", "panel_id": "main", "reason": "extension"}
    ]
    assert ext.notes == ["dropped `panel_render` for panel 'main': it is not open"]


def test_opened_again_by_another_client_it_moves() -> None:
    ext, a, b = Ext("p"), Client(), Client()
    open_panels = panels(ext)
    open_panels.open("p", "main", a)
    open_panels.open("p", "main", a)  # the same client again: nothing to say
    open_panels.open("p", "main", b)
    open_panels.on_frame(ext, ep.PanelRender(panel_id="main"))
    assert a.got == [
        {"type": "panel_close", "extension": "p", "panel_id": "main", "reason": "moved"}
    ]
    assert [f["type"] for f in b.got] == ["panel_render"]


def test_the_extension_stopping_closes_its_panels_only() -> None:
    p, q, a = Ext("p"), Ext("q"), Client()
    open_panels = panels(p, q)
    open_panels.open("p", "one", a)
    open_panels.open("p", "two", a)
    open_panels.open("q", "one", a)
    open_panels.extension_stopped("p")
    assert a.got == [
        {"type": "panel_close", "extension": "p", "panel_id": "one", "reason": "stopped"},
        {"type": "panel_close", "extension": "p", "panel_id": "two", "reason": "stopped"},
    ]
    assert p.sent == []  # it is gone: nothing to tell it


def test_a_client_leaving_closes_its_panels_and_tells_the_extension() -> None:
    ext, a, b = Ext("p"), Client(), Client()
    open_panels = panels(ext)
    open_panels.open("p", "mine", a)
    open_panels.open("p", "theirs", b)
    open_panels.client_left(a)
    assert ext.sent == [{"type": "panel_close", "panel_id": "mine"}]
    assert a.got == b.got == []
    open_panels.on_frame(ext, ep.PanelRender(panel_id="theirs"))
    assert [f["type"] for f in b.got] == ["panel_render"]


def test_input_goes_to_the_panels_extension() -> None:
    ext, a = Ext("p"), Client()
    open_panels = panels(ext)
    open_panels.open("p", "main", a)
    open_panels.input(a, ap.PanelKey(id=1, panel_id="main", key="enter"))
    open_panels.input(a, ap.PanelResize(id=2, panel_id="main", width=80, height=24))
    open_panels.input(a, ap.PanelClose(id=3, panel_id="main", extension="p"))
    assert ext.sent == [
        {"type": "panel_key", "panel_id": "main", "key": "enter"},
        {"type": "panel_resize", "panel_id": "main", "width": 80, "height": 24},
        {"type": "panel_close", "panel_id": "main"},
    ]
    with pytest.raises(RequestError) as e:
        open_panels.input(a, ap.PanelKey(id=4, panel_id="main", key="q"))
    assert (e.value.code, e.value.message) == (
        "not_found",
        "no panel 'main' is open on this connection",
    )


def test_input_errors() -> None:
    p, q, deaf, a, b = Ext("p"), Ext("q"), Ext("deaf", taking_input=False), Client(), Client()
    open_panels = panels(p, q, deaf)
    open_panels.open("p", "main", a)
    open_panels.open("q", "main", a)
    open_panels.open("deaf", "d", a)

    def error(client: Client, req: ap.PanelKey) -> tuple[str, str]:
        with pytest.raises(RequestError) as e:
            open_panels.input(client, req)
        return e.value.code, e.value.message

    assert error(b, ap.PanelKey(id=1, panel_id="main", key="x")) == (
        "not_found",
        "no panel 'main' is open on this connection",
    )
    assert error(a, ap.PanelKey(id=2, panel_id="main", key="x", extension="r")) == (
        "not_found",
        "no panel 'main' of extension 'r' is open on this connection",
    )
    assert error(a, ap.PanelKey(id=3, panel_id="main", key="x")) == (
        "bad_request",
        "panels 'main' of ['p', 'q'] are open: say which with `extension`",
    )
    assert error(a, ap.PanelKey(id=4, panel_id="d", key="x")) == (
        "extension_failed",
        "extension 'deaf' is not taking input (not running, or not reading it)",
    )
    open_panels.input(a, ap.PanelKey(id=5, panel_id="main", key="x", extension="q"))
    assert q.sent == [{"type": "panel_key", "panel_id": "main", "key": "x"}]
    assert p.sent == []


# --- panels open on several clients (a spontaneous `open_panel`) ---------------------

SPEC = ep.PanelSpec(id="ask", title="Q", lines=["ok?"], footer="y/n")
OPENED = {
    "type": "open_panel",
    "extension": "p",
    "panel": {"id": "ask", "title": "Q", "lines": ["ok?"], "footer": "y/n"},
}


def test_shown_on_several_clients_each_gets_it_and_its_renders() -> None:
    ext, a, b, c = Ext("p"), Client(), Client(), Client()
    open_panels = panels(ext)
    open_panels.show("p", SPEC, [a, b, a])  # (a client given twice has it once)
    assert open_panels.owners("p", "ask") == [a, b]
    open_panels.on_frame(ext, ep.PanelRender(panel_id="ask", lines=["now?"]))
    for client in (a, b):
        assert [f["type"] for f in client.got] == ["open_panel", "panel_render"]
        assert client.got[0] == OPENED
    assert c.got == []
    open_panels.input(b, ap.PanelKey(id=1, panel_id="ask", key="y"))
    open_panels.input(a, ap.PanelKey(id=2, panel_id="ask", key="n"))
    assert [f["key"] for f in ext.sent] == ["y", "n"]
    with pytest.raises(RequestError):
        open_panels.input(c, ap.PanelKey(id=3, panel_id="ask", key="y"))


def test_one_owner_closing_closes_it_for_all() -> None:
    ext, a, b, c = Ext("p"), Client(), Client(), Client()
    open_panels = panels(ext)
    open_panels.show("p", SPEC, [a, b, c])
    open_panels.input(b, ap.PanelClose(id=1, panel_id="ask"))
    assert ext.sent == [{"type": "panel_close", "panel_id": "ask"}]  # once
    closed = {"type": "panel_close", "extension": "p", "panel_id": "ask", "reason": "closed"}
    assert a.got[1:] == c.got[1:] == [closed]
    assert b.got[1:] == []  # it closed it itself
    assert open_panels.owners("p", "ask") == []


def test_owners_leaving_the_last_one_tells_the_extension() -> None:
    ext, a, b = Ext("p"), Client(), Client()
    open_panels = panels(ext)
    open_panels.show("p", SPEC, [a, b])
    open_panels.client_left(a)
    assert ext.sent == []
    assert open_panels.owners("p", "ask") == [b]
    open_panels.client_left(b)
    assert ext.sent == [{"type": "panel_close", "panel_id": "ask"}]
    open_panels.on_frame(ext, ep.PanelRender(panel_id="ask"))
    assert ext.notes == ["dropped `panel_render` for panel 'ask': it is not open"]


def test_the_extension_closing_or_stopping_tells_every_owner() -> None:
    ext, a, b = Ext("p"), Client(), Client()
    open_panels = panels(ext)
    open_panels.show("p", SPEC, [a, b])
    open_panels.on_frame(ext, ep.PanelClose(panel_id="ask"))
    open_panels.show("p", SPEC, [a, b])
    open_panels.extension_stopped("p")
    for client in (a, b):
        assert [(f["type"], f.get("reason")) for f in client.got] == [
            ("open_panel", None),
            ("panel_close", "extension"),
            ("open_panel", None),
            ("panel_close", "stopped"),
        ]
    assert ext.sent == []


def test_shown_again_it_is_redrawn_where_it_stays_and_moves_from_the_rest() -> None:
    ext, a, b, c = Ext("p"), Client(), Client(), Client()
    open_panels = panels(ext)
    open_panels.show("p", SPEC, [a, b])
    open_panels.show("p", SPEC, [b, c])
    assert a.got[1:] == [
        {"type": "panel_close", "extension": "p", "panel_id": "ask", "reason": "moved"}
    ]
    assert b.got == [OPENED, OPENED]  # redrawn, never closed
    assert c.got == [OPENED]
    assert open_panels.owners("p", "ask") == [b, c]
    # A command's reply opening it again moves it to that client alone.
    open_panels.open("p", "ask", a)
    assert [f["reason"] for f in b.got[2:] + c.got[1:]] == ["moved", "moved"]
    assert open_panels.owners("p", "ask") == [a]
    assert ext.sent == []


def test_opened_on_nobody_nothing_changes() -> None:
    ext, a = Ext("p"), Client()
    open_panels = panels(ext)
    open_panels.open_on("p", "ask", [])
    assert open_panels.owners("p", "ask") == []
    open_panels.open("p", "ask", a)
    open_panels.open_on("p", "ask", [])
    assert open_panels.owners("p", "ask") == [a]
    assert a.got == ext.sent == []


def test_past_max_panels_the_oldest_closes() -> None:
    ext, a = Ext("p"), Client()
    open_panels = panels(ext)
    for n in range(MAX_PANELS + 1):
        open_panels.open("p", f"p{n}", a)
    # The oldest went, as if the extension had closed it: its owner and the
    # extension are told, and its log says why; the newest is open.
    assert a.got == [
        {"type": "panel_close", "extension": "p", "panel_id": "p0", "reason": "extension"}
    ]
    assert ext.sent == [{"type": "panel_close", "panel_id": "p0"}]
    assert ext.notes == [f"closed panel 'p0': more than {MAX_PANELS} panels open at once"]
    assert open_panels.owners("p", "p0") == []
    assert open_panels.owners("p", f"p{MAX_PANELS}") == [a]
    # Opening one that is open again makes no room.
    open_panels.open("p", "p1", a)
    assert len(ext.sent) == 1
    # Another extension's panels are its own.
    open_panels.open("q", "x", a)
    assert len(ext.sent) == 1
