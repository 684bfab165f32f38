"""``zot skills``: the skills the workspace's extensions ship (manifest ``skills``).

One line a skill: its name (``<extension in kebab-case>:<skill>``), its
description and the extension serving it; ``--json`` prints the
``list_skills`` entries (``name``, ``extension``, ``path``,
``description``). The path of each ``SKILL.md`` is in the JSON, and in the
text under ``--paths``. Everything an extension wrote is shown escaped
(:func:`~.output.printable`).
"""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from ..client import Client
from .common import Options, Where, print_json, table, with_client
from .output import printable


def skills(
    *,
    paths: Annotated[bool, Parameter(negative=())] = False,
    opts: Options | None = None,
    where: Where | None = None,
) -> int:
    """List the skills the workspace's extensions ship (by name).

    An extension serves its skills while it may run: a disabled one, or a
    project-local one not yet trusted (zot ext trust), serves none.

    Args:
        paths: Show each skill's SKILL.md.
    """
    o = opts or Options()

    async def body(zot: Client) -> int:
        found = await zot.list_skills()
        if o.json:
            print_json(found)
            return 0
        if not found:
            print("no skills (no extension ships one)")
            return 0
        rows = []
        for s in found:
            row = [printable(s.name), printable(s.description), f"({printable(s.extension)})"]
            if paths:
                row.append(printable(s.path))
            rows.append(row)
        print(table(rows))
        return 0

    return with_client(o, where, body)
