"""`manage.py profile_decisions`: each step it names is a function of the code, it counts each
request's steps as they happen, and it leaves the code as it found it (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.api import views
from agents.services import runner
from devtools.management.commands.profile_decisions import (
    STEPS,
    Ledger,
    step_targets,
    wrapped,
)

# Slow (counted server processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("label", "module", "attribute"), STEPS)
def test_every_step_names_a_function_of_the_code(label, module, attribute):
    assert step_targets(module, attribute), f"{label}: {module}.{attribute} names nothing"


def test_the_code_is_put_back_as_it_was():
    valid, gate, dispatch = views._valid, runner.model_call_gate, views.APIView.dispatch
    with wrapped(Ledger()):
        assert views._valid is not valid
        assert runner.model_call_gate is not gate
    assert (views._valid, runner.model_call_gate, views.APIView.dispatch) == (valid, gate, dispatch)
    assert "dispatch" not in vars(views.ModelCallGate)  # inherited stays inherited


def test_a_run_counts_each_requests_steps(devtools, tmp_path):
    out = StringIO()
    url = f"sqlite:///{tmp_path / 'profile.sqlite3'}"
    call_command("profile_decisions", database_url=url, rounds=4, stdout=out)
    text = out.getvalue()

    rows = {line[:38].strip(): line[38:].split() for line in text.splitlines()}
    # Columns: decisions, baseline, floor; each "ms (calls per request)".
    handler = rows["Django: middleware, URL routing"]
    assert handler[1::2] == ["(1.0)", "(1.0)", "(1.0)"]  # one WSGI call per request
    # A decision locks its task, checking its token in that read (one read); the baseline
    # reads the token's row; the floor's lock checks the token too, in its own SQL (none).
    assert rows["reads of a fixed shape (token, lock)"][1::2] == ["(1.0)", "(1.0)"]
    assert rows["body: parsing and validation"][1::2] == ["(1.0)"]
    assert rows["commit"][1::2] == ["(1.0)", "(1.0)", "(1.0)"]
    # The steps are the server's time split, none counted twice: together no more than it.
    steps, server = rows["all steps"], rows["the server (around the WSGI call)"]
    assert all(float(a) <= float(b) for a, b in zip(steps, server, strict=True))
    assert "the server's CPU per decision:" in text
    assert "16 decisions" in text  # 4 rounds of 4 requests, on the task opened while warming up


def test_counting_instructions_needs_valgrind(devtools, tmp_path, monkeypatch):
    from devtools.management.commands import profile_decisions

    monkeypatch.setattr(profile_decisions.shutil, "which", lambda _name: None)
    url = f"sqlite:///{tmp_path / 'profile.sqlite3'}"
    with pytest.raises(CommandError, match="valgrind"):
        call_command("profile_decisions", database_url=url, rounds=1, instructions=True)


@pytest.mark.parametrize(("workload", "requests"), [("decisions", 8), ("floor", 8)])
def test_the_counted_process_sends_one_workload(devtools, tmp_path, workload, requests):
    """What `--instructions` runs under valgrind, run here without it: one workload after the
    warm-up, and the count of its requests, which the per-request figure divides by."""
    from devtools.management.commands.profile_decisions import Command

    command = Command()
    url = f"sqlite:///{tmp_path / 'profile.sqlite3'}"
    env = command.child_env({"database_url": url})
    done = subprocess.run(
        [sys.executable, "manage.py", "profile_decisions", "--in-process", "--only", workload,
         "--rounds", "2", "--database-url", url],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == f"requests: {requests}"


def test_on_postgresql_it_prints_the_databases_side(devtools, on_postgres):
    """The backend's CPU, the WAL and the statements' time per request, per workload: read,
    not asserted as timings; a decision writes several rows where the baseline updates one, so
    it writes more WAL records per request."""
    from django.db import connection

    settings = connection.settings_dict
    url = (f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:"
           f"{settings['PORT'] or 5432}/lw_profile_decisions_test")  # fmt: skip
    out = StringIO()
    # Enough requests for each workload to span several of /proc's clock ticks (10 ms).
    call_command("profile_decisions", database_url=url, rounds=25, stdout=out)
    text = out.getvalue()
    assert "PostgreSQL's side, per request" in text
    rows = {line[:38].strip(): line[38:].split() for line in text.splitlines()}
    cpu_ms = rows["backend CPU, ms"]
    assert len(cpu_ms) == 3 and all(float(ms) > 0 for ms in cpu_ms)  # the server is local here
    records = [float(n) for n in rows["WAL records"]]
    assert records[0] > records[1] > 0
    assert all(float(n) > 0 for n in rows["WAL bytes"])
    executed = rows["statements' execution, ms"]
    loaded = executed != ["-", "-", "-"]
    assert loaded or "pg_stat_statements is not loaded" in text
    if loaded:
        assert all(float(ms) > 0 for ms in executed)
