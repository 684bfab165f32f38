"""``zot ext``: list, install, remove, enable, disable, reload extensions; read their logs.

With a daemon running, every command goes through it (the ``ext_*``
requests), so a change applies at once to every agent. Without one, the file
operations still work, on the same directories, and apply when zotd starts.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

from cyclopts import App, Parameter

from .. import manage, trust
from ..client import Client
from ..manifest import Found
from ..protocol import agent as ap
from .common import Options, Where, die, print_json, settings, table, with_client

app = App(
    name="ext",
    help="Manage extensions: list, install, remove, enable, disable, reload, logs.",
)

OFFLINE = "zotd is not running; this applies when it next starts"
NOT_RUNNING = "zotd is not running; these start when it next starts"


def _cwd(opts: Options) -> Path:
    # The workspace, named as the daemon names it: by its real path.
    return Path(os.path.realpath(opts.cwd or os.getcwd()))


def _local(opts: Options, where: Where | None) -> tuple[list[Found], Path]:
    """What is installed for this directory (no daemon needed), and the global dir;
    project-local extensions not trusted yet are marked as the daemon would."""
    paths, config = settings(where)
    found = manage.installed(workspace=_cwd(opts), global_dir=paths.extensions_dir)
    if not config.trust_project_extensions:
        store = trust.load(paths.home)
        for f in found:
            if f.scope == "project" and not f.error:
                f.untrusted = trust.distrust_reason(f, _cwd(opts), store)
    return found, paths.extensions_dir


def _find_local(opts: Options, where: Where | None, name: str) -> Found:
    found, _ = _local(opts, where)
    try:
        return manage.find(name, found)
    except manage.ManageError as exc:
        die(f"zot: {exc}")


def _offline_info(f: Found) -> ap.ExtensionInfo:
    m = f.manifest
    enabled = m.enabled if m else True
    return ap.ExtensionInfo(
        name=f.name,
        version=m.version if m else "",
        description=m.description if m else "",
        language=m.language if m else "",
        scope=f.scope,
        dir=str(f.dir),
        enabled=enabled,
        state=(
            "failed"
            if f.error
            else "disabled"
            if not enabled
            else "untrusted"
            if f.untrusted
            else "stopped"
        ),
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
    )


def _describe(info: ap.ExtensionInfo) -> str:
    provides = [f"/{c}" for c in info.commands] + info.tools
    what = f"; provides {', '.join(provides)}" if provides else ""
    error = f": {info.last_error}" if info.state == "failed" and info.last_error else ""
    return f"{info.state}{error}{what}"


def _print_list(infos: list[ap.ExtensionInfo], json: bool, running: bool) -> int:
    if json:
        print_json(infos)
        return 0
    if not infos:
        print("no extensions installed; install one with `zot ext install <path|git-url>`")
        return 0
    rows = []
    for i in infos:
        provides = ", ".join([f"/{c}" for c in i.commands] + i.tools) or "-"
        rows.append(
            (
                i.name,
                i.version or "-",
                i.scope,
                "yes" if i.enabled else "no",
                i.state,
                str(i.pid) if i.pid is not None else "-",
                str(i.restarts),
                provides,
                i.dir,
            )
        )
    header = ("NAME", "VERSION", "SCOPE", "ENABLED", "STATE", "PID", "RESTARTS", "PROVIDES", "DIR")
    print(table(rows, header))
    for i in infos:
        if i.state in ("failed", "untrusted") and i.last_error:
            print(f"{i.name}: {i.last_error}", file=sys.stderr)
    if not running:
        print(f"({NOT_RUNNING})", file=sys.stderr)
    return 0


@app.command(name="list")
def list_(*, opts: Options | None = None, where: Where | None = None) -> int:
    """List the extensions of this directory's workspace: project, global and --ext ones.

    Shows each one's version, scope, live state, pid, restarts, commands and
    tools, and directory. Works without a running daemon (no live state then).
    """
    o = opts or Options()

    async def live(zot: Client) -> int:
        return _print_list(await zot.list_extensions(), o.json, running=True)

    def offline() -> int:
        found, _ = _local(o, where)
        return _print_list([_offline_info(f) for f in found], o.json, running=False)

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
    A running daemon starts it at once.

    Args:
        source: A directory holding extension.json, a git URL (https://, ssh://,
            file://, user@host:path) or a bare git repository.
        project: Install into this project (./.zot/extensions/) instead of globally.
    """
    o = opts or Options()
    scope = "project" if project else "global"
    if not manage.is_url(source) and Path(source).exists():
        source = str(Path(source).absolute())  # the daemon has its own cwd

    async def live(zot: Client) -> int:
        res = await zot.ext_install(source, scope=scope)
        if o.json:
            print_json(res)
        else:
            ext = res.extension
            if ext is None:
                state = "not started here"
            elif ext.dir != res.dir:
                state = f"hidden here by the {ext.scope} one in {ext.dir}"
            else:
                state = _describe(ext)
            print(f"installed {res.name} ({res.scope}) in {res.dir}: {state}")
        return 0

    def offline() -> int:
        paths, _ = settings(where)
        try:
            root = manage.scope_root(scope, workspace=_cwd(o), global_dir=paths.extensions_dir)
            found = manage.install(source, root, scope)
        except manage.ManageError as exc:
            die(f"zot: {exc}")
        if scope == "project":  # what the user installs, the user trusts
            trust.trust(paths.home, _cwd(o), [found])
        if o.json:
            print_json(_offline_info(found))
        else:
            print(f"installed {found.name} ({found.scope}) in {found.dir}; {OFFLINE}")
        return 0

    return with_client(o, where, live, offline)


def _confirm(name: str, directory: str) -> None:
    if not sys.stdin.isatty():
        die(
            f"zot: not removing {name} without confirmation, and there is no terminal to ask; "
            "pass --yes",
            code=2,
        )
    try:
        answer = input(f"Remove extension {name} ({directory})? [y/N] ").strip().lower()
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
            print(f"removed {res.name} ({res.dir})")
            if res.extension is not None:
                print(f"{name} is now the {res.extension.scope} one: {_describe(res.extension)}")
        return 0

    def offline() -> int:
        found = _find_local(o, where, name)
        if not yes:
            _confirm(name, str(found.dir))
        _, global_dir = _local(o, where)
        try:
            manage.remove(found, global_dir=global_dir)
        except manage.ManageError as exc:
            die(f"zot: {exc}")
        if o.json:
            print_json(_offline_info(found))
        else:
            print(f"removed {name} ({found.dir}); {OFFLINE}")
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
                print(f"{verb} {name} (not in this workspace)")
            elif ext.state == "disabled":
                print(f"{verb} {name}: stopped")
            else:
                print(f"{verb} {name}: {_describe(ext)}")
        return 0

    def offline() -> int:
        found = _find_local(o, where, name)
        try:
            manage.set_enabled(found, enabled)
        except manage.ManageError as exc:
            die(f"zot: {exc}")
        if o.json:
            print_json(_offline_info(manage.find(name, _local(o, where)[0])))
        else:
            print(f"{verb} {name}; {OFFLINE}")
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
                print(f"reloaded {i.name}: {_describe(i)}")
            if not infos:
                print("nothing to reload: no extensions here")
        return 1 if any(i.state == "failed" for i in infos) else 0

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

    def report(names: list[str], note: str) -> int:
        if o.json:
            print_json(names)
        elif not names:
            print(f"no project-local extensions in {_cwd(o)}")
        else:
            print(f"trusted {', '.join(names)} in {_cwd(o)}{note}")
        return 0

    async def live(zot: Client) -> int:
        infos = await zot.ext_trust()
        for i in infos:
            if not o.json:
                print(f"{i.name}: {_describe(i)}")
        return report([i.name for i in infos], "")

    def offline() -> int:
        paths, _ = settings(where)
        found = [f for f in _local(o, where)[0] if f.scope == "project" and not f.error]
        return report(trust.trust(paths.home, _cwd(o), found), f"; {OFFLINE}")

    return with_client(o, where, live, offline)


@app.command
def logs(
    name: str,
    /,
    *,
    follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative=())] = False,
    lines: Annotated[int, Parameter(name=["--lines", "-n"])] = 100,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Print an extension's log (its stderr, and zotd's notes about it).

    Reads the file directly, so it works whether or not zotd runs.

    Args:
        name: The extension's name.
        follow: Keep printing what is appended, until Ctrl+C.
        lines: How many lines from the end to print first.
    """
    o = opts or Options()
    if lines < 0:
        die("zot: --lines must be 0 or more", code=2)
    paths, _ = settings(where)
    try:
        path = paths.extension_log(name)
    except ValueError:
        _find_local(o, where, name)  # not a name an extension can have: says which there are
        raise
    if not path.exists():
        _find_local(o, where, name)  # an unknown name: says which there are
        if not follow:
            print(f"no log yet for {name} ({path})", file=sys.stderr)
            return 0
    if o.json and not follow:
        print_json({"path": str(path), "lines": _tail_lines(path, lines)[0]})
        return 0
    offset = _print_tail(path, lines)
    if follow:
        try:
            _follow(path, offset)
        except KeyboardInterrupt:
            pass
    return 0


def _tail_lines(path: Path, lines: int) -> tuple[list[str], int]:
    """The last ``lines`` lines, and the offset they end at."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max(8192, lines * 256)))
            data = f.read(size - f.tell())
    except FileNotFoundError:
        return [], 0
    text = data.decode("utf-8", "replace").splitlines()
    return (text[-lines:] if lines else []), size


def _print_tail(path: Path, lines: int) -> int:
    """Prints the last ``lines`` lines; returns the offset they end at."""
    found, offset = _tail_lines(path, lines)
    for line in found:
        print(line)
    sys.stdout.flush()
    return offset


def _follow(path: Path, offset: int) -> None:
    """Prints what is appended to ``path`` past ``offset`` until interrupted
    (survives truncation)."""
    while True:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < offset:
            offset = 0  # truncated or replaced: start over
        if size > offset:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(size - offset)
            offset += len(data)
            sys.stdout.write(data.decode("utf-8", "replace"))
            sys.stdout.flush()
        time.sleep(0.2)
