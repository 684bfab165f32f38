"""What an extension's program runs on: its interpreter, as ``zot ext doctor``
reports it (``node``, ``python3``, ...), found from its ``exec`` or from the
``#!`` line of the file it names.

Plain functions over an argv and the first bytes of a file (reading them is
:func:`head`'s, bounded); running ``--version`` is the caller's. Only
interpreters known here are asked their version: ``--version`` means the
same to each of them, and nothing else is run for it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .doctor import Runtime
from .safe_files import FileRefused, open_regular

#: How much of a program is read to find its ``#!`` line.
HEAD_BYTES = 256

#: A program of any size is opened (only its head is read).
_ANY_SIZE = 1 << 62

#: Programs whose ``--version`` prints their version (on stdout or stderr),
#: by base name; ``python3.12`` and ``node20`` count as ``python`` and ``node``.
_KNOWN = re.compile(
    r"^(?:python[0-9.]*|pypy[0-9.]*|node(?:js)?[0-9]*|deno|bun|ruby|perl|php|bash|zsh|"
    r"uv|uvx|npx|npm|pnpm|yarn|java)$"
)

#: ``/usr/bin/env`` options that take no value and may come before the program.
_ENV_FLAGS = ("-S", "-i", "--split-string", "--ignore-environment")


@dataclass(frozen=True, slots=True)
class Interpreter:
    """The program an extension's code runs on.

    Attributes:
        name: as named (``python3``, or an absolute path from a ``#!`` line).
        origin: ``exec`` (the manifest names it) or ``#!`` (the first line of
            the program the manifest names).
    """

    name: str
    origin: str


def known(name: str) -> bool:
    """Whether ``name`` (a path or a bare name) is an interpreter whose
    ``--version`` this module trusts to mean what it says."""
    return bool(_KNOWN.fullmatch(os.path.basename(name)))


def head(path: str) -> bytes:
    """The first :data:`HEAD_BYTES` of a regular file (``b""`` if it cannot be
    read: never blocks on a FIFO or a device)."""
    try:
        fd = open_regular(Path(path), _ANY_SIZE)
    except (FileRefused, OSError):
        return b""
    try:
        return os.read(fd, HEAD_BYTES)
    except OSError:
        return b""
    finally:
        os.close(fd)


def shebang(first: bytes) -> str | None:
    """The program a ``#!`` line runs (``python3`` from ``#!/usr/bin/env
    python3 -u``, ``/usr/bin/node`` from ``#!/usr/bin/node``), or ``None``
    without one."""
    if not first.startswith(b"#!"):
        return None
    line = first[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    words = line.split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if w not in _ENV_FLAGS and "=" not in w]
        return rest[0] if rest else None
    return words[0]


def interpreter_of(argv: Sequence[str], first: bytes) -> Interpreter | None:
    """What ``argv`` (a resolved ``exec`` and its args) runs on: its program,
    if that is a known interpreter, else the program its ``#!`` line names
    (``first``: the program's first bytes); ``None`` for a native program."""
    if not argv:
        return None
    if known(argv[0]):
        return Interpreter(argv[0], "exec")
    named = shebang(first)
    return Interpreter(named, "#!") if named else None


def locate(name: str, path_env: str | None) -> str:
    """Where ``name`` (an interpreter) is: an absolute path as it is if it is
    an executable file, a bare name looked up on ``path_env``; "" if not found."""
    if os.path.isabs(name):
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else ""
    return shutil.which(name, path=path_env) or ""


def version_line(output: bytes) -> str:
    """The version an interpreter's ``--version`` printed: its first non-blank
    line, cut at 120 characters."""
    for line in output.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:120]
    return ""


def runtime_for(
    argv: Sequence[str], directory: Path, path_env: str | None, trusted: bool
) -> tuple[Runtime, bool]:
    """What ``argv`` (an extension's resolved ``exec`` and args, from
    ``directory``) runs on, and whether its ``--version`` may be asked: a
    :func:`known` interpreter, found, and outside ``directory`` unless the
    extension is ``trusted`` (an untrusted project's own files never run)."""
    program = argv[0]
    named = interpreter_of(argv, head(program))
    if named is None:
        return Runtime(program=program), False
    path = locate(named.name, path_env)
    runtime = Runtime(program, named.name, named.origin, path)
    if not path or not known(path):
        return runtime, False
    inside = Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))
    return runtime, trusted or not inside
