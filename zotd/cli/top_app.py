"""``zot top``'s screen (Textual): the extensions table, a log pane, the
intercepts pane, and the keys.

The app holds one connection to zotd (:mod:`zotd.client`, anyio on
Textual's asyncio loop), subscribed to the workspace's pushes: an
``extension_state`` push shows at once, and ``list_extensions`` is asked
every :data:`POLL` seconds for the rest (pids, uptimes, figures; calls/s
is worked out from two polls, :mod:`.top_rows`). When zotd goes away the
view says so, keeps the last rows, and connects again once it is back
(never starting one: ``zot top`` started it, if at all, before the screen
opened). The log pane follows the highlighted extension's log file, and the
intercepts pane the audit trail, read from the files themselves.

What extensions chose (names, states, errors, log lines, guards' reasons)
is shown as :class:`rich.text.Text` of :func:`.output.printable` strings:
never markup, never a control character that reaches the terminal.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import anyio
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable, Footer, RichLog, Static

from .. import __version__
from ..client import Client, ZotdError, connect
from ..model.audit import trail_path
from ..protocol import agent as ap
from .output import STATE_STYLES, printable
from .top_rows import COLUMNS, Board, Row, Tail, describe_decision, parse_decision

#: Seconds between two ``list_extensions`` polls.
POLL = 1.0
#: Seconds between two looks at the followed files.
FOLLOW = 0.25
#: Seconds between two attempts to reach zotd again once it went away.
RETRY = 1.0
#: Lines of a log, and decisions, shown when a pane opens; and kept in it.
BACKLOG = 200
KEPT = 2000

DECISION_STYLES = {"allow": "green", "block": "bold red", "rewrite": "yellow"}


@dataclass(frozen=True)
class Target:
    """Which daemon and workspace to show, and where its files are."""

    socket: Path
    cwd: Path
    token: str | None
    #: ``$ZOT_HOME/logs``: the audit trail, and logs the daemon did not name.
    logs_dir: Path
    #: The workspace's root, if known already (decisions of others say theirs).
    workspace: str | None = None


class TopApp(App[int]):
    """The live view. Its return value is the exit code (0 on ``q``, 130 on Ctrl+C)."""

    TITLE = "zot top"
    ENABLE_COMMAND_PALETTE = False  # its themes and screenshots are not this view's business
    CSS = """
    #title { height: 1; background: $panel; padding: 0 1; }
    #banner { height: auto; background: $error; color: $text; padding: 0 1; display: none; }
    #extensions { height: auto; max-height: 50%; }
    #panes { height: 1fr; }
    TextPane { width: 1fr; border: round $secondary; scrollbar-gutter: stable; overflow-x: hidden; }
    #log { display: none; }
    #extensions.-stale { text-opacity: 50%; }
    #status { height: auto; max-height: 3; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "interrupt", "quit", show=False, priority=True),
        Binding("r", "reload", "reload (restart)"),
        Binding("e", "enable", "enable"),
        Binding("d", "disable", "disable"),
        Binding("l", "log", "log"),
        Binding("i", "intercepts", "intercepts"),
    ]

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target
        self.board = Board()
        self._zot: Client | None = None
        self._rows: list[Row] = []
        self._log_tail: Tail | None = None
        self._log_name: str | None = None
        self._audit_tail = Tail(trail_path(target.logs_dir))  # (where the writer writes)
        self._workspace = target.workspace
        self._unreadable = 0

    # --- layout -----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(Text("zot top: connecting to zotd..."), id="title")
        yield Static(id="banner")
        table: DataTable[Text] = DataTable(id="extensions", cursor_type="row", zebra_stripes=True)
        yield table
        with Horizontal(id="panes"):
            yield TextPane(id="log")
            yield TextPane(id="audit")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self._table()
        for column in COLUMNS:
            table.add_column(column, key=column)
        self.query_one("#audit", TextPane).border_title = "intercepts"
        for line in self._audit_tail.start(BACKLOG):
            self._show_decision(line)
        self.set_interval(FOLLOW, self._follow)
        self.run_worker(self._session(), name="zotd", exit_on_error=True)

    def _table(self) -> DataTable[Text]:
        return self.query_one("#extensions", DataTable)

    def say(self, message: str, *, error: bool = False) -> None:
        """A line in the status bar (``message`` escaped)."""
        style = "bold red" if error else ""
        self.query_one("#status", Static).update(Text(printable(message), style=style))

    # --- the connection ---------------------------------------------------------------

    async def _session(self) -> None:
        """Stays connected to zotd: polls, takes pushes; says when it is gone, and retries."""
        ever = False
        while True:
            try:
                async with connect(
                    self.target.socket,
                    cwd=self.target.cwd,
                    client=f"zot-top/{__version__}",
                    token=self.target.token,
                    start=False,
                ) as zot:
                    await zot.subscribe()
                    ever = True
                    self._connected(zot)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._poll, zot)
                        async for frame in zot.notifications():
                            if isinstance(frame, ap.ExtensionStatePush):
                                self.board.push(frame)
                                self._show_rows()
                        tg.cancel_scope.cancel()
                why = "it closed the connection"
            except ZotdError as exc:
                why = exc.message
            self._zot = None
            self._gone(why, ever)
            await anyio.sleep(RETRY)

    def _connected(self, zot: Client) -> None:
        self._zot = zot
        hello = zot.hello_data
        self._workspace = hello.workspace if hello else None
        where = printable(self._workspace or str(self.target.cwd))
        version = f"zotd {printable(hello.zotd_version)}, pid {hello.pid}" if hello else "zotd"
        self.query_one("#title", Static).update(Text(f"zot top: {where} ({version})"))
        self.query_one("#banner", Static).display = False
        self._table().remove_class("-stale")

    def _gone(self, why: str, ever: bool) -> None:
        what = "zotd went away" if ever else "cannot reach zotd"
        banner = self.query_one("#banner", Static)
        text = f"{what}: {why}; trying again every {RETRY:g} s (q quits)"
        banner.update(Text(printable(text), style="bold"))
        banner.display = True
        self._table().add_class("-stale")  # the rows as they were last seen

    async def _poll(self, zot: Client) -> None:
        while True:
            try:
                infos = await zot.list_extensions()
            except ZotdError as exc:
                if exc.code == "connection_lost":
                    return  # the pushes end too; the session says so
                self.say(f"list_extensions: {exc.message}", error=True)
            else:
                self.board.poll(infos, time.monotonic())
                self._show_rows()
            await anyio.sleep(POLL)

    # --- the table --------------------------------------------------------------------

    def _show_rows(self) -> None:
        table = self._table()
        rows = self.board.rows()
        if [r.name for r in rows] == [r.name for r in self._rows]:
            for old, new in zip(self._rows, rows, strict=True):
                for column, before, after in zip(COLUMNS, old.cells, new.cells, strict=True):
                    if before != after:
                        table.update_cell(
                            new.name, column, _cell(new, column, after), update_width=True
                        )
        else:
            selected = self.selected()
            table.clear()
            for row in rows:
                table.add_row(
                    *(_cell(row, c, v) for c, v in zip(COLUMNS, row.cells, strict=True)),
                    key=row.name,
                )
            names = [r.name for r in rows]
            if selected in names:
                table.move_cursor(row=names.index(selected))
        self._rows = rows
        if self._log_name is None and self.query_one("#log", TextPane).display:
            self._open_log()

    def selected(self) -> str | None:
        """The name of the highlighted extension, if any."""
        table = self._table()
        if not self._rows or table.row_count == 0:
            return None
        row = min(max(table.cursor_row, 0), len(self._rows) - 1)
        return self._rows[row].name

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.query_one("#log", TextPane).display and self.selected() != self._log_name:
            self._open_log()

    # --- keys -------------------------------------------------------------------------

    async def action_quit(self) -> None:
        self.exit(0)

    def action_interrupt(self) -> None:
        self.exit(130)  # as a command interrupted with Ctrl+C exits

    def action_reload(self) -> None:
        self._change("reload")

    def action_enable(self) -> None:
        self._change("enable")

    def action_disable(self) -> None:
        self._change("disable")

    def _change(self, verb: str) -> None:
        name, zot = self.selected(), self._zot
        if name is None:
            self.say("no extension selected")
        elif zot is None:
            self.say("not connected to zotd", error=True)
        else:
            self.run_worker(self._do(zot, verb, name), group="changes")

    async def _do(self, zot: Client, verb: str, name: str) -> None:
        done = {"reload": "reloaded", "enable": "enabled", "disable": "disabled"}[verb]
        self.say(f"{verb} {name}...")
        try:
            if verb == "reload":
                found = [i for i in await zot.ext_reload(name) if i.name == name]
                info = found[0] if found else None
            else:
                change = zot.ext_enable if verb == "enable" else zot.ext_disable
                info = (await change(name)).extension
        except ZotdError as exc:
            self.say(f"{verb} {name}: {exc.message}", error=True)
            return
        if info is None:
            self.say(f"{done} {name}")
            return
        detail = f": {info.hint or info.last_error}" if info.state == "failed" else ""
        self.say(f"{done} {name}: {info.state}{detail}", error=info.state == "failed")

    def action_log(self) -> None:
        pane = self.query_one("#log", TextPane)
        pane.display = not pane.display
        if pane.display:
            self._open_log()
        else:
            self._log_tail = self._log_name = None

    def action_intercepts(self) -> None:
        pane = self.query_one("#audit", TextPane)
        pane.display = not pane.display

    # --- the panes --------------------------------------------------------------------

    def _open_log(self) -> None:
        """Shows the highlighted extension's log in the log pane, followed from its end."""
        pane = self.query_one("#log", TextPane)
        pane.reset()
        name = self._log_name = self.selected()
        self._log_tail = None
        if name is None:
            pane.border_title = "log"
            return
        row = next(r for r in self._rows if r.name == name)
        # Where the daemon says its log is (else where it would be, by its name).
        path = Path(row.log) if row.log else self.target.logs_dir / f"ext-{name}.log"
        pane.border_title = f"log: {printable(name)}"
        self._log_tail = Tail(path)
        lines = self._log_tail.start(BACKLOG)
        if not lines:
            pane.add(Text(printable(f"(nothing in {path} yet)"), style="dim"))
        for line in lines:
            pane.add(Text(printable(line, multiline=True)))

    def _follow(self) -> None:
        if self._log_tail is not None:
            pane = self.query_one("#log", TextPane)
            for line in self._log_tail.read():
                pane.add(Text(printable(line, multiline=True)))
        for line in self._audit_tail.read():
            self._show_decision(line)

    def _show_decision(self, line: str) -> None:
        record = parse_decision(line)
        pane = self.query_one("#audit", TextPane)
        if record is None:
            if line.strip():
                self._unreadable += 1
                pane.border_subtitle = f"{self._unreadable} unreadable line(s) skipped"
            return
        when, decision, what = describe_decision(record, self._workspace)
        style = DECISION_STYLES.get(record.decision, "")
        pane.add(Text.assemble((when, "dim"), " ", (decision, style), " ", what))


class TextPane(RichLog):
    """A log of lines of :class:`Text`, wrapped at its own width, and wrapped
    again when that changes (a resize, the pane beside it shown or hidden)."""

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id, max_lines=KEPT, min_width=1, wrap=True)
        self._texts: deque[Text] = deque(maxlen=KEPT)
        self._width = 0

    def add(self, text: Text) -> None:
        """A line at the end (kept, and shown once the pane has a width)."""
        self._texts.append(text)
        if self._width > 0:
            self.write(text, width=self._width)

    def reset(self) -> None:
        self._texts.clear()
        self.clear()

    def on_resize(self, event: Resize) -> None:
        width = self.scrollable_content_region.width
        if width > 0 and width != self._width:
            self._width = width
            self.clear()
            for text in self._texts:
                self.write(text, width=width)


def _cell(row: Row, column: str, value: str) -> Text:
    """A table cell: plain text (never markup); the state in its colour."""
    if column == "STATE":
        return Text(value, style=STATE_STYLES.get(row.state, ""))
    if column == "LAST ERROR" and value != "-":
        return Text(value, style="red")
    return Text(value)
