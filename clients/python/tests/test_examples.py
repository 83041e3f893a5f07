"""examples/: each framework's looping agent, run as a user runs it, against the live server."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

EXAMPLES = ["guard_langchain.py", "guard_openai_agents.py", "guard_pydantic_ai.py"]


def play(example: str, api: str, token: str, cwd: object) -> str:
    env = {**os.environ, "LOOPWARDEN_URL": api, "LOOPWARDEN_TOKEN": token}
    done = subprocess.run(
        [sys.executable, "-P", str(ROOT / "examples" / example)], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_loops_and_gets_stopped_and_a_run_that_answers_is_finished(
    live, example, tmp_path
):
    out = play(example, live.api, live.agent_token, tmp_path)
    assert out.count("search('refund policy') ran") == 2 + 1
    # The third identical plan is repeated_output (a BLOCK first, then same_call, if the
    # server resets that streak on the first search's novel result).
    assert re.search(r"stopped: PARTIAL/(repeated_output|same_call) \(GUARD_LOOP_DETECTED\)", out)
    assert out.count("ran, and its response was lost") == 1
    assert "stopped: NEEDS_HUMAN/unknown_commit (GUARD_LEDGER)" in out
    # The third task's run ends with its answer: finished, never left to its deadline.
    assert "answered, and finished: PARTIAL/goal_unverified" in out
    assert out.count("console: ") == 3


@pytest.mark.parametrize("example", EXAMPLES)
def test_under_the_default_profile_no_task_of_the_example_waits_out_its_deadline(
    live, example, tmp_path
):
    out = play(example, live.api, live.strict_token, tmp_path)
    assert "answered, and finished: PARTIAL/goal_unverified" in out
    assert "deadline" not in out and out.count("console: ") == 3
