"""The skills a workspace's extensions ship (manifest ``skills``): ``list_skills``.

The skills are read at discovery (:mod:`zotd.model.skills`, in discovery's
worker thread), so answering is inline: no file is opened on the event
loop. An extension serves its skills while it may run: sound, enabled and
(project-local) trusted, whether it names a program or not; a crashed
process does not take its skills away, and a project copy the user has not
trusted serves none (its files are what trust has yet to pin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import agent as ap
from .status import serves_skills

if TYPE_CHECKING:
    from .workspace import Workspace


def list_skills(ws: Workspace) -> ap.SkillsData:
    """Every skill of the workspace's extensions, by name. Two extensions
    whose names are one in kebab-case (``my_tools``, ``my-tools``) may ship a
    skill of one name: the first in discovery's order serves it."""
    out: dict[str, ap.SkillInfo] = {}
    for ext in list(ws.extensions.values()):
        if not serves_skills(ext):
            continue
        for s in ext.found.skills:
            if s.name not in out:
                out[s.name] = ap.SkillInfo(
                    name=s.name, extension=ext.name, path=s.path, description=s.description
                )
    return ap.SkillsData(skills=sorted(out.values(), key=lambda s: s.name))
