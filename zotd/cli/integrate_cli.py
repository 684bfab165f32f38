"""``zot integrate AGENT [--project] [--uninstall] [--print] [--json]``: wire
zot's hooks and ``zot mcp`` into another agent's settings.

For Claude Code, Codex CLI or Gemini CLI, in the user's settings or (with
``--project``) the current directory's: one hook, ``ZOT hook --agent
AGENT``, for every hook event zot answers for that agent (its adapter's
``events``), and an MCP server ``zot`` running ``ZOT mcp``, ``ZOT`` being
this ``zot``'s absolute path. Where the files are and how they are edited
is in :mod:`zotd.integrations.integrate_targets`,
:mod:`~zotd.integrations.settings_edit` and
:mod:`~zotd.integrations.settings_toml`; this module reads, backs up,
writes and reports.

Every file is read and every edit worked out before anything is written: a
file that cannot be read or edited safely is reported and nothing is
changed (exit 1). A file that changes is first copied next to itself
(``NAME.bak-zot``, then ``NAME.bak-zot-2`` and so on, never overwritten),
then replaced as a whole (the file a symlink points to, if it is one).
``--print`` shows the changes as a diff and writes nothing.
"""

from __future__ import annotations

import difflib
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from cyclopts import Parameter

from ..integrations import hook_agents, settings_edit, settings_toml
from ..integrations.integrate_targets import TOOL_EVENTS, Target, targets
from ..integrations.settings_edit import Change, Edit, SettingsError
from .common import die, print_json
from .output import printable

#: What an agent's settings are called, in messages.
AGENTS = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}

#: What a JSON file zot created holds once zot's entries are gone again.
EMPTY_JSON = "{}\n"


@dataclass
class _Plan:
    target: Target
    old: str | None  # None: no such file
    edit: Edit

    @property
    def new(self) -> str:
        return self.edit.text

    @property
    def remove(self) -> bool:
        """Whether the file is left with nothing but what zot would start it with."""
        return self.new.strip() in ("", "{}") and self.edit.changed and self.old is not None

    @property
    def state(self) -> str:
        if not self.edit.changed:
            return "unchanged"
        if self.old is None:
            return "created"
        return "removed" if self.remove else "changed"


def integrate(
    agent: Literal["claude", "codex", "gemini"],
    /,
    *,
    project: bool = False,
    uninstall: bool = False,
    print_: Annotated[bool, Parameter(name="--print")] = False,
    json: bool = False,
) -> int:
    """Add zot's hooks and the zot mcp server to an agent's own settings.

    One hook, "ZOT hook --agent AGENT", for every event zot answers, and an
    MCP server "zot" running "ZOT mcp" (ZOT: this zot's full path). Everything
    else in the files stays as it was; a file is copied to NAME.bak-zot
    (NAME.bak-zot-2, ...) before it changes. Running it again changes nothing.

    Args:
        agent: claude (Claude Code), codex (Codex CLI) or gemini (Gemini CLI).
        project: The current directory's settings (.claude/, .mcp.json; .codex/; .gemini/) instead of yours.
        uninstall: Take zot's hooks and server out instead.
        print_: Show what would change, as a diff, and write nothing.
        json: Print what changed as JSON.
    """
    zot = _zot_path()
    where = Path(os.getcwd()) if project else None
    plans = [
        _plan(t, agent, zot, uninstall)
        for t in targets(agent, project=where, home=Path.home(), env=os.environ)
    ]
    backups: dict[Path, Path | None] = {}
    if not print_:
        for plan in plans:
            backups[plan.target.path] = _write(plan)
    if json:
        print_json(_report(agent, project, uninstall, print_, plans, backups))
        return 0
    scope = "the project's" if project else "your"
    dry = " (--print: nothing is written)" if print_ else ""
    print(f"zot integrate {agent}: {scope} {AGENTS[agent]} settings{dry}")
    for plan in plans:
        _print_plan(plan, backups.get(plan.target.path), print_)
    if not any(p.edit.changed for p in plans):
        print("nothing to change")
    return 0


def _zot_path() -> str:
    """This ``zot``'s absolute path (the one running, else the one on PATH)."""
    arg = sys.argv[0] if sys.argv else ""
    if os.path.basename(arg) == "zot" and os.path.isfile(arg):
        return os.path.abspath(arg)
    found = shutil.which("zot")
    return os.path.abspath(found) if found else str(Path(sys.executable).with_name("zot"))


def _events(agent: str) -> tuple[str, ...]:
    try:
        return hook_agents.adapter(agent).events
    except (ImportError, AttributeError) as exc:
        die(f"zot integrate {agent}: this zot cannot answer {AGENTS[agent]}'s hooks yet ({exc})")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        die(f"zot integrate: cannot read {path}: {exc}; nothing changed")


def _plan(target: Target, agent: str, zot: str, uninstall: bool) -> _Plan:
    """The new text of one file, worked out (exits 1 if it cannot be)."""
    old = _read(target.path)
    try:
        if target.format == "toml":
            text = old or ""
            if uninstall:
                return _Plan(target, old, settings_toml.remove_server(text))
            return _Plan(target, old, settings_toml.add_server(text, zot, ["mcp"]))
        text = old if old is not None and old.strip() else EMPTY_JSON
        changes: list[Change] = []
        c = target.comments
        if target.hooks:
            if uninstall:
                edit = settings_edit.remove_hooks(text, comments=c)
            else:
                command = shlex.join([zot, "hook", "--agent", agent])
                tools = TOOL_EVENTS.get(agent, frozenset())
                edit = settings_edit.add_hooks(
                    text, _events(agent), command, tool_events=tools, comments=c
                )
            text, changes = edit.text, [*changes, *edit.changes]
        if target.mcp:
            if uninstall:
                edit = settings_edit.remove_server(text, comments=c)
            else:
                edit = settings_edit.add_server(text, zot, ["mcp"], comments=c)
            text, changes = edit.text, [*changes, *edit.changes]
        settings_edit.check(
            old if old is not None and old.strip() else EMPTY_JSON, text, comments=c
        )
        return _Plan(target, old, Edit(text, changes))
    except SettingsError as exc:
        die(f"zot integrate: {target.path}: {exc}; nothing changed")


def _backup_path(path: Path) -> Path:
    candidate = path.with_name(path.name + ".bak-zot")
    n = 2
    while candidate.exists() or candidate.is_symlink():
        candidate = path.with_name(f"{path.name}.bak-zot-{n}")
        n += 1
    return candidate


def _write(plan: _Plan) -> Path | None:
    """Backs up and writes (or removes) one file; the backup's path, if one was made."""
    if not plan.edit.changed:
        return None
    path = plan.target.path
    real = Path(os.path.realpath(path))
    backup = None
    try:
        if plan.old is not None:
            backup = _backup_path(path)
            shutil.copy2(real, backup)
        if plan.remove:
            real.unlink()
            return backup
        real.parent.mkdir(parents=True, exist_ok=True)
        temporary = real.with_name(f".{real.name}.zot-{os.getpid()}")
        temporary.write_text(plan.new, encoding="utf-8")
        if plan.old is not None:
            shutil.copymode(real, temporary)
        os.replace(temporary, real)
    except OSError as exc:
        die(f"zot integrate: cannot write {path}: {exc}")
    return backup


def _summary(changes: list[Change]) -> list[str]:
    """One line per kind of change: ``added hook A, B: COMMAND``."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for c in changes:
        groups.setdefault((c.action, c.kind, c.command, c.was), []).append(c.name)
    lines = []
    for (action, kind, command, was), names in groups.items():
        label = f"{kind} {', '.join(names)}"
        if action == "kept":
            lines.append(f"already there: {label}: {command}")
        elif action == "replaced":
            lines.append(f"replaced {label}: {was} -> {command}")
        else:
            lines.append(f"{action} {label}: {command}")
    return lines


def _print_plan(plan: _Plan, backup: Path | None, dry: bool) -> None:
    path = plan.target.path
    state = plan.state
    if dry and state != "unchanged":
        state = f"would be {state}"
    note = f" (backup: {backup.name})" if backup is not None else ""
    print(printable(f"{path}: {state}{note}"))
    for line in _summary(plan.edit.changes):
        print(printable(f"  {line}"))
    if dry and plan.edit.changed:
        sys.stdout.writelines(_diff(plan))


def _diff(plan: _Plan) -> list[str]:
    old = plan.old or ""
    new = "" if plan.remove else plan.new
    name = str(plan.target.path)
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=name if plan.old is not None else "/dev/null",
        tofile=name if not plan.remove else "/dev/null",
    )
    return [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]


def _report(
    agent: str,
    project: bool,
    uninstall: bool,
    dry: bool,
    plans: list[_Plan],
    backups: dict[Path, Path | None],
) -> dict[str, Any]:
    files = []
    for plan in plans:
        backup = backups.get(plan.target.path)
        entry: dict[str, Any] = {
            "path": str(plan.target.path),
            "state": plan.state,
            "backup": str(backup) if backup is not None else None,
            "changes": [
                {k: v for k, v in vars(c).items() if v != "" or k != "was"}
                for c in plan.edit.changes
            ],
        }
        if dry:
            entry["diff"] = "".join(_diff(plan))
        files.append(entry)
    return {
        "agent": agent,
        "scope": "project" if project else "user",
        "uninstall": uninstall,
        "print": dry,
        "files": files,
    }
