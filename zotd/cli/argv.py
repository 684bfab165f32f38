"""Command lines as people type them, before cyclopts reads them.

- Global options may come before the command: ``zot --json commands`` is
  read as ``zot commands --json`` (every ``zot`` command takes them).
- An option in a place where it can only be a mistake is refused with what
  to type instead: ``zot --ext DIR`` (an option of ``zotd``), and ``zotd -e
  DIR status`` (``--ext`` belongs to the daemon being started, after ``start``).
"""

from __future__ import annotations

from collections.abc import Sequence

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
