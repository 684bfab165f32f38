"""``zot top``: a live, full-screen view of the workspace's extensions.

The screen is :mod:`.top_app` (Textual, the ``top`` extra); this is the
command: it checks that Textual is there and that it runs on a terminal,
reaches the daemon first (starting one unless ``--no-start``, and saying
why not in one line, before the screen opens), then runs the view until
``q``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..client import Client
from ..protocol import agent as ap
from .common import Options, Where, die, settings, token_for, with_client

INSTALL_HINT = (
    "zot top: needs Textual, which is not installed; install it with pip install 'zotd[top]'"
)


def top(*, opts: Options | None = None, where: Where | None = None) -> int:
    """Show the workspace's extensions live, full screen, until q.

    One row per extension: state, pid, uptime, restarts, memory, CPU,
    calls per second, p95 latency and last error, kept up to date. Keys: r
    reloads (restarts) the highlighted extension, e and d enable and
    disable it, l opens its log (followed live), i shows or hides the
    intercept decisions of the audit trail, q quits. Needs the top extra
    (pip install 'zotd[top]').
    """
    o = opts or Options()
    if o.json:
        die("zot top: --json is not for a live view; `zot ext list --json` lists the extensions", 2)
    try:
        from .top_app import Target, TopApp
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "textual":
            raise
        die(INSTALL_HINT)
    if not (sys.stdin.isatty() and sys.stderr.isatty()):  # Textual draws on stderr
        die("zot top: needs a terminal; `zot ext list` shows the extensions once")
    paths, config = settings(where)
    hello: list[ap.HelloData] = []

    async def reach(zot: Client) -> int:
        if zot.hello_data is not None:
            hello.append(zot.hello_data)
        return 0

    with_client(o, where, reach)  # no daemon, a bad token: a message and exit 1, here
    target = Target(
        socket=paths.socket,
        cwd=o.cwd or Path(os.getcwd()),
        token=token_for(o.token, config),
        logs_dir=paths.logs_dir,
        workspace=hello[0].workspace if hello else None,
    )
    code = TopApp(target).run()
    return 0 if code is None else code
