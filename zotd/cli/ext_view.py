"""How ``zot ext`` shows extensions: one line each, or the ``zot ext list`` table.

The same rows, in the same order (by name), whether they come from a running
daemon or, without one, from the directories on disk. Everything a manifest
or an extension chose (names, versions, what it provides, hints, warnings,
paths) goes through :func:`.output.printable` before it is printed.
"""

from __future__ import annotations

import sys

from ..model import hints
from ..model.manifest import Found
from ..protocol import agent as ap
from .common import print_json, table
from .output import duration, printable, styler

NOT_RUNNING = "zotd is not running; these start when it next starts"


def offline_info(f: Found, workspace: str = "") -> ap.ExtensionInfo:
    """An extension found on disk, as ``list_extensions`` would show it stopped
    (with the daemon's hint for what keeps it from running, but for ``stopped``:
    no daemon is all that stops it)."""
    m = f.manifest
    enabled = m.enabled if m else True
    state = (
        "failed"
        if f.error
        else "disabled"
        if not enabled
        else "untrusted"
        if f.untrusted
        else "stopped"
    )
    why = None
    if state != "stopped":
        why = hints.why_not(
            f.name, state, reason=f.error or f.untrusted, broken=bool(f.error), workspace=workspace
        )
    return ap.ExtensionInfo(
        name=f.name,
        version=m.version if m else "",
        description=m.description if m else "",
        language=m.language if m else "",
        scope=f.scope,
        dir=str(f.dir),
        enabled=enabled,
        state=state,
        pid=None,
        restarts=0,
        restart_reason="",
        exit_code=None,
        commands=[],
        tools=[],
        events=[],
        intercepts=[],
        log="",
        last_error=f.error or f.untrusted,
        log_tail=[],
        warnings=list(f.warnings),
        hint=why.clause() if why is not None else "",
        passed_over=[
            ap.PassedOver(scope=a.found.scope, dir=str(a.found.dir), why=a.why, reason=a.reason)
            for a in f.passed_over
        ],
        skills=[s.name for s in f.skills] if state == "stopped" else [],
        sharing=f.sharing,
    )


def instead(info: ap.ExtensionInfo) -> list[str]:
    """Which copy runs and why, for each project-local copy of the same name
    that gave way to it (untrusted, disabled, broken): ``the global copy
    runs, not the project copy in DIR: REASON``. Copies it hides by
    precedence go unsaid (``--json`` lists them too)."""
    return [
        f"the {info.scope} copy runs, not the {p.scope} copy in {p.dir}: {p.reason}"
        for p in info.passed_over
        if p.why != "hidden"
    ]


def describe(info: ap.ExtensionInfo) -> str:
    """``ready; provides /hello, weather``, or ``failed: <why; what to do>``,
    then which copy runs if a project-local one gave way to it (:func:`instead`)
    (escaped for a terminal: :func:`.output.printable`)."""
    provides = [f"/{c}" for c in info.commands] + info.tools
    what = f"; provides {', '.join(provides)}" if provides else ""
    hint = f": {info.hint}" if info.hint and info.state not in ("ready", "starting") else ""
    copies = "".join(f"; {note}" for note in instead(info))
    return printable(f"{info.state}{what}{hint}{copies}")


def provides(info: ap.ExtensionInfo) -> str:
    """The PROVIDES cell: commands, tools, names it lost, what it watches and guards."""
    parts = [f"/{c}" for c in info.commands] + list(info.tools)
    parts += [f"{s.name} (hidden)" for s in info.shadowed]
    if info.events:
        parts.append("on " + " ".join(info.events))
    if info.intercepts:
        parts.append("guards " + " ".join(info.intercepts))
    if info.skills:
        parts.append("skills " + " ".join(info.skills))
    return ", ".join(parts) or "-"


def scope(info: ap.ExtensionInfo) -> str:
    """The SCOPE cell: where it was found, and for a shared extension (one
    process for every workspace) how many workspaces use it now:
    ``global, shared by 3``."""
    if info.sharing != "shared":
        return info.scope
    if info.state in ("ready", "starting", "stopping", "sleeping", "restarting"):
        return f"{info.scope}, shared by {info.workspaces}"
    return f"{info.scope}, shared"


def print_list(infos: list[ap.ExtensionInfo], json: bool, running: bool, footer: str = "") -> int:
    """Prints the ``zot ext list`` table (or JSON); notes go to stderr."""
    infos = sorted(infos, key=lambda i: i.name)
    if json:
        print_json(infos)
        return 0
    if not infos:
        print("no extensions installed; install one with `zot ext install <path|git-url>`")
        return 0
    paint = styler(sys.stdout)
    rows = []
    states = []
    for i in infos:
        cells = [
            i.name,
            i.version or "-",
            scope(i),
            "yes" if i.enabled else "no",
            i.state,
            str(i.pid) if i.pid is not None else "-",
            duration(i.uptime_s) if i.uptime_s is not None else "-",
            str(i.restarts),
            provides(i),
            i.dir,
        ]
        rows.append([printable(cell) for cell in cells])
        states.append(i.state)
    header = (
        "NAME",
        "VERSION",
        "SCOPE",
        "ENABLED",
        "STATE",
        "PID",
        "UPTIME",
        "RESTARTS",
        "PROVIDES",
        "DIR",
    )
    lines = table(rows, header).splitlines()
    print(lines[0])
    column = lines[0].index("STATE")
    for line, state in zip(lines[1:], states, strict=True):
        # Colour the state cell in place: padding stays as it was computed.
        print(line[:column] + paint(state, state) + line[column + len(state) :])
    for i in infos:
        for note in _notes(i):
            print(printable(note), file=sys.stderr)
    if footer:
        print(footer, file=sys.stderr)
    if not running:
        print(f"({NOT_RUNNING})", file=sys.stderr)
    return 0


def _notes(i: ap.ExtensionInfo) -> list[str]:
    notes = []
    if i.hint and i.state not in ("ready", "starting"):
        notes.append(i.hint)
    for note in instead(i):
        notes.append(f"{i.name}: {note}")
    for s in i.shadowed:
        notes.append(f"{i.name}: {s.name} is hidden: {s.reason}")
    for w in i.warnings:
        notes.append(f"{i.name}: warning: {w}")
    return notes
