"""What is installed for a directory, read from disk: ``zot ext`` without a daemon."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from ..model import manage, trust
from ..model.discovery import discover
from ..model.manifest import Found
from .common import Options, Where, die, settings


def workspace_of(opts: Options) -> Path:
    """The workspace of ``--cwd`` (else the cwd), named as the daemon names it:
    by its real path."""
    return Path(os.path.realpath(opts.cwd or os.getcwd()))


def local(opts: Options, where: Where | None) -> tuple[list[Found], Path]:
    """What is installed for this directory (no daemon needed), and the global dir;
    project-local extensions not trusted yet are marked as the daemon would
    (and, as there, give way to a global one of the same name)."""
    paths, config = settings(where)
    workspace = workspace_of(opts)
    vet = None
    if not config.trust_project_extensions:
        vet = partial(trust.vet, workspace=workspace, store=trust.load(paths.home))
    found = discover(workspace=workspace, global_dir=paths.extensions_dir, vet=vet)
    return found, paths.extensions_dir


def find_local(opts: Options, where: Where | None, name: str) -> Found:
    """The installed extension ``name``; exits with the names there are if none."""
    found, _ = local(opts, where)
    try:
        return manage.find(name, found)
    except manage.ManageError as exc:
        die(f"zot: {exc}")
