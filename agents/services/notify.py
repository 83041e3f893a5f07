"""Telling operators that a task needs them: a webhook and, where configured, email.

One `Notification` row per task, phase and kind makes each notification go out once. A worker
claims the row with a conditional update before sending (so two deliveries of the job never
send at the same time), sends outside any transaction (slow I/O holds no lock), and records
each channel as soon as it succeeded (so a retry sends only what failed).
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import F, Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from agents.models import Notification, Task
from agents.redaction import redact
from ledger.selectors import unresolved_operations

log = logging.getLogger("loopwarden.jobs")

# Longer than one delivery can take (webhook timeout + SMTP): a claim older than this belongs
# to a worker that died mid-send, and another may take over.
CLAIM_SECONDS = 120

SUBJECTS = {
    Notification.NEEDS_HUMAN: "Loopwarden: task needs a human ({reason})",
    Notification.SPEND_CAP: "Loopwarden: agent {agent} reached its daily spend cap",
}


class DeliveryFailed(Exception):
    """At least one channel failed; the job retries what is left."""


def task_url(task_id: uuid.UUID | str) -> str:
    """The console page of a task, absolute, for links in notifications."""
    try:
        path = reverse("task", kwargs={"task_id": task_id})
    except NoReverseMatch:  # the console is not installed
        path = f"/tasks/{task_id}/"
    return f"{settings.SITE_URL.rstrip('/')}{path}"


def notification_payload(task: Task, phase: int, kind: str) -> dict[str, Any]:
    """The webhook's JSON body (also the source of the email text). What the agent wrote (the
    goal, operation keys, the resume condition naming them) is masked by the redaction
    policy: operators read it."""
    open_operations = [
        {"key": redact(op.operation_key), "tool": op.tool, "state": op.state}
        for op in unresolved_operations(task)
    ]
    return {
        "event": f"task.{kind}",
        "task": str(task.pk),
        "url": task_url(task.pk),
        "agent": task.agent.name,
        "profile": task.profile.name if task.profile is not None else None,
        "goal": redact(task.goal),
        "phase": phase,
        "state": task.state,
        "reason": task.reason or None,
        "code": task.code,
        "operations": open_operations,
        "resume_condition": redact((task.report or {}).get("resume_condition")),
        "sent_at": timezone.now().isoformat(),
    }


def notification_send(
    *, task_id: uuid.UUID | str, phase: int, kind: str = Notification.NEEDS_HUMAN,
    now: datetime | None = None,
) -> Notification | None:  # fmt: skip
    """Deliver the notification for (task, phase, kind) unless it went out already.

    Claims the row with a conditional update (not sent, not failed, no live claim). Returns the
    row, or None when there is nothing to do (no such task, sent already, another worker is
    sending). Raises DeliveryFailed when a channel failed; the delivered ones are recorded.
    """
    now = now or timezone.now()
    task = Task.objects.select_related("agent", "profile").filter(pk=task_id).first()
    if task is None:
        return None
    Notification.objects.bulk_create(
        [Notification(task=task, phase=phase, kind=kind)], ignore_conflicts=True
    )
    row = Notification.objects.get(task=task, phase=phase, kind=kind)
    claimed = (
        Notification.objects.filter(pk=row.pk, sent_at=None, failed_at=None)
        .filter(Q(claimed_until=None) | Q(claimed_until__lte=now))
        .update(claimed_until=now + timedelta(seconds=CLAIM_SECONDS), attempts=F("attempts") + 1)
    )
    if claimed != 1:
        return None
    row.refresh_from_db()
    payload = notification_payload(task, phase, kind)
    errors: list[str] = []
    for channel, send in _configured_channels():
        if channel in row.channels:
            continue
        try:
            send(payload)
        except Exception as exc:  # any failure of the channel is retried, never raised raw
            errors.append(f"{channel}: {type(exc).__name__}: {exc}")
            continue
        row.channels = [*row.channels, channel]
        Notification.objects.filter(pk=row.pk).update(channels=row.channels)
    done = timezone.now()
    if errors:
        row.last_error = "; ".join(errors)[:2000]
        row.claimed_until = None
        Notification.objects.filter(pk=row.pk).update(last_error=row.last_error, claimed_until=None)
        raise DeliveryFailed(row.last_error)
    row.sent_at, row.claimed_until, row.last_error = done, None, ""
    Notification.objects.filter(pk=row.pk).update(sent_at=done, claimed_until=None, last_error="")
    log.info(
        json.dumps(
            {
                "event": "notification_sent",
                "task": str(task.pk),
                "phase": phase,
                "kind": kind,
                "channels": row.channels,
                "attempts": row.attempts,
            }
        )
    )
    return row


def notification_give_up(*, task_id: uuid.UUID | str, phase: int, kind: str, error: str) -> None:
    """Retries are exhausted: mark the row failed (nothing sends it again) and log it."""
    Notification.objects.filter(task_id=task_id, phase=phase, kind=kind, sent_at=None).update(
        failed_at=timezone.now(), claimed_until=None, last_error=error[:2000]
    )
    log.error(json.dumps({"event": "notification_failed", "task": str(task_id), "phase": phase,
                          "kind": kind, "error": error}))  # fmt: skip


def _configured_channels() -> list[tuple[str, Any]]:
    """Read at send time, so a changed setting applies to the next notification."""
    channels: list[tuple[str, Any]] = []
    if settings.NOTIFY_WEBHOOK_URL:
        channels.append(("webhook", _send_webhook))
    if settings.NOTIFY_EMAILS:
        channels.append(("email", _send_email))
    return channels


def _send_webhook(payload: dict[str, Any]) -> None:
    response = httpx.post(
        settings.NOTIFY_WEBHOOK_URL,
        json=payload,
        timeout=settings.NOTIFY_TIMEOUT_SECONDS,
        headers={"User-Agent": "loopwarden-notify/1"},
    )
    response.raise_for_status()


def _send_email(payload: dict[str, Any]) -> None:
    kind = payload["event"].removeprefix("task.")
    subject = SUBJECTS.get(kind, "Loopwarden: {reason}").format(
        reason=payload["reason"] or kind, agent=payload["agent"]
    )
    lines = [
        f"Task: {payload['goal']}",
        f"Agent: {payload['agent']}   Phase: {payload['phase']}",
        f"State: {payload['state']} ({payload['reason']}, {payload['code']})",
    ]
    if payload["operations"]:
        lines.append("Operations to reconcile: " + ", ".join(
            f"{op['key']} ({op['state']})" for op in payload["operations"]))  # fmt: skip
    if payload["resume_condition"]:
        lines.append(f"To resume: {payload['resume_condition']}")
    lines += ["", f"Open the task: {payload['url']}"]
    send_mail(subject, "\n".join(lines), settings.DEFAULT_FROM_EMAIL, list(settings.NOTIFY_EMAILS))
