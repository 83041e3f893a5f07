"""`.env.example` documents every variable the settings read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_variable_the_settings_read_is_in_env_example():
    settings = (ROOT / "loopwarden" / "settings.py").read_text()
    read = set(re.findall(r'env_(?:str|bool|int|list|rate)\(\s*"([A-Z0-9_]+)"', settings))
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert {"LOOPWARDEN_HTTPS", "API_THROTTLE_RATE", "SIGNIN_FAILURE_LIMIT"} <= read
    assert sorted(read - documented) == []
