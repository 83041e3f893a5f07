"""The README's examples, as written, against a live server.

The code blocks are read from README.md at test time, so the test follows the README: the
curl block runs in bash in the repository (where the README says to run it, as a second
terminal beside `./dev run`), the thin-client block runs with this virtualenv's python from a
directory outside the repository. The only things given are what the README tells the reader
to set: `PORT`, the server's `DATABASE_URL`/`LOOPWARDEN_DATA_DIR`, and the token.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from urllib.parse import urlparse

import pytest
from django.db import connection

from agents.guard import terms
from agents.models import Task
from tests.live import ROOT, terminal_env

# Slow (the README in subprocesses against a live server): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

README = (ROOT / "README.md").read_text()


def code_block(language: str, containing: str) -> str:
    blocks = re.findall(rf"^```{language}\n(.*?)^```", README, re.S | re.M)
    matching = [block for block in blocks if containing in block]
    assert matching, f"README.md has no {language} block with {containing!r}"
    return matching[0]


@pytest.fixture
def server_env(live_server, tmp_path) -> dict[str, str]:
    """The environment of a second terminal next to the server."""
    return terminal_env(
        port=urlparse(live_server.url).port, settings_dict=connection.settings_dict,
        data_dir=tmp_path / "data",
    )  # fmt: skip


def run_curl_example(env: dict[str, str]) -> subprocess.CompletedProcess:
    assert (ROOT / ".venv" / "bin" / "python").exists(), "the README expects ./dev's .venv"
    return subprocess.run(
        ["bash", "-c", code_block("sh", "curl ")], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_curl_example_runs_as_written_and_completes_the_task(server_env):
    result = run_curl_example(server_env)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.strip().splitlines()
    assert json.loads(lines[0])["decision"] == "ALLOW"
    assert re.fullmatch(r"tool call \d+", lines[1])
    final = json.loads(lines[2])
    assert (final["decision"], final["state"], final["reason"]) == ("STOP", "COMPLETED", "goal_met")
    task = Task.objects.get(goal="refund order 42")
    assert (task.state, task.agent.name) == (terms.COMPLETED, "demo")


def test_the_curl_example_run_again_reuses_the_refund_as_the_readme_says(server_env):
    run_curl_example(server_env)

    again = run_curl_example(server_env)

    assert "TOOL_CALL_NOT_EXECUTED" in again.stdout and "REUSE" in again.stdout
    assert "409" in again.stderr
    states = [t.state for t in Task.objects.filter(goal="refund order 42")]
    assert states.count(terms.COMPLETED) == 1


def test_the_curl_example_stops_loudly_without_a_token(server_env):
    broken = {**server_env, "DATABASE_URL": "not-a-url"}  # create_agent cannot run

    result = run_curl_example(broken)

    assert result.returncode != 0
    assert "create_agent printed no token" in result.stderr
    assert not Task.objects.exists()


def test_the_client_example_runs_as_written_outside_the_repository(
    server_env, make_agent, tmp_path
):
    token = make_agent("refund-bot")[1]
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    script = workdir / "refund.py"
    script.write_text(code_block("python", "Client("))
    env = {**server_env, "LOOPWARDEN_TOKEN": token}

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            # -P: the repository is not on sys.path; the client comes from its distribution.
            [sys.executable, "-P", str(script)], cwd=workdir, env={**env, **extra},
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    result = run({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("COMPLETED"), result.stdout
    assert Task.objects.get(goal="refund order 43").state == terms.COMPLETED

    # Run again, as the README says: the ledger answers REUSE and the refund does not run twice.
    again = run({})
    assert again.returncode == 0, again.stderr
    assert "'reused': True" in again.stdout, again.stdout
    assert Task.objects.filter(goal="refund order 43").count() == 2
