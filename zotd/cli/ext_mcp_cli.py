"""``zot ext add-mcp`` and ``zot ext import-mcp``: MCP servers as extensions, in one command.

Both write ``kind: mcp`` manifests (:mod:`zotd.model.mcp_servers`) into a
staging directory of the destination (``$ZOT_HOME/extensions/``, or the
project's ``.zot/extensions/`` with ``--project``), then install that as
``zot ext install`` does: through the daemon (``ext_install``: it lands,
is trusted if it is the project's, and starts at once in every workspace
that sees it), or, with no daemon, on the files, to start when zotd does.
``--force`` moves the extension of that name aside first, and drops it once
the new one is in (or puts it back if that fails).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec

from ..client import Client, ZotdError
from ..model import manage, trust
from ..model import mcp_servers as ms
from ..model.env_grants import is_variable_name
from ..model.manifest import Kind, Manifest, ManifestError, check_kind, check_name
from ..protocol import agent as ap
from .common import Options, Where, die, print_json, settings, with_client
from .ext_view import describe
from .local import workspace_of
from .output import printable

OFFLINE = "zotd is not running; it starts when zotd next starts"


@dataclass(slots=True)
class Plan:
    """One server to install: its manifest, where, and how it went."""

    manifest: Manifest
    scope: str
    root: Path
    #: What happened, in words ("" until done).
    outcome: str = ""
    #: Whether it ended badly (not installed, or installed and not working).
    failed: bool = False
    info: ap.ExtChangeData | None = None
    #: What of its entry zotd ignores or passes on as written.
    notes: list[str] = field(default_factory=list)


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, eq, rest = value.partition("=")
        if not eq or not key:
            die(f"zot: {what} {value!r}: expected KEY=VALUE", code=2)
        out[key] = rest
    return out


def add_mcp(
    name: str,
    /,
    *command: str,
    url: str | None = None,
    header: list[str] | None = None,
    env: list[str] | None = None,
    project: bool = False,
    scope: Literal["workspace", "shared"] | None = None,
    lazy: bool = False,
    description: str = "",
    force: bool = False,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Add an MCP server as an extension, and start it: zot ext add-mcp NAME -- COMMAND [ARGS...].

    Writes $ZOT_HOME/extensions/NAME/extension.json ("kind": "mcp"), or with
    --project ./.zot/extensions/NAME/, and a running daemon starts it at
    once. A stdio server is the COMMAND after `--` (run with the extension's
    directory as its cwd: give paths absolute); one reached over streamable
    HTTP is --url. Exits 1 if it then cannot start.

    Args:
        name: The extension's name (letters, digits, '.', '_', '-').
        command: The server's program and its arguments (after `--`).
        url: The URL of a streamable-HTTP server, instead of a COMMAND.
        header: An HTTP header for --url, as NAME=VALUE (repeatable).
        env: A variable set for the server, as KEY=VALUE (repeatable).
        project: Add it to this project (./.zot/extensions/) instead of globally.
        scope: One process for every workspace (shared) or one per workspace [default: shared for a global server, workspace for a project's].
        lazy: Start it on its first use (its tools listed from its last run until then).
        description: What it is, for `zot ext list`.
        force: Replace an extension of that name.
    """
    o = opts or Options()
    try:
        check_name(name)
    except ManifestError as exc:
        die(f"zot: {exc}", code=2)
    if command and url is not None:
        die("zot: give a COMMAND (after `--`) or --url, not both", code=2)
    if not command and url is None:
        die(
            "zot: say how to reach the server: `zot ext add-mcp NAME -- COMMAND [ARGS...]` "
            "for a stdio server, or `--url URL` for a streamable-HTTP one",
            code=2,
        )
    variables = _pairs(env or [], "--env")
    for key in variables:
        if not is_variable_name(key):
            die(f"zot: --env {key!r}: not an environment variable name", code=2)
    headers = _pairs(header or [], "--header")
    if headers and url is None:
        die("zot: --header is for a server reached with --url", code=2)
    manifest = Manifest(name=name, kind=Kind.MCP, description=description, env=variables)
    manifest.scope, manifest.lazy = scope or "", lazy
    if url is not None:
        if not url.startswith(("http://", "https://")):
            die(f"zot: --url {url!r}: it must start with http:// or https://", code=2)
        manifest.url, manifest.headers = url, headers
    else:
        exe = command[0]
        # A path is the caller's (the server runs elsewhere); a bare name is found on PATH.
        manifest.exec = os.path.abspath(exe) if "/" in exe else exe
        manifest.args = list(command[1:])
    try:
        check_kind(manifest, name)
    except ManifestError as exc:
        die(f"zot: {exc}", code=2)
    where_to = "project" if project else "global"
    plan = Plan(manifest, where_to, _root(where_to, o, where))
    if (plan.root / name).exists() and not force:
        die(
            f"zot: an extension named {name!r} is already installed in {plan.root / name}; "
            "pass --force to replace it",
        )
    _run([plan], force, o, where)
    if o.json:
        print_json(plan.info)
    else:
        print(printable(plan.outcome))
        print(printable(f"  {ms.summary(manifest)}"))
    return 1 if plan.failed else 0


def _root(scope: str, o: Options, where: Where | None) -> Path:
    paths, _ = settings(where)
    try:
        return manage.scope_root(scope, workspace=workspace_of(o), global_dir=paths.extensions_dir)
    except manage.ManageError as exc:
        die(f"zot: {exc}")


def _run(plans: list[Plan], force: bool, o: Options, where: Where | None) -> None:
    """Installs each of ``plans`` (through the daemon, or on the files), in turn."""

    async def live(zot: Client) -> int:
        for plan in plans:
            await _install_live(zot, plan, force)
        return 0

    def offline() -> int:
        for plan in plans:
            _install_offline(plan, force, o, where)
        return 0

    with_client(o, where, live, offline)


def _staged(plan: Plan, force: bool) -> tuple[Path, Path | None]:
    """The staged manifest, and where the extension it replaces went (if ``force``)."""
    m = plan.manifest
    target = plan.root / m.name
    tree = manage.stage_manifest(plan.root, m.name, ms.manifest_json(m))
    aside = None
    if force and target.exists():
        try:
            aside = manage.set_aside(target)
        except manage.ManageError:
            manage.unstage(tree)
            raise
    return tree, aside


async def _install_live(zot: Client, plan: Plan, force: bool) -> None:
    m = plan.manifest
    try:
        tree, aside = _staged(plan, force)
    except manage.ManageError as exc:
        plan.outcome, plan.failed = f"{m.name}: not installed: {exc}", True
        return
    try:
        res = await zot.ext_install(str(tree), scope=plan.scope)
    except ZotdError as exc:
        if aside is not None:
            manage.put_back(aside, plan.root / m.name)
        plan.outcome, plan.failed = f"{m.name}: not installed: {exc.message}", True
        return
    finally:
        manage.unstage(tree)
    if aside is not None:
        manage.unstage(aside)
    plan.info = res
    ext = res.extension
    if ext is None:
        state = "not started here"
    elif ext.dir != res.dir:
        # A project copy that cannot run gives way to the user's own (see discovery).
        ours = next((p for p in ext.passed_over if p.dir == res.dir), None)
        if ours is not None and ours.why != "hidden":
            state = f"{ours.why}: {ours.reason}; the {ext.scope} one in {ext.dir} runs instead"
            plan.failed = ours.why != "disabled"
        else:
            state = f"hidden here by the {ext.scope} one in {ext.dir}"
    else:
        state = describe(ext)
        plan.failed = ext.state not in ("ready", "starting", "sleeping", "disabled")
    verb = "replaced" if aside is not None else "installed"
    plan.outcome = f"{verb} {res.name} ({res.scope}, mcp) in {res.dir}: {state}"


def _install_offline(plan: Plan, force: bool, o: Options, where: Where | None) -> None:
    m = plan.manifest
    try:
        tree, aside = _staged(plan, force)
    except manage.ManageError as exc:
        plan.outcome, plan.failed = f"{m.name}: not installed: {exc}", True
        return
    try:
        found = manage.install(str(tree), plan.root, plan.scope)
    except manage.ManageError as exc:
        if aside is not None:
            manage.put_back(aside, plan.root / m.name)
        plan.outcome, plan.failed = f"{m.name}: not installed: {exc}", True
        return
    finally:
        manage.unstage(tree)
    if aside is not None:
        manage.unstage(aside)
    if plan.scope == "project":  # what the user adds, the user trusts
        paths, _ = settings(where)
        trust.trust(paths.home, workspace_of(o), [found])
    plan.info = ap.ExtChangeData(
        name=found.name, dir=str(found.dir), scope=found.scope, extension=None
    )
    verb = "replaced" if aside is not None else "installed"
    if found.error:
        plan.failed = True
        plan.outcome = f"{verb} {found.name} ({found.scope}, mcp) in {found.dir}, but it cannot start: {found.error}"
    else:
        plan.outcome = f"{verb} {found.name} ({found.scope}, mcp) in {found.dir}; {OFFLINE}"


# --- import-mcp ------------------------------------------------------------------------


@dataclass(slots=True)
class Source:
    """A file of ``mcpServers`` to import from."""

    label: str
    path: Path
    #: Where its servers go: ``global`` or ``project``.
    scope: str
    #: Which of a ``~/.claude.json``'s lists: the top level, this project's, or both.
    top: bool = True
    mine: bool = True


def known_sources(zot_home: Path, workspace: Path) -> list[Source]:
    """Where MCP hosts keep their servers, for this user and this project."""
    home = Path.home()
    if sys.platform == "darwin":
        desktop = home / "Library" / "Application Support" / "Claude"
    else:
        desktop = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude"
    claude = home / ".claude.json"
    return [
        Source("Claude Desktop", desktop / "claude_desktop_config.json", "global"),
        Source("Claude Code (user)", claude, "global", mine=False),
        Source("Claude Code (this project)", claude, "project", top=False),
        Source("Cursor", home / ".cursor" / "mcp.json", "global"),
        Source("Cursor (this project)", workspace / ".cursor" / "mcp.json", "project"),
        Source("zot mcp-bridge", zot_home / "mcp.json", "global"),
        Source("zot mcp-bridge (this project)", workspace / ".zot" / "mcp.json", "project"),
    ]


def import_mcp(
    file: Path | None = None,
    /,
    *,
    project: bool = False,
    force: bool = False,
    dry_run: bool = False,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Import the MCP servers of Claude Desktop, Claude Code, Cursor or zot's mcp-bridge as extensions.

    Reads the `mcpServers` of FILE, or, without one, of every known place
    (Claude Desktop's claude_desktop_config.json, ~/.claude.json, Cursor's
    ~/.cursor/mcp.json and .cursor/mcp.json, $ZOT_HOME/mcp.json and
    .zot/mcp.json), and installs each server as a "kind": "mcp" extension,
    saying what it did with each. A user's own servers go global, a
    project's into the project (all of FILE's go global unless --project).
    This project's .mcp.json needs no import: zotd runs its servers as they
    are, once trusted (`zot ext trust`). Existing names are skipped unless
    --force.

    Args:
        file: A JSON file with `mcpServers` [default: the known places].
        project: Put every server into this project (./.zot/extensions/).
        force: Replace extensions of the same names.
        dry_run: Say what would be done, and do nothing.
    """
    o = opts or Options()
    paths, _ = settings(where)
    workspace = workspace_of(o)
    if file is not None:
        sources = [Source(str(file), file.absolute(), "global")]
    else:
        sources = known_sources(paths.home, workspace)
    plans: list[Plan] = []
    looked: list[str] = ["looked in:"] if file is None else []
    rows: list[str | Plan] = []
    bad = False
    taken: dict[tuple[str, str], str] = {}
    for src in sources:
        try:
            doc = ms.read_config(src.path)
            mine = workspace if src.mine else None
            servers = ms.servers_in(doc, str(src.path), mine, top=src.top)
        except FileNotFoundError:
            if file is not None:
                die(f"zot: {file}: no such file")
            looked.append(f"  {src.label}: {src.path}: not found")
            continue
        except ms.ConfigError as exc:
            if file is not None:
                die(f"zot: {exc}")
            looked.append(f"  {src.label}: {exc}")
            bad = True
            continue
        if file is None:
            looked.append(f"  {src.label}: {src.path}: {_count(len(servers))}")
        scope = "project" if project else src.scope
        root = _root(scope, o, where)
        for e in ms.entries(servers, str(src.path)):
            if e.manifest is None:
                rows.append(f"skipped {e.name}: {e.error}" if e.name else e.error)
                continue
            if (scope, e.name) in taken:
                rows.append(f"skipped {e.name}: taken from {taken[scope, e.name]} already")
                continue
            taken[scope, e.name] = str(src.path)
            target = root / e.name
            if target.exists() and not force:
                rows.append(f"skipped {e.name}: {target} exists (use --force to replace it)")
                continue
            plan = Plan(e.manifest, scope, root, notes=e.warnings)
            verb = "replace" if target.exists() else "install"
            plan.outcome = f"would {verb} {e.name} ({scope}) in {target}: {ms.summary(e.manifest)}"
            plans.append(plan)
            rows.append(plan)
    if file is None and (workspace / ms.MCP_JSON).is_file():
        rows.append(
            f"not imported: {workspace / ms.MCP_JSON}: zotd runs a project's own servers "
            "as they are, once trusted (`zot ext trust`)"
        )
    if not dry_run and plans:
        _run(plans, force, o, where)
    if o.json:
        print_json([_as_json(p) for p in plans])
    else:
        for line in looked:
            print(printable(line))
        for row in rows:
            if isinstance(row, str):
                print(printable(row))
                continue
            print(printable(row.outcome))
            for note in row.notes:
                print(printable(f"  note: {note}"))
        if (
            not plans
            and file is None
            and not any(r.startswith("skipped") for r in rows if isinstance(r, str))
        ):
            print("no MCP servers found; name a file: zot ext import-mcp FILE")
    return 1 if bad or any(p.failed for p in plans) else 0


def _as_json(plan: Plan) -> dict[str, object]:
    return {
        "name": plan.manifest.name,
        "scope": plan.scope,
        "outcome": plan.outcome,
        "failed": plan.failed,
        "extension": msgspec.to_builtins(plan.info) if plan.info is not None else None,
    }


def _count(n: int) -> str:
    return "1 server" if n == 1 else f"{n} servers"
