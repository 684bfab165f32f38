"""What to tell someone who named a tool, command or extension that is not
there, or whose extension is not running: the messages of ``not_found`` and
``unavailable`` errors (docs/agent-protocol.md, "Error messages").

Sans-IO: plain functions over names, states and reasons. The states are the
values of :class:`zotd.runtime.extension.State`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

#: Longest name echoed in a message; a longer one is cut (with "...").
MAX_SHOWN = 80

#: Names longer than this get no suggestions (comparing them costs, and no
#: registered name is that long by accident).
MAX_COMPARED = 200

#: At most this many suggestions ("did you mean a, b or c?").
MAX_SUGGESTIONS = 3

#: How alike a suggestion must be (difflib's ratio).
CUTOFF = 0.6


def shown(name: str) -> str:
    """``name`` as it goes in a message: cut past :data:`MAX_SHOWN` characters."""
    return name if len(name) <= MAX_SHOWN else name[: MAX_SHOWN - 3] + "..."


def label(kind: str, name: str) -> str:
    """``/name`` for a command (``/'...'`` if it has characters that do not
    print, such as a newline), ``'name'`` for a tool or an extension."""
    cut = shown(name)
    if kind == "command":
        return f"/{cut}" if cut.isprintable() else f"/{cut!r}"
    return repr(cut)


def close_matches(name: str, candidates: Iterable[str], *, fold: bool = False) -> list[str]:
    """The candidates most like ``name``, best first (none for a very long name).

    ``fold``: names that differ only by case are the same name (commands,
    as current zot matches them): compared in lower case, a candidate that
    is ``name`` in another case is no suggestion, and of several spellings
    of one name the first in sorted order stands for it.
    """
    if len(name) > MAX_COMPARED:
        return []
    import difflib  # (only for a name nobody has: the daemon's start does without it)

    if not fold:
        pool = sorted({c for c in candidates if c != name})
        return difflib.get_close_matches(name, pool, n=MAX_SUGGESTIONS, cutoff=CUTOFF)
    spelled: dict[str, str] = {}
    for candidate in sorted(set(candidates)):
        spelled.setdefault(candidate.lower(), candidate)
    spelled.pop(name.lower(), None)
    close = difflib.get_close_matches(name.lower(), spelled, n=MAX_SUGGESTIONS, cutoff=CUTOFF)
    return [spelled[c] for c in close]


def one_of(items: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} or {items[-1]}"


class Why(msgspec.Struct, frozen=True):
    """Why an extension serves nothing now, and what would change that.

    ``sentence`` has the extension as its subject ("weather is disabled"),
    ``state`` does without ("disabled"); ``fix`` is what to do ("run `zot
    ext enable weather`").
    """

    sentence: str
    state: str
    fix: str

    def clause(self) -> str:
        """``weather is disabled; run `zot ext enable weather```."""
        return f"{self.sentence}; {self.fix}"

    def brief(self) -> str:
        """``disabled; run `zot ext enable weather```, for a list."""
        return f"{self.state}; {self.fix}"


def why_not(
    name: str,
    state: str,
    *,
    reason: str = "",
    broken: bool = False,
    workspace: str = "",
    restart_in: float | None = None,
) -> Why | None:
    """Why extension ``name`` in ``state`` is not serving, or ``None`` if it is ready.

    ``reason``: its ``last_error`` (for ``restarting``, why it ended);
    ``broken``: it failed because its manifest is broken; ``workspace``:
    where ``zot ext trust`` is to be run; ``restart_in``: seconds until its
    restart.
    """
    logs = f"`zot ext logs {name}`"
    reload = f"`zot ext reload {name}`"
    first = reason.split("; ")[0]  # "exited with code 3; restarted 5 times ..."
    if state in ("ready", "sleeping"):  # (a sleeping one wakes when used)
        return None
    if state == "starting":
        return Why(f"{name} is still starting", "still starting", "try again in a moment")
    if state == "stopping":
        return Why(f"{name} is stopping", "stopping", "`zot ext list` shows what it does next")
    if state == "restarting":
        when = f"in {max(restart_in or 0.0, 0.1):.1f} s"
        after = f"; it {first}" if first else ""
        return Why(
            f"{name} is restarting ({when}{after})",
            f"restarting {when}",
            f"try again then, or see {logs}",
        )
    if state == "disabled":
        return Why(f"{name} is disabled", "disabled", f"run `zot ext enable {name}`")
    if state == "untrusted":
        trust = f"run `zot ext trust` in {workspace}" if workspace else "run `zot ext trust`"
        if reason.startswith("it changed"):
            return Why(f"{name} changed since it was trusted", "changed since trusted", trust)
        return Why(f"{name} is not trusted yet", "not trusted yet", trust)
    if state == "failed" and broken:
        return Why(f"{name} cannot start ({reason})", "cannot start", f"fix it, then run {reload}")
    if state == "failed":
        because = f" ({first})" if first else ""
        return Why(f"{name} failed{because}", f"failed{because}", f"see {logs}, then run {reload}")
    because = f" (it {first})" if first else ""
    return Why(f"{name} is not running{because}", "not running", f"run {reload} to start it")


def unavailable(kind: str, name: str, why: Why) -> str:
    """A known command or tool whose extension is not serving:
    ``tool 'forecast' is unavailable: weather is disabled; run `zot ext enable weather```."""
    return f"{kind} {label(kind, name)} is unavailable: {why.clause()}"


def unknown(
    kind: str, name: str, suggestions: Sequence[str], not_running: Sequence[tuple[str, Why]]
) -> str:
    """A command or tool nobody here is known to offer, with the closest names
    and the extensions not running (whose names are not known)::

        no tool 'wether' in this workspace; did you mean 'weather'? (`zot tools` lists them)
        no command /hi in this workspace (`zot commands` lists them); not running: greet (disabled; run `zot ext enable greet`)
    """
    message = f"no {kind} {label(kind, name)} in this workspace"
    if suggestions:
        message += f"; did you mean {one_of([label(kind, s) for s in suggestions])}?"
    message += f" (`zot {kind}s` lists them)"
    if not_running:
        listed = ", ".join(f"{ext} ({why.brief()})" for ext, why in not_running)
        message += f"; not running: {listed}"
    return message


def unknown_extension(name: str, known: Iterable[str]) -> str:
    """An ``ext_*`` request naming no extension of the workspace."""
    names = sorted(set(known))
    close = close_matches(name, names)
    if close:
        alts = one_of([repr(n) for n in close])
        return f"no extension named {label('', name)}; did you mean {alts}? (`zot ext list` lists them)"
    return f"no extension named {label('', name)} (installed: {', '.join(names) or 'none'})"


def builtin(kind: str, name: str, *, default: bool) -> str:
    """A name zot keeps for itself: a built-in tool, a built-in or reserved command."""
    if kind == "tool":
        return f"{name!r} is one of zot's built-in tools, not an extension's"
    if default:
        return f"/{name} is one of zot's built-in commands, not an extension's"
    return f"/{name} is reserved (`reserved_commands` in zotd.toml), so no extension may hold it"
