"""Reading the global extensions once the daemon starts, before any workspace asks.

Every workspace sees the global extensions (``$ZOT_HOME/extensions``) and
the explicit ones (``--ext``). Reading their manifests, and the
registrations caches of the lazy ones, when the daemon starts fills the
memos of :mod:`zotd.model.rereads` and keeps the whole pass
(:mod:`zotd.model.outer_scopes`): the first workspace to open then finds
them read already, and only checks that nothing changed (a ``stat`` per
file); their log paths are made too. What is read here is not used otherwise; a workspace reads for
itself anyway, so a prefill that fails or has not finished costs nothing
but time.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from . import keeper, threads

if TYPE_CHECKING:
    from .workspace import Context

log = logging.getLogger(__name__)


async def warm(ctx: Context) -> None:
    """Reads the global and explicit extensions, and the lazy ones' caches,
    in a worker thread (:meth:`Context.read_outer <.finding.Context.read_outer>`).
    Never raises ``Exception`` (a problem is logged: each workspace meets it
    again, and says so)."""

    def read() -> int:
        ctx.read_outer()  # (a first pass fills the memos; the second, all hits, is kept)
        outer = ctx.read_outer()
        found = [*outer.explicit, *outer.global_]
        for f in found:  # (paths are slow to make the first time, on the loop)
            with contextlib.suppress(ValueError):
                keeper.log_path(ctx.paths, f.name)
        return len(found)

    try:
        count = await threads.run_sync(read)
    except Exception:
        log.exception("reading the global extensions ahead failed (each workspace reads them)")
        return
    log.debug("read %d global and explicit extension(s) ahead", count)
