"""``zot ext``: list, install, remove, enable, disable, reload extensions; read
their logs; show and change the environment variables they see (``env``).

With a daemon running, every command goes through it (the ``ext_*``
requests), so a change applies at once to every agent. Without one, the file
operations still work, on the same directories, and apply when zotd starts.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

from cyclopts import App

from ..client import Client
from ..model import manage, trust
from ..model.discovery import every_copy, to_enable
from ..protocol import agent as ap
from . import ext_env_cli, ext_logs, ext_mcp_cli
from .common import Options, Where, die, print_json, settings, with_client
from .ext_view import describe, offline_info, print_list
from .local import find_local, local, workspace_of
from .output import printable

app = App(
    name="ext",
    help=(
        "Manage extensions: list, install, remove, enable, disable, reload, trust, logs, env; "
        "add-mcp and import-mcp for MCP servers."
    ),
)

OFFLINE = "zotd is not running; this applies when it next starts"


@app.command(name="list")
def list_(*, opts: Options | None = None, where: Where | None = None) -> int:
    """List the extensions of this directory's workspace: project, global and --ext ones.

    Shows each one's version, scope, live state, pid, uptime, restarts (crash
    restarts and reloads), what it provides (commands, tools, names another
    holds, events it follows and guards), and directory, by name. Works
    without a running daemon (no live state then). Each workspace runs its
    own copy of every extension it sees.
    """
    o = opts or Options()

    async def live(zot: Client) -> int:
        infos = await zot.list_extensions()
        footer = ""
        if not o.json and any(i.scope == "global" for i in infos):
            footer = copies_note(await zot.status(), workspace_of(o))
        return print_list(infos, o.json, running=True, footer=footer)

    def offline() -> int:
        found, _ = local(o, where)
        return print_list(
            [offline_info(f, str(workspace_of(o))) for f in found], o.json, running=False
        )

    return with_client(o, where, live, offline)


@app.command
def install(
    source: str,
    /,
    *,
    project: bool = False,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Install an extension from a directory (copied) or a git URL (shallow clone).

    It lands in $ZOT_HOME/extensions/NAME/, or with --project in
    ./.zot/extensions/NAME/, where NAME is the name in its extension.json.
    A running daemon starts it at once. A relative path is the current
    directory's. Exits 1 if it then cannot start, or may not (untrusted).

    Args:
        source: A directory holding extension.json, a git URL (https://, ssh://,
            file://, user@host:path) or a bare git repository.
        project: Install into this project (./.zot/extensions/) instead of globally.
    """
    o = opts or Options()
    scope = "project" if project else "global"
    if not manage.is_url(source):
        # A path is the caller's: the daemon has a cwd of its own.
        source = os.path.abspath(source)

    async def live(zot: Client) -> int:
        res = await zot.ext_install(source, scope=scope)
        ext = res.extension
        if o.json:
            print_json(res)
        else:
            if ext is None:
                state = "not started here"
            elif ext.dir != res.dir:
                state = f"hidden here by the {ext.scope} one in {ext.dir}"
            else:
                state = describe(ext)
            print(printable(f"installed {res.name} ({res.scope}) in {res.dir}: {state}"))
        # Installed disabled (its manifest says so) is as asked.
        asked = ext is not None and ext.dir == res.dir and ext.state != "disabled"
        return 1 if asked and ext is not None and not working(ext) else 0

    def offline() -> int:
        paths, _ = settings(where)
        try:
            root = manage.scope_root(
                scope, workspace=workspace_of(o), global_dir=paths.extensions_dir
            )
            found = manage.install(source, root, scope)
        except manage.ManageError as exc:
            die(f"zot: {exc}")
        if scope == "project":  # what the user installs, the user trusts
            trust.trust(paths.home, workspace_of(o), [found])
        if o.json:
            print_json(offline_info(found))
        elif found.error:
            print(
                printable(
                    f"installed {found.name} ({found.scope}) in {found.dir}, but it cannot start:"
                )
            )
            print(printable(f"  {found.error}"), file=sys.stderr)
        else:
            print(printable(f"installed {found.name} ({found.scope}) in {found.dir}; {OFFLINE}"))
        return 1 if found.error else 0

    return with_client(o, where, live, offline)


def copies_note(st: ap.StatusData, here: Path) -> str:
    """Says that global extensions run once per workspace, and how many processes that is."""
    but, shared = (", but shared ones", f", {len(st.shared)} shared") if st.shared else ("", "")
    return (
        f"(this is {here}'s workspace; each workspace runs its own copy of every "
        f"extension it sees{but}: {len(st.workspaces)} workspace(s), "
        f"{st.processes} extension process(es) in all{shared})"
    )


def working(info: ap.ExtensionInfo) -> bool:
    """Whether an extension a command was to get going is going (or still
    starting; one restarting already failed once)."""
    return info.state in ("ready", "starting")


def _confirm(name: str, directory: str) -> None:
    if not sys.stdin.isatty():
        die(
            f"zot: not removing {name} without confirmation, and there is no terminal to ask; "
            "pass --yes",
            code=2,
        )
    try:
        answer = input(printable(f"Remove extension {name} ({directory})? [y/N] ")).strip().lower()
    except EOFError:  # Ctrl+D: no
        answer = ""
        print()
    if answer not in ("y", "yes"):
        die("zot: not removed")


@app.command
def remove(
    name: str, /, *, yes: bool = False, opts: Options | None = None, where: Where | None = None
) -> int:
    """Stop an installed extension and delete its directory.

    Asks first, unless --yes.

    Args:
        name: The extension's name.
        yes: Do not ask for confirmation.
    """
    o = opts or Options()

    async def live(zot: Client) -> int:
        infos = {i.name: i for i in await zot.list_extensions()}
        if name not in infos:
            known = ", ".join(sorted(infos)) or "none"
            die(f"zot: no extension named {name!r} (installed: {known})")
        if not yes:
            _confirm(name, infos[name].dir)
        res = await zot.ext_remove(name)
        if o.json:
            print_json(res)
        else:
            print(printable(f"removed {res.name} ({res.dir})"))
            if res.extension is not None:
                print(
                    printable(
                        f"{name} is now the {res.extension.scope} one: {describe(res.extension)}"
                    )
                )
        return 0

    def offline() -> int:
        found = find_local(o, where, name)
        if not yes:
            _confirm(name, str(found.dir))
        _, global_dir = local(o, where)
        try:
            manage.remove(found, global_dir=global_dir)
        except manage.ManageError as exc:
            die(f"zot: {exc}")
        if o.json:
            print_json(offline_info(found))
        else:
            print(printable(f"removed {name} ({found.dir}); {OFFLINE}"))
        return 0

    return with_client(o, where, live, offline)


def _set_enabled(name: str, enabled: bool, opts: Options | None, where: Where | None) -> int:
    o = opts or Options()
    verb = "enabled" if enabled else "disabled"

    async def live(zot: Client) -> int:
        res = await (zot.ext_enable(name) if enabled else zot.ext_disable(name))
        if o.json:
            print_json(res)
        else:
            ext = res.extension
            if ext is None:
                print(printable(f"{verb} {name} (not in this workspace)"))
            elif ext.state == "disabled":
                print(printable(f"{verb} {name}: stopped"))
            else:
                print(printable(f"{verb} {name}: {describe(ext)}"))
        ext = res.extension
        return 1 if enabled and ext is not None and not working(ext) else 0

    def offline() -> int:
        found = find_local(o, where, name)
        if enabled:  # a disabled project copy that gave way to a global one, if any
            found = to_enable(found)
        change = partial(manage.set_enabled, found, enabled)
        try:
            if found.scope == "project":
                paths, _ = settings(where)
                trust.keep_trust(paths.home, workspace_of(o), found, change)
            else:
                change()
        except manage.ManageError as exc:
            die(f"zot: {exc}")
        if o.json:
            print_json(offline_info(manage.find(name, local(o, where)[0])))
        else:
            print(printable(f"{verb} {name}; {OFFLINE}"))
        return 0

    return with_client(o, where, live, offline)


@app.command
def enable(name: str, /, *, opts: Options | None = None, where: Where | None = None) -> int:
    """Enable an extension (rewrites "enabled" in its extension.json) and start it.

    Args:
        name: The extension's name.
    """
    return _set_enabled(name, True, opts, where)


@app.command
def disable(name: str, /, *, opts: Options | None = None, where: Where | None = None) -> int:
    """Disable an extension (rewrites "enabled" in its extension.json) and stop it.

    Args:
        name: The extension's name.
    """
    return _set_enabled(name, False, opts, where)


@app.command
def reload(
    name: str | None = None, /, *, opts: Options | None = None, where: Where | None = None
) -> int:
    """Restart one extension, or all, from its manifest on disk; wait until ready.

    Calls pending on the old process fail with extension_failed; new calls
    reach the new one. Directories added by hand are picked up.

    Args:
        name: The extension to reload [default: all of them].
    """
    o = opts or Options()

    async def live(zot: Client) -> int:
        infos = await zot.ext_reload(name)
        if o.json:
            print_json(infos)
        else:
            for i in infos:
                print(printable(f"reloaded {i.name}: {describe(i)}"))
            if not infos:
                print("nothing to reload: no extensions here")
        # Reloading everything, an untrusted or disabled one was not asked for by name.
        broken = ("failed", "untrusted") if name is not None else ("failed",)
        return 1 if any(i.state in broken for i in infos) else 0

    def offline() -> int:
        die("zot: zotd is not running; nothing to reload (extensions load when it starts)")

    return with_client(o, where, live, offline)


@app.command(name="trust")
def trust_(*, opts: Options | None = None, where: Where | None = None) -> int:
    """Trust this project's own extensions (./.zot/extensions/) as they are now, and start them.

    Project-local extensions come with the repository, so zotd runs them only
    once trusted. Trust is pinned to their manifests and the files they run:
    after a change, they wait for `zot ext trust` again.
    """
    o = opts or Options()

    def report(names: list[str], note: str, broken: list[str]) -> int:
        if o.json:
            print_json(names)
        elif not names and not broken:
            print(printable(f"no project-local extensions in {workspace_of(o)}"))
        elif names:
            print(printable(f"trusted {', '.join(names)} in {workspace_of(o)}{note}"))
        return 1 if broken else 0

    async def live(zot: Client) -> int:
        trusted = [i.name for i in await zot.ext_trust()]
        # Every project-local one, also those that could not be trusted (a
        # broken manifest): what the user sees running after this.
        project = [i for i in await zot.list_extensions() if i.scope == "project"]
        if not o.json:
            for i in project:
                print(printable(f"{i.name}: {describe(i)}"))
        return report(trusted, "", [i.name for i in project if not working(i)])

    def offline() -> int:
        paths, _ = settings(where)
        # Also the copies that give way to a global one until trusted.
        project = [f for f in every_copy(local(o, where)[0]) if f.scope == "project"]
        broken = [f for f in project if f.error]
        for f in broken:
            print(printable(f"{f.name} cannot start: {f.error}"), file=sys.stderr)
        names = trust.trust(paths.home, workspace_of(o), [f for f in project if not f.error])
        return report(names, f"; {OFFLINE}", [f.name for f in broken])

    return with_client(o, where, live, offline)


app.command(ext_logs.logs, name="logs")
app.command(ext_env_cli.env, name="env")
app.command(ext_mcp_cli.add_mcp, name="add-mcp")
app.command(ext_mcp_cli.import_mcp, name="import-mcp")
app.command(
    "zotd.cli.doctor_cli:doctor",
    name="doctor",
    help="Check each extension and say what to do about each problem.",
)
app.command(
    "zotd.cli.dev_cli:dev",
    name="dev",
    help="Run an extension from DIR for this workspace, restarted when its files change.",
)
