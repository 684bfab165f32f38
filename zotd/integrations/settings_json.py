"""JSON settings files edited as text: every byte not edited stays as it was.

Sans-IO. :func:`parse` reads a JSON text (with ``//`` and ``/* */``
comments when asked: Gemini CLI's settings take them) into :class:`Node`\\ s
that know where they are in the text; the edits (:func:`add_member`,
:func:`remove_member`, :func:`append_item`, :func:`remove_item`,
:func:`replace_value`) return a new text with only that part changed, new
values indented as their neighbours are. Other keys, their order, the
spacing and the comments are left alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_LITERALS = {"true": True, "false": False, "null": None}


class BadJson(ValueError):
    """Not a JSON text this module reads; the message says where and why."""


@dataclass
class Node:
    """A JSON value and its span in the text (``text[start:end]``)."""

    start: int
    end: int
    value: Any
    #: An object's members: (key, offset of the key's opening quote, value).
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    #: An array's items.
    items: list[Node] = field(default_factory=list)

    def get(self, key: str) -> Node | None:
        """The value of member ``key`` of an object (the last, if repeated)."""
        found = None
        for name, _, node in self.members:
            if name == key:
                found = node
        return found


def where(text: str, offset: int) -> str:
    """``line L column C`` of an offset (1-based)."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line} column {column}"


class _Parser:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.comments = comments
        self.pos = 0

    def fail(self, what: str, at: int | None = None) -> BadJson:
        at = self.pos if at is None else at
        return BadJson(f"{what} at {where(self.text, at)}")

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif self.comments and text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif self.comments and text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            else:
                return

    def value(self, depth: int) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        text, start = self.text, self.pos
        if start >= len(text):
            raise self.fail("expected a value, found the end of the file")
        c = text[start]
        if c == "{":
            return self.container(depth, "}")
        if c == "[":
            return self.container(depth, "]")
        if c == '"':
            return Node(start, self.string_end(), json.loads(text[start : self.pos]))
        match = _NUMBER.match(text, start)
        if match:
            self.pos = match.end()
            return Node(start, self.pos, json.loads(match.group()))
        for word, literal in _LITERALS.items():
            if text.startswith(word, start):
                self.pos = start + len(word)
                return Node(start, self.pos, literal)
        raise self.fail(f"unexpected {text[start]!r}")

    def string_end(self) -> int:
        match = _STRING.match(self.text, self.pos)
        if not match:
            raise self.fail("bad string")
        self.pos = match.end()
        return self.pos

    def container(self, depth: int, close: str) -> Node:
        node = Node(self.pos, self.pos, {} if close == "}" else [])
        self.pos += 1
        self.skip()
        if self.text.startswith(close, self.pos):
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            if close == "}":
                self.skip()
                key_at = self.pos
                if not self.text.startswith('"', key_at):
                    raise self.fail("expected a key in double quotes")
                key = json.loads(self.text[key_at : self.string_end()])
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                item = self.value(depth + 1)
                node.members.append((key, key_at, item))
                node.value[key] = item.value
            else:
                item = self.value(depth + 1)
                node.items.append(item)
                node.value.append(item.value)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith(close, self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            raise self.fail(f"expected ',' or '{close}'")


def parse(text: str, *, comments: bool = False) -> Node:
    """The root value of ``text``.

    Raises:
        BadJson: not JSON (with the line and column of the first problem).
    """
    parser = _Parser(text, comments)
    root = parser.value(0)
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the JSON value")
    return root


# --- layout --------------------------------------------------------------------------


def _line_indent(text: str, offset: int) -> str:
    """The whitespace that starts the line holding ``offset``."""
    start = text.rfind("\n", 0, offset) + 1
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def indent_unit(text: str) -> str:
    """One level of indentation as the file uses it (two spaces if it does not say)."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


def _on_own_line(text: str, offset: int) -> bool:
    """Whether only whitespace precedes ``offset`` on its line."""
    start = text.rfind("\n", 0, offset) + 1
    return not text[start:offset].strip()


def render(value: Any, indent: str, unit: str, *, multiline: bool) -> str:
    """``value`` as JSON, continuing lines at ``indent`` (one line if not ``multiline``)."""
    if not multiline:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert(
    text: str, node: Node, first: int | None, last: int | None, piece: Callable[[str | None], str]
) -> str:
    """``piece`` (a member or an item, as JSON text) added at the end of container ``node``,
    whose first entry starts at ``first`` and last ends at ``last`` (None when empty)."""
    unit = indent_unit(text)
    if first is None or last is None:
        outer = _line_indent(text, node.start)
        inner = outer + unit
        return f"{text[: node.start + 1]}\n{inner}{piece(inner)}\n{outer}{text[node.end - 1 :]}"
    if _on_own_line(text, first):
        inner = _line_indent(text, first)
        return f"{text[:last]},\n{inner}{piece(inner)}{text[last:]}"
    return f"{text[:last]}, {piece(None)}{text[last:]}"  # a one-line container


def add_member(text: str, obj: Node, key: str, value: Any) -> str:
    """``text`` with ``"key": value`` added as the last member of object ``obj``."""
    unit = indent_unit(text)

    def piece(indent: str | None) -> str:
        shown = render(value, indent or "", unit, multiline=indent is not None)
        return f"{json.dumps(key, ensure_ascii=False)}: {shown}"

    first = obj.members[0][1] if obj.members else None
    last = obj.members[-1][2].end if obj.members else None
    return _insert(text, obj, first, last, piece)


def append_item(text: str, array: Node, value: Any) -> str:
    """``text`` with ``value`` added as the last item of ``array``."""
    unit = indent_unit(text)

    def piece(indent: str | None) -> str:
        return render(value, indent or "", unit, multiline=indent is not None)

    first = array.items[0].start if array.items else None
    last = array.items[-1].end if array.items else None
    return _insert(text, array, first, last, piece)


def _remove(text: str, node: Node, starts: list[int], ends: list[int], i: int) -> str:
    if len(starts) == 1:
        return text[: node.start + 1] + text[node.end - 1 :]
    if i == len(starts) - 1:
        return text[: ends[i - 1]] + text[ends[i] :]
    return text[: starts[i]] + text[starts[i + 1] :]


def remove_member(text: str, obj: Node, key: str) -> str:
    """``text`` without member ``key`` of ``obj`` (with its comma)."""
    i = [k for k, _, _ in obj.members].index(key)
    starts = [at for _, at, _ in obj.members]
    ends = [n.end for _, _, n in obj.members]
    return _remove(text, obj, starts, ends, i)


def remove_item(text: str, array: Node, index: int) -> str:
    """``text`` without item ``index`` of ``array`` (with its comma)."""
    starts = [n.start for n in array.items]
    ends = [n.end for n in array.items]
    return _remove(text, array, starts, ends, index)


def replace_value(text: str, node: Node, value: Any) -> str:
    """``text`` with ``node``'s value replaced by ``value``, laid out where it was."""
    multiline = "\n" in text[node.start : node.end]
    shown = render(value, _line_indent(text, node.start), indent_unit(text), multiline=multiline)
    return text[: node.start] + shown + text[node.end :]
