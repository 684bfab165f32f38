#!/usr/bin/env python3
"""An extension that dies at start, saying why on stderr (for zot ext doctor's tests).

doctor_crash.py --name NAME
"""

import sys

print("doctor_crash: loading its settings", file=sys.stderr, flush=True)
print("doctor_crash: error: no API key in WEATHER_KEY", file=sys.stderr, flush=True)
sys.exit(3)
