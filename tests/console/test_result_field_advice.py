"""The report page's advice on volatile result keys (issue 13): computed from real trace rows,
applied with one click by an admin, audited, and felt by the very next decision."""

from __future__ import annotations

import pytest

from agents.guard import terms
from agents.models import Event, LimitProfile, ToolPolicy
from agents.result_advice import result_field_proposals
from agents.services import runner, tasks
from tests.conftest import allow_profiles
from tests.console.conftest import HTMX

pytestmark = pytest.mark.django_db


def answer(step: int) -> dict:
    # `replica` is a stamp the built-in volatile keys do not know.
    return {"rows": [{"id": 7, "total": 120}], "replica": f"db-{step}", "fetched_at": step}


@pytest.fixture
def novelty_task(agent):
    LimitProfile.objects.update_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    allow_profiles(agent.name, "novelty")
    return tasks.task_create(agent=agent, goal="Total of invoice 7", profile="novelty").pk


def read(agent, task_id, step: int, data: dict | None = None) -> tuple[str, str | None]:
    """Ask for the same read and, when it runs, report `data` (default: a stamped answer)."""
    _, call, asked = runner.tool_call_request(
        task_id=task_id, agent=agent, tool="search", args={"q": "invoice 7"}, effect=terms.READ
    )
    if asked.decision != terms.EXECUTE:
        return asked.decision, None
    result = terms.ToolResult(kind=terms.SUCCESS, data=answer(step) if data is None else data)
    _, _, answered = runner.tool_call_result(
        task_id=task_id, agent=agent, tool_call_id=call.pk, result=result
    )
    return asked.decision, answered.decision


def test_the_advice_proposes_the_key_that_alone_keeps_changing(agent, novelty_task):
    for step in range(4):
        assert read(agent, novelty_task, step) == ("EXECUTE", "CONTINUE")

    proposals = result_field_proposals(days=7)

    assert [(p.tool, p.keys, p.pairs, p.tasks) for p in proposals] == [
        ("search", ["replica"], 3, 1)
    ]


def test_results_that_change_in_every_key_propose_nothing(agent, novelty_task):
    for step in range(4):
        read(agent, novelty_task, step, data={"rows": [step], "n": step})

    assert result_field_proposals(days=7) == []


def test_one_click_applies_the_proposal_with_an_audit_row_and_repeats_stop_being_new(
    agent, novelty_task, as_admin
):
    for step in range(3):
        assert read(agent, novelty_task, step) == ("EXECUTE", "CONTINUE")
    page = as_admin.get("/reports/daily/?days=7").content.decode()
    assert 'data-tool="search"' in page and "<code>replica</code>" in page

    response = as_admin.post(
        "/reports/result-fields/apply/", {"tool": "search", "keys": ["replica"], "days": 7}, **HTMX
    )

    assert response.status_code == 200 and "lw:toast" in response["HX-Trigger"]
    assert 'data-tool="search"' not in response.content.decode()  # applied: no longer proposed
    assert ToolPolicy.objects.get(tool="search").ignore_result_fields == ["replica"]
    event = Event.objects.get(kind="tool_policy_changed")
    assert event.actor == "user:adam"
    assert event.detail == {"tool": "search", "field": "ignore_result_fields", "before": [],
                            "after": ["replica"]}  # fmt: skip
    # The next task's same read stops being new data at its second answer: nudged, not run.
    task_id = tasks.task_create(agent=agent, goal="Total of invoice 7", profile="novelty").pk
    assert read(agent, task_id, 10) == ("EXECUTE", "CONTINUE")
    assert read(agent, task_id, 11) == ("EXECUTE", "CONTINUE")
    assert read(agent, task_id, 12) == ("BLOCK", None)
    # In the task already running, hashes seen before were taken with the key: the first
    # answer without it is new once, then repeats are repeats.
    assert read(agent, novelty_task, 3) == ("EXECUTE", "CONTINUE")
    assert read(agent, novelty_task, 4) == ("EXECUTE", "CONTINUE")
    assert read(agent, novelty_task, 5) == ("BLOCK", None)


def test_without_the_click_the_same_reads_keep_executing(agent, novelty_task):
    for step in range(6):
        assert read(agent, novelty_task, step) == ("EXECUTE", "CONTINUE")


def test_only_admins_may_apply(as_operator, db):
    response = as_operator.post("/reports/result-fields/apply/", {"tool": "s", "keys": ["k"]})
    assert response.status_code == 403
    assert not ToolPolicy.objects.exists()


def test_a_plain_post_redirects_back_to_the_report(as_admin, db):
    response = as_admin.post(
        "/reports/result-fields/apply/", {"tool": "search", "keys": ["replica"], "days": 14}
    )
    assert response.status_code == 303 and response["Location"] == "/reports/daily/?days=14"
    assert Event.objects.filter(kind="tool_policy_changed").count() == 1


@pytest.mark.parametrize(
    "tool, keys",
    [("\x00", ["replica"]), ("search", ["replica", "a\x00b"]), ("t" * 201, ["replica"])],
    ids=["nul-in-tool", "nul-in-key", "tool-too-long"],
)
@pytest.mark.parametrize("headers", [{}, HTMX], ids=["post", "htmx"])
def test_a_tool_or_key_the_database_cannot_hold_is_refused_and_changes_nothing(
    as_admin, db, tool, keys, headers
):
    """The form posts back what the advice showed; a post that was not made by it gets the
    service's refusal (422, the reason in words), never a 500 from the database."""
    response = as_admin.post(
        "/reports/result-fields/apply/", {"tool": tool, "keys": keys, "days": 14}, **headers
    )
    assert response.status_code == 422
    assert b"tool" in response.content or b"field" in response.content
    assert not ToolPolicy.objects.exists()
    assert not Event.objects.filter(kind="tool_policy_changed").exists()


@pytest.mark.parametrize("days", ["²", "¹⁴", "x", "", "99999999999999999999999999", "-14"])
def test_a_days_value_that_is_no_number_of_days_falls_back_to_the_default(as_admin, db, days):
    """`days` only says which report to go back to: anything but one of the report's choices
    is the default, never a 500 ("²" passes str.isdigit but int() refuses it)."""
    response = as_admin.post(
        "/reports/result-fields/apply/", {"tool": "search", "keys": ["replica"], "days": days}
    )
    assert response.status_code == 303
    assert response["Location"] == "/reports/daily/?days=30"
    assert ToolPolicy.objects.get(tool="search").ignore_result_fields == ["replica"]
