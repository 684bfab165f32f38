"""What a workspace finds on disk as it opens: its extensions, and the
caches of the lazy ones, read in a worker thread.

The explicit and global extensions are the same for every workspace of a
daemon: :class:`Context` keeps one pass over them, checked as a whole
(:mod:`zotd.model.outer_scopes`); a workspace adds its own project-local
ones (and ``zot ext dev``'s directories), trusted or not, and the caches of
its own lazy ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import msgspec

from ..model import trust
from ..model.config import Config
from ..model.discovery import discover, read_outer
from ..model.manifest import Found
from ..model.outer_scopes import Outer, OuterScopes, Prefetched
from ..model.paths import Paths
from ..model.stamps import Look
from . import dozing, keeper
from .process import Spawner

__all__ = ["Context", "find"]


class Context(msgspec.Struct, frozen=True):
    """What every workspace of one daemon shares."""

    config: Config
    paths: Paths
    explicit: Sequence[Path]
    spawner: Spawner
    env: Mapping[str, str]
    #: The explicit and global extensions as the last workspace read them.
    outer: OuterScopes = msgspec.field(default_factory=OuterScopes)

    def read_outer(self) -> Outer:
        """Blocking: the explicit and global extensions and the lazy ones'
        caches, checked as a whole (see :mod:`zotd.model.outer_scopes`)."""
        config = self.config
        return self.outer.read(
            read_outer,
            explicit=self.explicit,
            global_dir=self.paths.extensions_dir,
            path_env=self.env.get("PATH", ""),
            cache_dir=keeper.cache_dir(self.paths.home),
            lazy=lambda f: f.manifest is not None and config.lazy_for(f.name, f.manifest.lazy),
        )


def find(
    ctx: Context, root: Path, dev_dirs: Sequence[Path], *, skip: Callable[[Found], bool]
) -> tuple[list[Found], dict[str, tuple[Found, Prefetched]]]:
    """Blocking: the extensions of the workspace ``root`` on disk now, one
    per name, project-local ones marked if the user has not trusted them (a
    project-local copy that may not run gives way to a global one: see
    :func:`~zotd.model.discovery.discover`); and, by name, the cache read
    for each lazy one (with the very ``Found`` it was read for), but those
    ``skip`` says another owner starts (the shared pool).

    Bounded: it reads every manifest (regular files only, of at most 64
    KiB), and walks the directory of each project-local extension (hashing
    it, up to the bounds of :mod:`zotd.model.trust`, if it was trusted
    before).
    """
    config = ctx.config
    vet = None
    if not config.trust_project_extensions:
        store = trust.load(ctx.paths.home)
        vet = partial(trust.vet, workspace=root, store=store)
    look = Look()  # (what discovery stamps, the caches' reads look up again)
    outer = ctx.read_outer()
    found = discover(
        workspace=root,
        global_dir=ctx.paths.extensions_dir,
        explicit=dev_dirs,
        path_env=ctx.env.get("PATH", ""),
        vet=vet,
        look=look,
        outer=outer,
    )
    for f in found:  # zotd.toml's `scope` over the manifest's
        f.sharing = config.sharing_for(f.name, f.sharing)
    read = {id(f): outer.caches.get((f.name, f.dir)) for f in [*outer.explicit, *outer.global_]}
    ahead: dict[str, tuple[Found, Prefetched]] = {}
    for f in found:  # (the outer ones' caches were read with them; a project's are read now)
        cache = read.get(id(f))
        if cache is not None and not skip(f):
            ahead[f.name] = (f, cache)
    project = [f for f in found if id(f) not in read]
    cache_dir = keeper.cache_dir(ctx.paths.home)
    ahead |= dozing.prefetch_lazy(project, config, cache_dir, skip, look)
    return found, ahead
