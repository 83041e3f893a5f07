"""The guard core and the rules it shares with the client load no HTTP stack.

import-linter treats external packages as leaves, so it cannot see that a shared rule module
pulls httpx in through its package's `__init__`; a fresh interpreter can.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def modules_loaded_by(statement: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.mark.parametrize(
    "statement",
    [
        "import agents.guard.core",
        "import loopwarden_client.novelty, loopwarden_client.evidence",
        "import loopwarden_client; loopwarden_client.__version__",
    ],
)
def test_it_leaves_httpx_out(statement):
    loaded = modules_loaded_by(statement)

    assert "agents.guard.core" in loaded or "loopwarden_client" in loaded
    assert "httpx" not in loaded
    assert "django" not in loaded


def test_the_public_names_still_load_on_use():
    loaded = modules_loaded_by(
        "import loopwarden_client as c\n"
        "assert c.Client.__module__ == 'loopwarden_client.client'\n"
        "assert set(c.__all__) <= set(dir(c))\n"
        "from loopwarden_client import TaskStopped, ToolReport, arun"
    )

    assert "httpx" in loaded
