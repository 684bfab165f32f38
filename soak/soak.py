#!/usr/bin/env python3
"""``python soak/soak.py [options]``: the soak as a script, the same as ``python -m soak``.

Run as a script, Python puts ``soak/`` itself first on the module path,
where this file would stand for the package: the checkout's root goes
there instead, so that ``soak`` is the package.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    from soak.main import main

    sys.exit(main())
