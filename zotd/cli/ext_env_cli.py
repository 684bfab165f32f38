"""``zot ext env NAME [--allow VAR]... [--deny VAR]...``: the variables of
zotd's environment an extension sees beyond the allowlist, and changing them.

Names only: no value is ever read into what this prints (the daemon sends
none). With a daemon, a change applies at once (the extension is restarted
wherever it runs); without one, the grants file is written and the daemon
reads it when it starts, and whether a variable is set is told from this
command's own environment (the one a zotd started from here inherits).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from cyclopts import Parameter

from ..client import Client
from ..model import env_grants
from ..model.environment import Passthrough, allowlisted
from ..protocol import agent as ap
from .common import Options, Where, die, print_json, settings, table, with_client
from .ext_view import describe
from .local import find_local
from .output import printable

#: The STATE of a variable the extension gets.
PASSED = "passed"
#: The STATE of one it would get if the daemon had it.
NOT_SET = "not set"
#: The STATE of one a denial hides.
HIDDEN = "hidden (denied)"

Names = Annotated[
    tuple[str, ...], Parameter(negative=(), consume_multiple=False, show_default=False)
]


def env(
    name: str,
    /,
    *,
    allow: Names = (),
    deny: Names = (),
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """Show which variables of zotd's environment an extension sees beyond the
    allowlist (names only, never values), and let it see more or fewer.

    Each comes from its manifest (env_passthrough), from zotd.toml
    ([extensions.NAME] env_passthrough) or from --allow here. A change is
    kept in $ZOT_HOME/env-grants.json and restarts the extension wherever it
    runs. Without a daemon it applies when zotd starts.

    Args:
        name: The extension's name.
        allow: Let it see this variable of zotd's environment (repeatable).
        deny: Take a grant back, and hide the variable even if its manifest
            or zotd.toml passes it through (repeatable; --allow undoes it).
    """
    o = opts or Options()
    changing = bool(allow or deny)

    async def live(zot: Client) -> int:
        data = await zot.ext_env(name, allow=allow, deny=deny)
        if o.json:
            print_json(data)
            return 0
        report(data, running=True)
        if changing:
            infos = {i.name: i for i in await zot.list_extensions()}
            if name in infos:
                print(printable(f"restarted {name}: {describe(infos[name])}"))
        return 0

    def offline() -> int:
        paths, config = settings(where)
        found = find_local(o, where, name)  # an unknown name: says which there are
        for var in (*allow, *deny):
            if allowlisted(var):
                die(
                    f"zot: every extension gets {var} already (zotd's allowlist); "
                    "--allow and --deny are for the variables beyond it"
                )
        try:
            if changing:
                env_grants.change(paths.home, name, allow, deny)
            grants = env_grants.grants_for(paths.home, name)
        except env_grants.GrantsError as exc:
            die(f"zot: {exc}")
        own = config.extensions.get(name)
        passing = Passthrough.of(found.manifest, own.env_passthrough if own else (), grants)
        data = as_data(name, passing, os.environ)
        if o.json:
            print_json(data)
            return 0
        report(data, running=False)
        if changing:
            print("zotd is not running; this applies when it next starts")
        return 0

    return with_client(o, where, live, offline)


def as_data(name: str, passing: Passthrough, environ: Mapping[str, str]) -> ap.EnvData:
    """What the daemon would answer, with ``environ`` as its environment."""
    return ap.EnvData(
        name=name,
        variables=passing.present(environ),
        manifest=list(passing.manifest),
        config=list(passing.config),
        allowed=list(passing.allowed),
        denied=list(passing.denied),
    )


def report(data: ap.EnvData, *, running: bool) -> None:
    """The table of ``zot ext env``: each variable, where it comes from, and
    whether the extension gets it."""
    passing = Passthrough(
        manifest=tuple(data.manifest),
        config=tuple(data.config),
        allowed=tuple(data.allowed),
        denied=tuple(data.denied),
    )
    name = data.name
    if not passing.every:
        print(
            printable(
                f"{name} gets no variables beyond the allowlist; let it see one with "
                f"`zot ext env {name} --allow VAR`, or with env_passthrough in "
                f"[extensions.{name}] of zotd.toml"
            )
        )
        return
    rows = []
    for var in passing.every:
        if var in passing.denied:
            state = HIDDEN
        elif var in data.variables:
            state = PASSED
        else:
            state = NOT_SET
        rows.append([var, ", ".join(passing.sources(var)), state])
    print(printable(table(rows, header=["VARIABLE", "FROM", "STATE"]), multiline=True))
    missing = [r[0] for r in rows if r[2] == NOT_SET]
    if missing:
        whose = "zotd's environment" if running else "this environment (zotd is not running)"
        print(
            printable(
                f"not set in {whose}: {', '.join(missing)}; set it where zotd starts, "
                'then restart zotd (docs/configuration.md, "API keys")'
            )
        )
