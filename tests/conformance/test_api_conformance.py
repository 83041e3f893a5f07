"""Schemathesis against the live schema: every operation, with an agent's, an operator's and
an admin's token, all checks (response schema conformance, status codes, negative data
rejected, positive data accepted, ...), at least 50 generated examples per operation.

Run: `DATABASE_URL=postgres://... ./dev test -q -m schemathesis` (CI does, on PostgreSQL).
The schemathesis CLI runs against a gunicorn server; its report and the end of the server's log
are printed on failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live import ROOT

# django_db: so that pytest-django creates the test database the live server uses; the
# server's rows are committed by the server itself.
pytestmark = [pytest.mark.schemathesis, pytest.mark.django_db]

EXAMPLES = 50
TIME_BUDGET = 900  # seconds for all three roles: a hard stop, far above the usual run


# Each role runs against the operations its token may use; that every other operation refuses
# it (403) is tests/api/test_permissions.py's role matrix. Halving the run keeps it in budget.
OPERATIONS = {
    "agent": [
        "task_list", "task_create", "task_get", "task_trace", "model_call_gate",
        "model_call_usage", "tool_call_request", "tool_call_result", "task_finish", "task_stop",
        "operation_list", "operation_get",
    ],
    "operator": [
        "task_list", "task_get", "task_trace", "task_stop", "task_resume", "operation_list",
        "operation_get", "operation_reconcile", "agent_pause", "agent_unpause", "agent_get",
        "profile_list",
        "profile_get", "audit_list",
    ],
    "admin": [
        "task_limits_update", "task_resume", "profile_list", "profile_create", "profile_get",
        "profile_update", "profile_delete", "agent_pause", "agent_unpause", "agent_get",
        "agent_update", "audit_list",
    ],
}  # fmt: skip
ROLES = tuple(OPERATIONS)
# CI runs one fixed seed; another (LOOPWARDEN_SCHEMATHESIS_SEED=n) explores other examples.
SEED = os.environ.get("LOOPWARDEN_SCHEMATHESIS_SEED", "7")


def _command(world, role: str, report_dir: Path) -> list[str]:
    return [
        str(Path(sys.executable).with_name("schemathesis")), "run", world.server.api + "schema/",
        "--checks", "all",
        "--max-examples", str(EXAMPLES),
        "--header", f"Authorization: Bearer {world.tokens[role]}",
        "--include-operation-id-regex", "^(" + "|".join(OPERATIONS[role]) + ")$",
        "--generation-allow-x00", "false",  # NUL is refused on purpose, tested in tests/api
        "--seed", SEED,
        # One worker per run: schemathesis's threads trip a CPython 3.11 ast.parse race
        # ("AST constructor recursion depth mismatch"); the three roles run side by side instead.
        "--workers", "1",
        "--request-timeout", "30",
        "--max-failures", "50",
        "--no-color",
        "--report", "junit", "--report-dir", str(report_dir / role),
    ]  # fmt: skip


def test_every_answer_matches_the_schema(world, tmp_path):
    targets = {
        "task_id": world.task_ids,
        "model_call_id": world.model_call_ids,
        "tool_call_id": world.tool_call_ids,
        "operation_id": world.operation_ids,
        "agent_name": ["bystander"],
        "profile_name": ["default", "tight"],
    }
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.conformance.hooks",
        "LOOPWARDEN_CONFORMANCE_TARGETS": json.dumps(targets),
        "PYTHONPATH": str(ROOT),
    }
    runs = {}
    for role in ROLES:
        log = open(tmp_path / f"{role}.log", "w+")  # noqa: SIM115  (closed below)
        runs[role] = (
            subprocess.Popen(
                _command(world, role, tmp_path), cwd=ROOT, env=env, stdout=log,
                stderr=subprocess.STDOUT, text=True,
            ),
            log,
        )  # fmt: skip
    deadline = time.monotonic() + TIME_BUDGET
    failed = []
    for role, (process, log) in runs.items():
        try:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            failed.append(f"{role}: killed after the {TIME_BUDGET} s budget")
        log.seek(0)
        report = log.read()
        log.close()
        print(f"===== schemathesis as {role} =====\n{report[-6000:]}")
        if process.returncode != 0:
            failed.append(f"{role}:\n{report[-20000:]}")
    if failed:
        # A 500's traceback is in the server's log, not in schemathesis's report.
        failed.append(f"server log (end):\n{world.server.log_tail(200)}")
        pytest.fail("schemathesis found failures\n" + "\n".join(failed), pytrace=False)
