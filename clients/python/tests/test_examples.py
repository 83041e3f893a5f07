"""examples/: each framework's looping agent, run as a user runs it, against the live server."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

EXAMPLES = ["guard_langchain.py", "guard_openai_agents.py", "guard_pydantic_ai.py"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_loops_and_gets_stopped(live, example, tmp_path):
    script = ROOT / "examples" / example
    env = {**os.environ, "LOOPWARDEN_URL": live.api, "LOOPWARDEN_TOKEN": live.agent_token}
    done = subprocess.run(
        [sys.executable, "-P", str(script)], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("search('refund policy') ran") == 2
    # The third identical plan is repeated_output (a BLOCK first, then same_call, if the
    # server resets that streak on the first search's novel result).
    assert re.search(r"stopped: PARTIAL/(repeated_output|same_call) \(GUARD_LOOP_DETECTED\)", out)
    assert out.count("ran, and its response was lost") == 1
    assert "stopped: NEEDS_HUMAN/unknown_commit (GUARD_LEDGER)" in out
    assert out.count("console: ") == 2
