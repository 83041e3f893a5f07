"""The guard core's tests need no Django and no database: plain pytest.

The repository root goes on sys.path so `pytest tests/guard` works from anywhere, with or
without pytest-django (which would otherwise be the one adding it).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
