"""The skills a workspace's extensions ship (manifest ``skills``).

(Being built.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol import agent as ap

if TYPE_CHECKING:
    from .workspace import Workspace


def list_skills(ws: Workspace) -> ap.SkillsData:
    """Every skill of the workspace's extensions."""
    return ap.SkillsData(skills=[])
