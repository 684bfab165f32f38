"""Command lines as people type them, before cyclopts reads them.

- Global options may come before the command: ``zot --json commands`` is
  read as ``zot commands --json`` (every ``zot`` command takes them).
- An option in a place where it can only be a mistake is refused with what
  to type instead: ``zot --ext DIR`` (an option of ``zotd``), and ``zotd -e
  DIR status`` (``--ext`` belongs to the daemon being started, after ``start``).
- The daemon's own command line (``zotd`` with its options and no command)
  is read here without cyclopts (:func:`plain_daemon`): building the whole
  CLI costs a daemon's start more than anything else it imports. Anything
  else, or anything unusual about it, is left to cyclopts.

And where the options point: the socket and the config file
(:func:`resolve`, :func:`settings`), and :func:`die`. This module imports
neither cyclopts nor the client library, so the daemon can use it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, Protocol

import msgspec

from ..model.config import Config, ConfigError, load_config
from ..model.paths import Paths

#: Options every ``zot`` command takes, and whether each takes a value.
ZOT_GLOBAL = {
    "--json": False,
    "--no-start": False,
    "--cwd": True,
    "--token": True,
    "--socket": True,
    "--config": True,
}

#: Options every ``zotd`` command takes.
ZOTD_GLOBAL = {"--socket": True, "--config": True}

#: ``zot`` commands with commands of their own.
ZOT_GROUPS = ("ext", "hook")

#: ``zotd`` commands (its default command, the daemon itself, has no name).
ZOTD_COMMANDS = ("start", "stop", "status", "install-service")


class Misplaced(Exception):
    """A command line that cannot mean what it says; the message says what to type."""


def _option(token: str, known: dict[str, bool]) -> tuple[bool, bool] | None:
    """``(is one, takes the next token as its value)`` for a global option, else None."""
    name, eq, _ = token.partition("=")
    if name not in known:
        return None
    return True, known[name] and not eq


def zot_argv(argv: Sequence[str]) -> list[str]:
    """``zot``'s arguments with leading global options moved after the command.

    Raises:
        Misplaced: ``--ext``/``-e`` before the command (an option of ``zotd``).
    """
    tokens = list(argv)
    lead: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in ("--ext", "-e") or token.startswith("--ext="):
            raise Misplaced(
                "zot: --ext is an option of the daemon: `zotd --ext DIR` (or `zotd start "
                "--ext DIR`) loads an extension for one run; `zot ext install DIR` installs it"
            )
        found = _option(token, ZOT_GLOBAL)
        if found is None:
            break
        _, takes_value = found
        lead.append(token)
        if takes_value and i + 1 < len(tokens):
            lead.append(tokens[i + 1])
            i += 1
        i += 1
    rest = tokens[i:]
    if not lead or not rest or rest[0].startswith("-"):
        return tokens  # nothing to move, or no command to move it after
    path = 1
    if rest[0] in ZOT_GROUPS and len(rest) > 1 and not rest[1].startswith("-"):
        path = 2
    return rest[:path] + lead + rest[path:]


def zotd_argv(argv: Sequence[str]) -> list[str]:
    """``zotd``'s arguments with leading ``--socket``/``--config`` moved after the command.

    Raises:
        Misplaced: ``--ext``/``--log-level`` before ``start``, ``stop`` ...;
            ``-e a b`` (one directory per ``--ext``).
    """
    tokens = list(argv)
    lead: list[str] = []
    daemon_only: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name = token.partition("=")[0]
        if name in ("--ext", "-e", "--log-level"):
            daemon_only.append(name)
            lead.append(token)
            if "=" not in token and i + 1 < len(tokens):
                lead.append(tokens[i + 1])
                i += 1
            i += 1
            continue
        found = _option(token, ZOTD_GLOBAL)
        if found is None:
            break
        lead.append(token)
        if found[1] and i + 1 < len(tokens):
            lead.append(tokens[i + 1])
            i += 1
        i += 1
    _one_dir_per_ext(tokens)
    rest = tokens[i:]
    if not rest or rest[0] not in ZOTD_COMMANDS:
        return tokens  # the daemon itself: every option is its own
    command = rest[0]
    if daemon_only:
        option = daemon_only[0]
        if command == "start":
            hint = f"put it after the command: `zotd start {option} ...`"
        else:
            hint = f"it applies to the daemon itself (`zotd {option} ...`) or `zotd start {option} ...`"
        raise Misplaced(f"zotd: {option} before `{command}`: {hint}")
    return [command, *lead, *rest[1:]]


def _one_dir_per_ext(tokens: Sequence[str]) -> None:
    """Refuses ``-e a b``: each ``--ext`` takes one directory."""
    for i, token in enumerate(tokens[:-2]):
        if token in ("--ext", "-e"):
            after = tokens[i + 2]
            if not after.startswith("-") and after not in ZOTD_COMMANDS:
                raise Misplaced(
                    f"zotd: {token} takes one directory: write `{token} {tokens[i + 1]} "
                    f"{token} {after}` for two"
                )


# --- the daemon's own command line ----------------------------------------------------


class Plain(msgspec.Struct):
    """``zotd`` run as the daemon, with the options cyclopts would have read
    (a Struct: a dataclass costs a start a quarter of a millisecond to make)."""

    ext: list[Path] | None = None
    watch: bool = False
    log_level: str | None = None
    socket: Path | None = None
    config: Path | None = None


#: The daemon's options that take a value (``--ext`` may be repeated).
_DAEMON_VALUES = ("--ext", "-e", "--log-level", "--socket", "--config")


def plain_daemon(argv: Sequence[str]) -> Plain | None:
    """``zotd``'s arguments read without cyclopts, if they run the daemon
    with plain options only, else ``None``.

    Plain means: no command; only ``--ext DIR`` (or ``-e DIR``,
    ``--ext=DIR``; repeated for several), ``--watch``, ``--log-level LEVEL``,
    ``--socket PATH`` and ``--config PATH`` (or ``--NAME=VALUE``), each at
    most once but ``--ext``; every value non-empty, not starting with ``-``
    and not a command's name. Everything else (``--help``, ``--version``, a
    command, a misplaced or unknown option, a value that looks like one) is
    ``None``: cyclopts reads it, and says what is wrong as it always does.
    """
    plain = Plain()
    seen: set[str] = set()  # (a second one, --ext's aside, is left to cyclopts)
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, value = token.partition("=")
        if name == "--watch" and not eq and name not in seen:
            plain.watch = True
            seen.add(name)
            i += 1
            continue
        if name not in _DAEMON_VALUES or (name == "-e" and eq):
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None
            value = argv[i + 1]
            i += 1
        i += 1
        if not value or value.startswith("-") or value in ZOTD_COMMANDS:
            return None
        if name in ("--ext", "-e"):
            plain.ext = [*(plain.ext or []), Path(value)]
            continue
        if name in seen:
            return None
        seen.add(name)
        if name == "--log-level":
            plain.log_level = value
        elif name == "--socket":
            plain.socket = Path(value)
        else:
            plain.config = Path(value)
    return plain


# --- where the options point ----------------------------------------------------------


class Place(Protocol):
    """Options that say which daemon: ``--socket`` and ``--config``
    (:class:`.common.Where`, :class:`Plain`)."""

    @property
    def socket(self) -> Path | None: ...

    @property
    def config(self) -> Path | None: ...


def resolve(where: Place | None) -> tuple[Paths, Config]:
    """The paths and the config the options say.

    The socket is ``--socket``, else ``$ZOTD_SOCKET`` (both relative to the
    cwd), else ``socket`` in the config (relative to the config file), else
    the default.

    Raises:
        ConfigError: the config file is bad.
    """
    paths = Paths.from_env(config_file=where.config if where else None)
    config = load_config(paths.config_file)
    socket = (where.socket if where else None) or os.environ.get("ZOTD_SOCKET") or config.socket
    if socket:
        paths = Paths(
            home=paths.home, socket=Path(socket).absolute(), config_file=paths.config_file
        )
    return paths, config


def settings(where: Place | None, prog: str = "zot") -> tuple[Paths, Config]:
    """:func:`resolve`, exiting with a message (code 2) if the config is bad."""
    try:
        return resolve(where)
    except ConfigError as exc:
        die(f"{prog}: bad config file {exc}", code=2)


def die(message: str, code: int = 1) -> NoReturn:
    """Prints ``message`` to stderr and exits; what it quotes of an extension
    (an error it reported, a manifest's field) is escaped (:func:`.output.printable`)."""
    from .output import printable  # (its tables cost a daemon's start a few ms: only now)

    print(printable(message, multiline=True), file=sys.stderr)
    raise SystemExit(code)
