"""The demo's simulated agent (`manage.py simulate`) against a live server.

What an operator sees of the demo must read true: each payment run is a distinct payment, a
task an operator resumed is driven on (not left RUNNING forever), and the agent's token is
never on a command line that `ps` shows.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import Task
from devtools.management.commands.simulate import LostWrite
from tests.live import ROOT

pytestmark = pytest.mark.usefixtures("devtools")


def simulate(api_url: str, *args: str) -> str:
    out = StringIO()
    call_command("simulate", "--url", api_url, "--pause", "0", "--wait", "5", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def token_file(tmp_path, agent_token, monkeypatch):
    path = tmp_path / "demo-agent.token"
    path.write_text(agent_token + "\n")
    path.chmod(0o600)
    monkeypatch.setenv("LOOPWARDEN_TOKEN_FILE", str(path))
    monkeypatch.delenv("LOOPWARDEN_TOKEN", raising=False)
    return path


def test_each_payment_run_reads_as_a_distinct_payment():
    runs = [LostWrite(run_id) for run_id in ("0a1b2c3d", "9f8e7d6c", "5e5e5e5e")]

    assert len({run.goal for run in runs}) == 3
    assert len({run.invoice for run in runs}) == 3
    assert len({run.amount for run in runs}) == 3
    assert len({run.operation_key for run in runs}) == 3
    for run in runs:
        assert run.invoice in run.goal and run.amount in run.goal
        assert run.invoice in run.operation_key
    # the same run id names the same payment (a resumed run pays what it set out to pay)
    assert LostWrite("0a1b2c3d").goal == runs[0].goal


def test_the_token_comes_from_the_token_file_named_in_the_environment(api_url, token_file):
    output = simulate(api_url, "--scenario", "pagination", "--rounds", "1")

    assert "COMPLETED" in output and "as expected" in output


def test_the_token_may_come_from_the_environment_itself(api_url, agent_token, monkeypatch):
    monkeypatch.delenv("LOOPWARDEN_TOKEN_FILE", raising=False)
    monkeypatch.setenv("LOOPWARDEN_TOKEN", agent_token)

    output = simulate(api_url, "--scenario", "pagination", "--rounds", "1")

    assert "COMPLETED" in output


def test_without_a_token_it_says_how_to_give_one(api_url, monkeypatch, db):
    monkeypatch.delenv("LOOPWARDEN_TOKEN_FILE", raising=False)
    monkeypatch.delenv("LOOPWARDEN_TOKEN", raising=False)

    with pytest.raises(CommandError, match="LOOPWARDEN_TOKEN_FILE"):
        simulate(api_url, "--scenario", "pagination", "--rounds", "1")


def test_dev_run_starts_the_simulated_agent_without_its_token_in_argv():
    script = (ROOT / "dev").read_text()
    procfile = (ROOT / "Procfile").read_text()
    simulate_line = procfile[procfile.index("manage.py simulate") :].split("\n", 1)[0]

    assert "--token" not in simulate_line
    assert "token" not in simulate_line.lower().replace("loopwarden_token_file", "")
    assert "LOOPWARDEN_TOKEN_FILE=" in script


@pytest.mark.parametrize(
    ("verdict", "result"),
    [("COMMITTED", {"payment_id": "PAY-1"}), ("NOT_COMMITTED", None)],
)
def test_a_resumed_payment_is_driven_to_completion(
    api_url, token_file, lw_operator, verdict, result
):
    first = simulate(api_url, "--scenario", "lost_write", "--rounds", "1")
    assert "NEEDS_HUMAN" in first
    task = Task.objects.get()
    (operation,) = lw_operator.list_operations(state="UNKNOWN")
    lw_operator.reconcile(
        operation["id"], verdict=verdict, note="checked at the provider", result=result
    )
    lw_operator.resume(str(task.pk), reason="payment checked")
    task.refresh_from_db()
    assert (task.state, task.phase) == ("RUNNING", 2)

    second = simulate(api_url, "--scenario", "pagination", "--rounds", "1")

    task.refresh_from_db()
    assert (task.state, task.reason) == ("COMPLETED", "goal_met"), second
    assert "resumed" in second
    operation = lw_operator.get_operation(operation["id"])
    assert operation["state"] == "COMMITTED"


@pytest.mark.parametrize("scenario", ["pagination", "repeated_search", "ab_cycle", "lost_write",
                                      "token_spender"])  # fmt: skip
def test_every_scenario_ends_as_the_demo_says_it_will(api_url, token_file, scenario):
    # The demo's summary marks a run that ended otherwise UNEXPECTED: an operator watching
    # the console must see each scenario's own stop (the token spender's budget, not a finish).
    out = simulate(api_url, "--scenario", scenario, "--rounds", "1")

    assert "done: 1 scenario runs, 0 ended unexpectedly" in out, out
