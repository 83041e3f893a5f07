"""Reconcilers: a team's endpoint answers whether an UNKNOWN operation committed."""

from __future__ import annotations

from unittest import mock

import pytest

from agents.guard import terms
from agents.models import Event
from agents.services import sweeps
from ledger import reconcilers
from ledger.jobs import check_operation, reconcile_unknown_operations
from ledger.models import Operation, Reconciliation
from ledger.services import operation_reconcile
from tests.celery.helpers import fake_endpoint


@pytest.fixture
def unknown(make_task, start_write, past_lease):
    operation = start_write(make_task())
    sweeps.sweep_leases(now=past_lease)
    operation.refresh_from_db()
    assert operation.state == terms.UNKNOWN
    return operation


@pytest.fixture
def quick(settings):
    settings.RECONCILE_TIMEOUT_SECONDS = 1
    settings.RECONCILE_MAX_CHECKS = 3


def test_committed_is_applied_as_an_automatic_reconciliation(unknown, reconciler_policy, quick):
    with fake_endpoint(answer={"state": "committed", "result": {"id": "inv_1"}}) as endpoint:
        reconciler_policy(endpoint.url)
        outcome = reconcilers.operation_check(operation_id=unknown.pk, attempt=0)

    assert outcome.verdict == terms.OP_COMMITTED
    unknown.refresh_from_db()
    assert (unknown.state, unknown.result) == (terms.OP_COMMITTED, {"id": "inv_1"})
    row = Reconciliation.objects.get(operation=unknown)
    assert (row.verdict, row.previous_state, row.automatic) == (
        terms.OP_COMMITTED,
        terms.UNKNOWN,
        True,
    )
    assert row.actor == "reconciler:send_invoice"
    assert row.evidence["answer"]["state"] == "committed"
    assert endpoint.bodies() == [{
        "operation_key": "invoice-42", "namespace": "ns-a", "tool": "send_invoice",
        "args": {"invoice": "invoice-42"},
    }]  # fmt: skip


def test_not_committed_lets_the_key_run_again(unknown, reconciler_policy, quick):
    with fake_endpoint(answer={"state": "NOT_COMMITTED"}) as endpoint:
        reconciler_policy(endpoint.url)
        reconcilers.operation_check(operation_id=unknown.pk, attempt=0)

    unknown.refresh_from_db()
    assert unknown.state == terms.NOT_COMMITTED
    assert Reconciliation.objects.get().verdict == terms.NOT_COMMITTED


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"answer": {"state": "unknown"}}, "answered"),
        ({"answer": {"nope": 1}}, "answered"),
        ({"answer": ["committed"]}, "answered"),
        ({"status": 500}, "HTTPStatusError"),
        ({"delay": 2}, "Timeout"),
    ],
)
def test_anything_but_a_definite_answer_is_no_answer(
    unknown, reconciler_policy, quick, options, why
):
    with fake_endpoint(**options) as endpoint:
        reconciler_policy(endpoint.url)
        with pytest.raises(reconcilers.NoAnswer, match=why):
            reconcilers.operation_check(operation_id=unknown.pk, attempt=0)

    unknown.refresh_from_db()
    assert (unknown.state, unknown.reconcile_checks) == (terms.UNKNOWN, 1)
    assert not Reconciliation.objects.exists()


def test_the_checks_are_bounded_then_a_human_decides(unknown, reconciler_policy, quick):
    with fake_endpoint(delay=2) as endpoint:
        reconciler_policy(endpoint.url)
        with mock.patch.object(check_operation, "max_retries", 2):
            check_operation.apply(args=(unknown.pk,))

    unknown.refresh_from_db()
    assert (unknown.state, unknown.reconcile_checks) == (terms.UNKNOWN, 3)
    assert len(endpoint.requests) == 3
    gave_up = Event.objects.get(kind="reconcile_no_answer")
    assert gave_up.operation_id == unknown.pk and "Timeout" in gave_up.reason
    # The bound holds whatever the job's retry count says.
    assert reconcilers.operation_check(operation_id=unknown.pk, attempt=3).detail == "not claimed"


def test_a_check_queued_twice_asks_once(unknown, reconciler_policy, quick):
    with fake_endpoint(answer={"state": "unknown"}) as endpoint:
        reconciler_policy(endpoint.url)
        with pytest.raises(reconcilers.NoAnswer):
            reconcilers.operation_check(operation_id=unknown.pk, attempt=0)
        duplicate = reconcilers.operation_check(operation_id=unknown.pk, attempt=0)

    assert duplicate.detail == "not claimed"
    assert len(endpoint.requests) == 1


def test_a_human_verdict_first_leaves_nothing_to_check(unknown, reconciler_policy, quick):
    operation_reconcile(
        operation_id=unknown.pk, verdict=terms.NOT_COMMITTED, note="checked the CRM",
        actor="user:olivia",
    )  # fmt: skip
    with fake_endpoint(answer={"state": "committed"}) as endpoint:
        reconciler_policy(endpoint.url)
        outcome = reconcilers.operation_check(operation_id=unknown.pk, attempt=0)

    assert outcome.verdict is None and endpoint.requests == []
    assert Reconciliation.objects.get().actor == "user:olivia"


def test_only_unknown_operations_of_tools_with_a_reconciler_are_queued(
    make_task, start_write, past_lease, reconciler_policy
):
    task = make_task()
    mine = start_write(task, key="a")
    other_tool = start_write(task, key="b", tool="post_message")
    checked = start_write(task, key="c")
    in_flight = start_write(make_task(goal="Later"), key="d")
    sweeps.sweep_leases(now=past_lease)
    Operation.objects.filter(pk=in_flight.pk).update(state=terms.IN_FLIGHT)
    Operation.objects.filter(pk=checked.pk).update(reconcile_checks=1)
    reconciler_policy("http://127.0.0.1:9/")
    reconciler_policy("", tool="post_message")

    assert reconcilers.operations_to_check() == [mine.pk]
    with mock.patch.object(check_operation, "delay") as delay:
        assert reconcile_unknown_operations.apply().get() == 1
    delay.assert_called_once_with(mine.pk)
    assert other_tool.pk not in reconcilers.operations_to_check()
