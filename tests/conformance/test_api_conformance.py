"""Schemathesis against the live schema: every operation, with an agent's, an operator's and
an admin's token, all checks (response schema conformance, status codes, negative data
rejected, positive data accepted, ...), at least 50 generated examples per operation.

Run: `DATABASE_URL=postgres://... ./dev test -q -m schemathesis` (CI does, on PostgreSQL).
The schemathesis CLI runs against a gunicorn server; its report is printed on failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import ROOT

# django_db: so that pytest-django creates the test database the live server uses; the
# server's rows are committed by the server itself.
pytestmark = [pytest.mark.schemathesis, pytest.mark.django_db]

EXAMPLES = 50
TIME_BUDGET = 900  # seconds per role: a hard stop, far above the usual run


@pytest.mark.parametrize("role", ["agent", "operator", "admin"])
def test_every_answer_matches_the_schema(world, role, tmp_path):
    targets = {
        "task_id": world.task_ids,
        "model_call_id": world.model_call_ids,
        "tool_call_id": world.tool_call_ids,
        "operation_id": world.operation_ids,
        "name": ["default", "agent-st"],
    }
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", world.server.api + "schema/",
        "--checks", "all",
        "--max-examples", str(EXAMPLES),
        "--header", f"Authorization: Bearer {world.tokens[role]}",
        "--generation-allow-x00", "false",  # NUL is refused on purpose, tested in tests/api
        "--seed", "7",
        "--workers", "4",
        "--request-timeout", "30",
        "--max-failures", "50",
        "--no-color",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]  # fmt: skip
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.conformance.hooks",
        "LOOPWARDEN_CONFORMANCE_TARGETS": json.dumps(targets),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIME_BUDGET
    )
    report = done.stdout[-20000:] + done.stderr[-5000:]
    print(report)
    if done.returncode != 0:
        pytest.fail(f"schemathesis found failures as {role}:\n{report}", pytrace=False)
