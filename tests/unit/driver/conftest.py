"""Driver unit tests: the package lives in driver/ (installed with `pip install -e .`)."""
from __future__ import annotations

import sys
from pathlib import Path

DRIVER = Path(__file__).resolve().parents[3] / "driver"
if str(DRIVER) not in sys.path:
    sys.path.insert(0, str(DRIVER))
