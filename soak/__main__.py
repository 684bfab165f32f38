"""``python -m soak``: runs the soak (see :mod:`soak.main`)."""

from __future__ import annotations

import sys

from soak.main import main

sys.exit(main(prog="python -m soak"))
