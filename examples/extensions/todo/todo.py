"""todo: a to-do list kept on disk, for you (``/todo``) and the model (``todos``).

- ``/todo add TEXT`` adds an item and shows its number,
- ``/todo list`` (or just ``/todo``) shows the open items,
- ``/todo done N`` checks item N off,
- ``/todo-board`` opens a panel: the whole list, to walk with the arrow keys,
  check items off (and on again) and delete them,
- the tool ``todos`` gives the model the open items.

The list lives in ``$ZOT_HOME/data/todo/todos.json``, which survives restarts,
reloads and reinstalls. Every change is written to a temporary file that then
replaces the old one (``os.replace``), so a crash never leaves half a file.
Handlers run in worker threads, possibly at once: a lock makes each
read-change-write whole. The panel's keys change the same file, under the
same lock, so ``/todo`` and ``todos`` see at once what was done there.
"""

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from zotd.sdk import Extension, Panel, Response, Result, display, error, tool_error

ext = Extension("todo", "1.0.0")

USAGE = "usage: /todo add TEXT | /todo list | /todo done N"

_lock = threading.Lock()


class Corrupt(Exception):
    """The file exists but is not a to-do list."""


def _path() -> str:
    return str(ext.data_dir / "todos.json")


def load() -> dict[str, Any]:
    """The list: ``{"next": N, "items": [{"id", "text", "done"}, ...]}``."""
    try:
        with open(_path(), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {"next": 1, "items": []}
    except (OSError, ValueError) as exc:
        raise Corrupt(f"cannot read {_path()}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise Corrupt(f"{_path()} is not a to-do list; fix or delete it")
    return data


def save(data: dict[str, Any]) -> None:
    """Writes the list atomically: a temporary file in the same directory, then rename."""
    fd, tmp = tempfile.mkstemp(prefix=".todos-", suffix=".tmp", dir=ext.data_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, _path())
    except BaseException:
        os.unlink(tmp)
        raise


def open_items(data: dict[str, Any]) -> list[str]:
    return [f"{item['id']}. {item['text']}" for item in data["items"] if not item["done"]]


@ext.command("todo", "your to-do list: /todo add TEXT, /todo list, /todo done N")
def todo(args: str) -> Response:
    verb, _, rest = args.partition(" ")
    rest = rest.strip()
    try:
        with _lock:
            if verb in ("", "list"):
                items = open_items(load())
                return display("\n".join(items) if items else "nothing to do")
            if verb == "add" and rest:
                data = load()
                item = {"id": data["next"], "text": rest, "done": False}
                data["items"].append(item)
                data["next"] += 1
                save(data)
                return display(f"added {item['id']}. {rest}")
            if verb == "done" and rest.isdecimal():
                data = load()
                for item in data["items"]:
                    if item["id"] == int(rest) and not item["done"]:
                        item["done"] = True
                        save(data)
                        return display(f"done: {item['id']}. {item['text']}")
                return error(f"no open item {rest}; see /todo list")
    except Corrupt as exc:
        return error(str(exc))
    return error(USAGE)


@ext.tool()
def todos() -> str | Result:
    """The user's open to-do items, one per line, each with its number."""
    try:
        with _lock:
            items = open_items(load())
    except Corrupt as exc:
        return tool_error(str(exc))
    return "\n".join(items) if items else "The to-do list is empty."


# --- the board: a panel ----------------------------------------------------------------
#
# /todo-board returns a Panel: the client shows it and sends us the keys the
# user presses in it (panel_key) and its size (panel_resize). A handler that
# returns a Panel redraws it; ext.close_panel() closes it.

BOARD = "todo-board"  # the panel's id, ours to choose: every panel event carries it
KEYS = "up/down move · space/x done · d delete · q close"


@dataclass
class Board:
    """What the panel shows besides the list: which item is selected, and how
    wide the panel is (0 until a panel_resize tells us)."""

    at: int = 0
    width: int = 0


board = Board()  # one panel id, so one board (kept under _lock, like the list)


def clip(line: str, width: int) -> str:
    """``line`` cut to ``width`` characters, with an ellipsis to show it was cut."""
    return line if not width or len(line) <= width else line[: width - 1] + "…"


def view(data: dict[str, Any]) -> Panel:
    """The whole panel, drawn from the list: a panel is always redrawn whole."""
    items = data["items"]
    board.at = max(0, min(board.at, len(items) - 1))  # the list may have shrunk
    lines = [
        f"{'>' if i == board.at else ' '} [{'x' if item['done'] else ' '}] "
        f"{item['id']}. {item['text']}"
        for i, item in enumerate(items)
    ] or ["nothing to do: add items with /todo add TEXT"]
    return Panel(
        BOARD,
        title=f"Todos ({len(open_items(data))} open)",
        lines=[clip(line, board.width) for line in lines],
        footer=KEYS,
    )


@ext.command("todo-board", "your to-do list in a panel: move, check off, delete")
def todo_board(args: str) -> Response | Panel:
    try:
        with _lock:
            board.at, board.width = 0, 0  # a new panel: nothing selected or measured yet
            return view(load())  # returning a Panel opens it
    except Corrupt as exc:
        return error(str(exc))


@ext.on_panel_key
def on_key(panel_id: str, key: str, text: str) -> Panel | None:
    """A key pressed in the panel. Panel events come one at a time, in order,
    but /todo may run at the same time: the lock is still needed."""
    if panel_id != BOARD:
        return None
    if key in ("q", "esc", "escape"):  # Esc: "escape" in docs/sdk.md; "esc" too
        ext.close_panel(BOARD)
        return None
    if key not in ("up", "down", "space", "x", "d"):
        return None  # not ours: no need to redraw
    try:
        with _lock:
            data = load()
            items = data["items"]
            if key == "up":
                board.at -= 1  # view() keeps it on the list
            elif key == "down":
                board.at += 1
            elif 0 <= board.at < len(items):  # space, x or d: about the selected item
                if key == "d":
                    del items[board.at]  # numbers of the others never change
                else:
                    items[board.at]["done"] = not items[board.at]["done"]
                save(data)
            return view(data)  # returning a Panel redraws it
    except Corrupt as exc:
        return Panel(BOARD, title="Todos", lines=[str(exc)], footer="q close")


@ext.on_panel_resize
def on_resize(panel_id: str, width: int, height: int) -> Panel | None:
    """The panel's new size, in cells: redraw it with lines that fit. (A long
    list would also scroll to keep the cursor within ``height``; not here.)"""
    if panel_id != BOARD:
        return None
    try:
        with _lock:
            board.width = width
            return view(load())
    except Corrupt as exc:
        return Panel(BOARD, title="Todos", lines=[clip(str(exc), width)], footer="q close")


if __name__ == "__main__":
    ext.run()
