"""todo: a to-do list kept on disk, for you (``/todo``) and the model (``todos``).

- ``/todo add TEXT`` adds an item and shows its number,
- ``/todo list`` (or just ``/todo``) shows the open items,
- ``/todo done N`` checks item N off,
- the tool ``todos`` gives the model the open items.

The list lives in ``$ZOT_HOME/data/todo/todos.json``, which survives restarts,
reloads and reinstalls. Every change is written to a temporary file that then
replaces the old one (``os.replace``), so a crash never leaves half a file.
Handlers run in worker threads, possibly at once: a lock makes each
read-change-write whole.
"""

import json
import os
import tempfile
import threading
from typing import Any

from zotd.sdk import Extension, Response, Result, display, error, tool_error

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


if __name__ == "__main__":
    ext.run()
