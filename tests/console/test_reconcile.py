"""The reconcile queue: every UNKNOWN write, oldest first, with a verdict form each."""

from __future__ import annotations

import html

import pytest

from agents.guard import terms
from agents.models import Event
from agents.services import runner, tasks
from ledger.models import Operation, Reconciliation
from tests.console.conftest import HTMX, tool_step


def form(op, **fields) -> dict:
    return {f"op{op.pk}-{name}": value for name, value in fields.items()}


def test_it_lists_unknown_writes_with_task_tool_key_arguments_and_claim_time(
    as_operator, lost_write
):
    page = html.unescape(as_operator.get("/reconcile/").content.decode())
    op = lost_write.operation
    assert f'id="op-{op.pk}"' in page
    assert "pay-INV-42" in page and "pay_invoice" in page
    assert "Pay invoice INV-42 exactly once" in page
    assert f'href="/tasks/{lost_write.task.pk}/"' in page
    assert '"card_number": "•••"' in page and "4111111111111111" not in page
    assert op.claimed_at.strftime("%Y-%m-%d %H:%M:%S") in page
    for verdict in ("COMMITTED", "NOT_COMMITTED", "UNKNOWN"):
        assert f'value="{verdict}"' in page


def test_the_oldest_claim_comes_first(as_operator, lost_write, agent):
    task = tasks.task_create(agent=agent, goal="Second payment")
    tool_step(agent, task.pk, "pay_invoice", {"invoice": "INV-43"}, kind=terms.NO_RESULT,
              effect=terms.WRITE, operation_key="pay-INV-43")  # fmt: skip
    page = as_operator.get("/reconcile/").content.decode()
    assert page.index("pay-INV-42") < page.index("pay-INV-43")


def test_committed_with_a_result_is_recorded_and_shown_in_the_task_history(
    as_operator, lost_write, agent
):
    op = lost_write.operation
    response = as_operator.post(
        f"/reconcile/{op.pk}/",
        form(op, verdict="COMMITTED", result='{"payment_id": "PAY-9"}', note="seen in the PSP"),
    )
    assert response.status_code == 303
    assert response["Location"] == "/reconcile/"
    op.refresh_from_db()
    assert (op.state, op.result) == (terms.OP_COMMITTED, {"payment_id": "PAY-9"})
    decision = Reconciliation.objects.get(operation=op)
    assert (decision.actor, decision.note) == ("user:olivia", "seen in the PSP")
    history = as_operator.get(f"/tasks/{lost_write.task.pk}/").content.decode()
    assert '<span class="actor">olivia</span>' in history
    assert "<b>COMMITTED</b>" in history and "seen in the PSP" in history
    # the queue is empty now, and the agent asking again gets the committed result
    assert "Nothing to reconcile" in as_operator.get("/reconcile/").content.decode()
    operator_resume(as_operator, lost_write.task)
    _, _, outcome = runner.tool_call_request(
        task_id=lost_write.task.pk, agent=agent, tool="pay_invoice",
        args={"invoice": "INV-42", "card_number": "4111111111111111"}, effect=terms.WRITE,
        operation_key="pay-INV-42",
    )  # fmt: skip
    assert (outcome.decision, outcome.result) == (terms.REUSE, {"payment_id": "PAY-9"})


def operator_resume(client, task) -> None:
    assert client.post(f"/tasks/{task.pk}/resume/", {"reason": "paid"}).status_code == 303


def test_htmx_swaps_the_card_with_the_decision(as_operator, lost_write):
    op = lost_write.operation
    response = as_operator.post(
        f"/reconcile/{op.pk}/", form(op, verdict="NOT_COMMITTED", note="no charge"), **HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith(f'<article class="card op-card decided" id="op-{op.pk}"')
    assert "Recorded <b>NOT_COMMITTED</b> by olivia" in body
    op.refresh_from_db()
    assert op.state == terms.NOT_COMMITTED


def test_a_plain_text_result_is_kept_as_text_when_asked(as_operator, lost_write):
    op = lost_write.operation
    verdict = form(op, verdict="COMMITTED", result="PAY-9 in the PSP", result_is_text="on",
                   note="ok")  # fmt: skip
    assert as_operator.post(f"/reconcile/{op.pk}/", verdict).status_code == 303
    op.refresh_from_db()
    assert op.result == "PAY-9 in the PSP"


def test_text_that_parses_as_json_is_kept_as_text_when_asked(as_operator, lost_write):
    op = lost_write.operation
    verdict = form(op, verdict="COMMITTED", result='{"id": 1}', result_is_text="on", note="ok")
    assert as_operator.post(f"/reconcile/{op.pk}/", verdict).status_code == 303
    op.refresh_from_db()
    assert op.result == '{"id": 1}'


@pytest.mark.parametrize(
    "text", ['{"payment_id": "PAY-9"', "PAY-9 in the PSP", "{'payment_id': 'PAY-9'}"]
)
def test_a_result_that_is_not_valid_json_keeps_the_form_and_changes_nothing(
    as_operator, lost_write, text
):
    op = lost_write.operation
    events = Event.objects.count()

    response = as_operator.post(
        f"/reconcile/{op.pk}/", form(op, verdict="COMMITTED", result=text, note="seen in the PSP")
    )

    assert response.status_code == 422
    body = response.content.decode()
    assert f'id="id_op{op.pk}-result_error">The result is not valid JSON' in body
    assert html.escape(text) in body  # the form keeps what was typed, to fix it
    assert "seen in the PSP" in body
    op.refresh_from_db()
    assert (op.state, op.result) == (terms.UNKNOWN, None)
    assert Event.objects.count() == events
    assert not Reconciliation.objects.exists()


@pytest.mark.parametrize(
    "text", ["NaN", '{"amount": Infinity}', '{"amount": -Infinity}', '{"amount": 1e999}']
)
@pytest.mark.parametrize("headers", [{}, HTMX], ids=["post", "htmx"])
def test_a_result_with_a_number_json_cannot_hold_is_refused_next_to_the_field(
    as_operator, lost_write, text, headers
):
    """Python's JSON reader takes NaN, Infinity and 1e999 (an infinite float); no database's
    JSON holds them, and the API refuses them. The form says so, as for any bad JSON."""
    op = lost_write.operation
    events = Event.objects.count()

    response = as_operator.post(
        f"/reconcile/{op.pk}/",
        form(op, verdict="COMMITTED", result=text, note="seen in the PSP"),
        **headers,
    )

    assert response.status_code == 422
    body = response.content.decode()
    assert f'id="id_op{op.pk}-result_error">The result is not valid JSON' in body
    op.refresh_from_db()
    assert (op.state, op.result) == (terms.UNKNOWN, None)
    assert Event.objects.count() == events
    assert not Reconciliation.objects.exists()


def test_a_result_missing_a_brace_is_never_answered_to_the_agent_as_text(
    as_operator, lost_write, agent
):
    op = lost_write.operation
    as_operator.post(
        f"/reconcile/{op.pk}/",
        form(op, verdict="COMMITTED", result='{"payment_id": "PAY-9"', note="PSP"),
    )
    assert (
        as_operator.post(
            f"/reconcile/{op.pk}/",
            form(op, verdict="COMMITTED", result='{"payment_id": "PAY-9"}', note="PSP"),
        ).status_code
        == 303
    )
    operator_resume(as_operator, lost_write.task)
    _, _, outcome = runner.tool_call_request(
        task_id=lost_write.task.pk, agent=agent, tool="pay_invoice",
        args={"invoice": "INV-42", "card_number": "4111111111111111"}, effect=terms.WRITE,
        operation_key="pay-INV-42",
    )  # fmt: skip
    assert (outcome.decision, outcome.result) == (terms.REUSE, {"payment_id": "PAY-9"})


def test_still_unknown_keeps_it_in_the_queue_with_the_note(as_operator, lost_write):
    op = lost_write.operation
    response = as_operator.post(
        f"/reconcile/{op.pk}/", form(op, verdict="UNKNOWN", note="PSP is down, retry at 4"), **HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "PSP is down, retry at 4" in body
    assert "Record verdict" in body  # the form is still there
    op.refresh_from_db()
    assert op.state == terms.UNKNOWN
    assert "pay-INV-42" in as_operator.get("/reconcile/").content.decode()


def test_a_missing_note_shows_the_error_next_to_the_field_and_changes_nothing(
    as_operator, lost_write
):
    op = lost_write.operation
    events = Event.objects.count()
    response = as_operator.post(f"/reconcile/{op.pk}/", form(op, verdict="COMMITTED", note=""))
    assert response.status_code == 422
    body = response.content.decode()
    assert f'id="id_op{op.pk}-note_error">A note is required: say how you know.' in body
    op.refresh_from_db()
    assert op.state == terms.UNKNOWN
    assert Event.objects.count() == events
    assert not Reconciliation.objects.exists()


def test_a_result_with_a_verdict_other_than_committed_is_refused(as_operator, lost_write):
    op = lost_write.operation
    response = as_operator.post(
        f"/reconcile/{op.pk}/", form(op, verdict="NOT_COMMITTED", result='"x"', note="n"), **HTMX
    )
    assert response.status_code == 422
    assert "Only a COMMITTED verdict stores a result." in response.content.decode()
    op.refresh_from_db()
    assert op.state == terms.UNKNOWN


def test_a_bad_verdict_is_refused(as_operator, lost_write):
    op = lost_write.operation
    response = as_operator.post(f"/reconcile/{op.pk}/", form(op, verdict="MAYBE", note="n"))
    assert response.status_code == 422
    assert "Select a valid choice." in response.content.decode()


def test_an_operation_already_decided_is_refused_in_words(as_operator, lost_write, people):
    from ledger.services import operation_reconcile

    op = lost_write.operation
    operation_reconcile(operation_id=op.pk, verdict="COMMITTED", note="first",
                        actor="user:adam", user=people.admin)  # fmt: skip
    response = as_operator.post(f"/reconcile/{op.pk}/", form(op, verdict="NOT_COMMITTED", note="2"))
    assert response.status_code == 422
    assert "only UNKNOWN operations are reconciled" in response.content.decode()
    op.refresh_from_db()
    assert op.state == terms.OP_COMMITTED


def test_an_unknown_operation_is_404(as_operator, db):
    assert as_operator.post("/reconcile/999999/", {}).status_code == 404


def test_committed_operations_are_not_in_the_queue(as_operator, agent):
    task = tasks.task_create(agent=agent, goal="g")
    _, call, _ = runner.tool_call_request(task_id=task.pk, agent=agent, tool="w", args={},
                                          effect=terms.WRITE, operation_key="k1")  # fmt: skip
    assert Operation.objects.get().state == terms.IN_FLIGHT  # lease still live: not for a human
    assert "Nothing to reconcile" in as_operator.get("/reconcile/").content.decode()
