"""Current zot's one-way frames, passed on to agents: ``submit``,
``submit_slash``, ``clear_notes``, and a spontaneous ``open_panel``.

(Being built.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol import extension as ep

if TYPE_CHECKING:
    from .extension import Extension
    from .workspace import Workspace

log = logging.getLogger(__name__)


def route(ws: Workspace, ext: Extension, frame: ep.OneWay) -> None:
    """Passes ``frame`` on to the workspace's agents."""
    log.debug("extension %s: %s not passed on yet", ext.name, type(frame).__name__)
