"""Where extensions are found, and which copy of a name is used.

Discovery (reference, "Layout & discovery") looks in two places, and
``zotd --ext PATH`` adds a third that wins over both:

1. explicit: directories named with ``--ext`` (scope ``explicit``),
2. project-local: ``<workspace>/.zot/extensions/<name>/`` (scope ``project``),
   then the servers of the project's own ``<workspace>/.mcp.json`` (scope
   ``project`` too, MCP servers run in the workspace root: see
   :mod:`.mcp_servers`); of two project copies of a name, the directory wins,
3. global: ``$ZOT_HOME/extensions/<name>/`` (scope ``global``).

Each directory is read by :func:`~.manifest.load`, which never raises (and
reads the skills a manifest lists, bounded: see :mod:`.skills`). A
scope's directory is listed up to :data:`MAX_DIRS` extensions. And a
project-local copy that cannot run (broken, disabled, or not trusted) does
not hide the user's own copy of the same name (see :func:`discover`); the
copies not used are kept as :class:`Aside`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import msgspec

from .manifest import Found, Scope
from .outer_scopes import Outer
from .project_mcp import is_project_server, project_servers
from .rereads import load_found
from .stamps import Look

log = logging.getLogger(__name__)

#: The most extension directories read from one scope's directory (by
#: name); more are left out, with a warning in the daemon's log.
MAX_DIRS = 256

#: The most entries of one scope's directory looked at while listing it.
MAX_LISTED = 4 * MAX_DIRS

#: Why a copy of an extension is not the one used (``Aside.why``): a
#: project-local copy that cannot run gives way to the user's own copy...
FAILED, DISABLED, UNTRUSTED = "failed", "disabled", "untrusted"
#: ... and any copy gives way to one of higher precedence that can.
HIDDEN = "hidden"


class Aside(msgspec.Struct):
    """A copy of an extension that discovery found and does not use.

    Attributes:
        found: the copy.
        why: :data:`FAILED`, :data:`DISABLED` or :data:`UNTRUSTED` (a
            project-local copy that cannot run, which gives way to a lower
            one), or :data:`HIDDEN` (a copy of higher precedence is used).
        reason: why, in words.
    """

    found: Found
    why: str
    reason: str


def _subdirs(root: Path) -> list[Path]:
    """The extension directories of a scope, by name: at most :data:`MAX_DIRS`
    (of the first :data:`MAX_LISTED` entries), with a warning if there are more."""
    return _listing(root)[0]


def _listing(root: Path) -> tuple[list[Path], list[str]]:
    """:func:`_subdirs`, and the paths of the other entries looked at (a
    link to a directory that is not there yet would be one once it is)."""
    dirs: list[Path] = []
    others: list[str] = []
    listed = 0
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                listed += 1
                if listed > MAX_LISTED:
                    log.warning(
                        "%s has more than %d entries: only the first %d are looked at",
                        root,
                        MAX_LISTED,
                        MAX_LISTED,
                    )
                    break
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir():  # a link to a directory counts; stat never blocks
                        dirs.append(Path(entry.path))
                        continue
                except OSError:
                    pass
                others.append(entry.path)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        log.warning("cannot list %s: %s", root, exc.strerror)
        return [], []
    dirs.sort()
    if len(dirs) > MAX_DIRS:
        log.warning(
            "%s has %d extension directories: only the first %d (by name) are read",
            root,
            len(dirs),
            MAX_DIRS,
        )
        others.extend(str(d) for d in dirs[MAX_DIRS:])
        del dirs[MAX_DIRS:]
    return dirs, others


def project_dir(workspace: Path) -> Path:
    """Project-local extensions of a workspace: ``<workspace>/.zot/extensions``."""
    return workspace / ".zot" / "extensions"


def stands_aside(found: Found) -> str:
    """Why a project-local copy gives way to a lower-precedence copy of its
    name: :data:`FAILED`, :data:`DISABLED`, :data:`UNTRUSTED`, or "" (it does not)."""
    if found.scope != Scope.PROJECT:
        return ""
    if found.error:
        return FAILED
    if found.manifest is not None and not found.manifest.enabled:
        return DISABLED
    if found.untrusted:
        return UNTRUSTED
    return ""


def _aside_reason(found: Found, why: str) -> str:
    if why == FAILED:
        return found.error
    if why == DISABLED:
        return 'its manifest says "enabled": false'
    return found.untrusted


def read_outer(
    explicit: Sequence[Path], global_dir: Path, path_env: str | None, look: Look
) -> tuple[list[Found], list[Found]]:
    """The explicit and the global extensions (the scopes every workspace
    sees alike: see :mod:`.outer_scopes`), each directory read by
    :func:`~.rereads.load_found`; ``look`` stamps every path they depend
    on (the global directory and what it lists too)."""
    found_explicit = [load_found(Path(d), Scope.EXPLICIT, path_env, look) for d in explicit]
    dirs, others = _listing(global_dir)
    look(str(global_dir.absolute()))  # (an entry added or removed)
    for other in others:
        look(other)
    return found_explicit, [load_found(d, Scope.GLOBAL, path_env, look) for d in dirs]


def discover(
    *,
    workspace: Path | None,
    global_dir: Path,
    explicit: Sequence[Path] = (),
    path_env: str | None = None,
    vet: Callable[[Found], None] | None = None,
    look: Look | None = None,
    outer: Outer | None = None,
) -> list[Found]:
    """Every extension a workspace sees, one per name, highest precedence first.

    Order: explicit, then project-local, then global, by directory name
    within each (extensions then start concurrently, and a contested command
    or tool name goes to whichever registers it first). A name already taken by a
    higher-precedence scope hides the lower one, with one exception: a
    project-local copy that cannot run (a broken manifest, ``"enabled":
    false``, or not trusted) does not hide a global copy of its name, which
    is used instead. A file in a cloned repository can neither replace the
    user's own extension until the user trusts it nor turn it off (a guard
    in particular). The copies not used are listed in the used one's
    :attr:`Found.passed_over`, with why; the project copy takes over once
    it can run (trusted, enabled, or its manifest fixed).

    ``path_env`` is the ``PATH`` the extensions will run with, for a bare
    ``exec``. ``vet`` is called with every project-local copy whose manifest
    is sound, before the choice: it may set ``untrusted`` (or ``error``), as
    the workspace's trust store says (see :func:`zotd.model.trust.vet`).
    ``look`` stamps what the manifests' memos depend on (see :mod:`.rereads`):
    give the same one to the reads that follow in the same pass. ``outer``,
    if given, is the explicit and global extensions read already (see
    :mod:`.outer_scopes`): ``global_dir`` is not read then, and ``explicit``
    comes before ``outer``'s explicit ones (a workspace's own, ``zot ext dev``).
    """
    look = look or Look()  # (the directories on PATH, stamped once for every manifest)
    ahead: list[Path | Found] = [*explicit, *(outer.explicit if outer is not None else [])]
    sources: list[tuple[str, Iterable[Path | Found]]] = [(Scope.EXPLICIT, ahead)]
    if workspace is not None:
        sources.append((Scope.PROJECT, _subdirs(project_dir(workspace))))
        servers, problems = project_servers(workspace, path_env)
        for problem in problems:
            log.warning("%s", problem)
        sources.append((Scope.PROJECT, servers))
    sources.append((Scope.GLOBAL, outer.global_ if outer is not None else _subdirs(global_dir)))
    copies: dict[str, list[Found]] = {}
    for scope, items in sources:
        for item in items:
            found = (
                item if isinstance(item, Found) else load_found(Path(item), scope, path_env, look)
            )
            same = copies.setdefault(found.name, [])
            kept = next((c for c in same if _slot(c) == _slot(found)), None) if same else None
            if kept is not None:
                log.warning(
                    "two %s extensions are named %r: using %s, ignoring %s",
                    scope,
                    found.name,
                    kept.origin or kept.dir,
                    found.origin or found.dir,
                )
                continue
            if scope == Scope.PROJECT and vet is not None and not found.error:
                vet(found)
            same.append(found)
    return [_choose(same) for same in copies.values()]


def _slot(found: Found) -> tuple[str, bool]:
    """Where a copy stands in the precedence: its scope, and, in a project,
    whether it is an entry of ``.mcp.json`` (after ``.zot/extensions/``)."""
    return found.scope, is_project_server(found)


def _choose(copies: list[Found]) -> Found:
    """The copy used among ``copies`` (one per scope, by precedence), with
    the others in its ``passed_over``."""
    if len(copies) == 1:  # (most names: one copy, nothing passed over)
        chosen = copies[0]
        chosen.passed_over = []
        return chosen
    chosen = next((c for c in copies if not stands_aside(c)), copies[0])
    before = True
    chosen.passed_over = []
    for c in copies:
        if c is chosen:
            before = False
            continue
        why = stands_aside(c) if before else HIDDEN
        reason = (
            _aside_reason(c, why)
            if before
            else f"the {chosen.scope} copy in {chosen.origin or chosen.dir} comes first"
        )
        chosen.passed_over.append(Aside(c, why, reason))
    return chosen


def to_enable(found: Found) -> Found:
    """The copy ``zot ext enable NAME`` acts on, given what runs under NAME:
    a project-local copy that gave way to it because it is disabled (it then
    takes the name back, if trusted), else ``found`` itself."""
    for aside in found.passed_over:
        if aside.why == DISABLED:
            return aside.found
    return found


def every_copy(found: Iterable[Found]) -> Iterator[Found]:
    """Each of ``found`` (from :func:`discover`), and then the copies it passed over."""
    for f in found:
        yield f
        for aside in f.passed_over:
            yield aside.found
