"""Notifications: an operator hears once per task and phase that a task needs a human."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.utils import timezone

from agents.guard import terms
from agents.jobs import notify_needs_human
from agents.models import Notification
from agents.services import notify, runner, sweeps
from tests.celery.helpers import fake_endpoint


@pytest.fixture
def webhook(settings):
    with fake_endpoint() as endpoint:
        settings.NOTIFY_WEBHOOK_URL = endpoint.url
        settings.NOTIFY_EMAILS = ["oncall@example.com"]
        settings.SITE_URL = "https://lw.example.com"
        yield endpoint


@pytest.fixture
def needs_human(make_task, start_write, past_lease):
    task = make_task()
    start_write(task)
    sweeps.sweep_leases(now=past_lease)
    task.refresh_from_db()
    assert task.state == terms.NEEDS_HUMAN
    return task


def test_it_is_sent_once_by_webhook_and_email(needs_human, webhook, mailoutbox):
    row = notify.notification_send(task_id=needs_human.pk, phase=1)
    again = notify.notification_send(task_id=needs_human.pk, phase=1)

    assert row.sent_at is not None and row.channels == ["webhook", "email"]
    assert again is None
    assert len(webhook.requests) == 1
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == ["oncall@example.com"]
    assert "needs a human" in mailoutbox[0].subject
    assert f"https://lw.example.com/tasks/{needs_human.pk}/" in mailoutbox[0].body
    assert Notification.objects.get().attempts == 1


def test_the_webhook_says_what_happened_and_links_to_the_task(needs_human, webhook):
    notify.notification_send(task_id=needs_human.pk, phase=1)

    body = webhook.bodies()[0]
    assert body["event"] == "task.needs_human"
    assert body["task"] == str(needs_human.pk)
    assert body["url"] == f"https://lw.example.com/tasks/{needs_human.pk}/"
    assert (body["state"], body["reason"], body["code"]) == (
        terms.NEEDS_HUMAN, "unknown_commit", "GUARD_LEDGER",
    )  # fmt: skip
    assert body["operations"] == [{"key": "invoice-42", "tool": "send_invoice", "state": "UNKNOWN"}]
    assert body["agent"] == "agent-a" and body["phase"] == 1


def test_another_phase_is_announced_again(needs_human, webhook):
    notify.notification_send(task_id=needs_human.pk, phase=1)
    notify.notification_send(task_id=needs_human.pk, phase=2)

    assert len(webhook.requests) == 2
    assert Notification.objects.count() == 2


def test_a_failed_webhook_is_retried_without_mailing_twice(needs_human, webhook, mailoutbox):
    webhook.status = 500
    with pytest.raises(notify.DeliveryFailed, match="webhook"):
        notify.notification_send(task_id=needs_human.pk, phase=1)
    row = Notification.objects.get()
    assert row.channels == ["email"] and row.sent_at is None and row.claimed_until is None
    assert "500" in row.last_error

    webhook.status = 200
    row = notify.notification_send(task_id=needs_human.pk, phase=1)

    assert row.sent_at is not None and sorted(row.channels) == ["email", "webhook"]
    assert len(mailoutbox) == 1
    assert len(webhook.requests) == 2
    assert row.attempts == 2


def test_a_notification_another_worker_is_sending_is_left_to_it(needs_human, webhook):
    Notification.objects.create(
        task=needs_human, phase=1, kind="needs_human",
        claimed_until=timezone.now() + timedelta(seconds=60),
    )  # fmt: skip

    assert notify.notification_send(task_id=needs_human.pk, phase=1) is None
    assert webhook.requests == []


def test_a_claim_left_by_a_dead_worker_expires(needs_human, webhook):
    Notification.objects.create(
        task=needs_human, phase=1, kind="needs_human",
        claimed_until=timezone.now() - timedelta(seconds=1),
    )  # fmt: skip

    assert notify.notification_send(task_id=needs_human.pk, phase=1).sent_at is not None


def test_without_channels_it_is_recorded_as_sent_to_nobody(needs_human, settings):
    settings.NOTIFY_WEBHOOK_URL, settings.NOTIFY_EMAILS = "", []

    row = notify.notification_send(task_id=needs_human.pk, phase=1)

    assert row.sent_at is not None and row.channels == []


def test_retries_spent_mark_it_failed_and_log_it(needs_human, webhook, settings, json_logs):
    settings.NOTIFY_EMAILS = []
    webhook.status = 503
    with mock.patch.object(notify_needs_human, "max_retries", 2):
        notify_needs_human.apply(args=(str(needs_human.pk), 1))

    row = Notification.objects.get()
    assert row.failed_at is not None and row.sent_at is None
    assert row.attempts == 3  # the first try and two retries
    assert len(webhook.requests) == 3
    failed = json_logs("notification_failed")
    assert [line["task"] for line in failed] == [str(needs_human.pk)]
    # A failed notification is not sent again by a late duplicate of the job.
    assert notify.notification_send(task_id=needs_human.pk, phase=1) is None


def test_the_job_sends_through_the_service(needs_human, webhook):
    notify_needs_human.apply(args=(str(needs_human.pk), 1))

    assert Notification.objects.get().sent_at is not None
    assert len(webhook.requests) == 1


def test_a_deleted_task_is_nothing_to_send(webhook, db):
    assert notify.notification_send(task_id="6b0e7cf4-0000-4000-8000-000000000000", phase=1) is None


@pytest.mark.django_db(transaction=True)
def test_a_spend_cap_stop_is_announced_without_pausing_the_agent(make_task, agent_row, price):
    agent_row.daily_cost_cap = Decimal("0.1")
    agent_row.save()
    task = make_task()
    with mock.patch("agents.jobs.notify_needs_human.delay") as delay:
        _task, _call, outcome = runner.model_call_gate(
            task_id=task.pk, agent=agent_row, model="m", est_prompt_tokens=100,
            max_output_tokens=100,
        )  # fmt: skip

    assert (outcome.decision, outcome.reason) == (terms.STOP, "spend_cap")
    delay.assert_called_once_with(str(task.pk), 1, "spend_cap")
    agent_row.refresh_from_db()
    assert agent_row.paused is False


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_does_not_fail_the_stop(
    make_task, start_write, past_lease, json_logs
):
    task = make_task()
    start_write(task)
    with mock.patch("agents.jobs.notify_needs_human.delay", side_effect=OSError("no broker")):
        result = sweeps.sweep_leases(now=past_lease)

    assert result.stopped == [str(task.pk)]
    task.refresh_from_db()
    assert task.state == terms.NEEDS_HUMAN
    assert [line["task"] for line in json_logs("notify_enqueue_failed")] == [str(task.pk)]


def test_other_stops_are_not_announced(make_task):
    task = make_task()
    with mock.patch("django.db.transaction.on_commit") as on_commit:
        sweeps.sweep_deadlines(now=task.deadline_at + timedelta(seconds=1))

    on_commit.assert_not_called()
