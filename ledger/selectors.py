"""Reads of the ledger that more than one place needs: one definition each."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.guard import types as g
from ledger.models import Operation


def operations_waiting_verdict(*, now: datetime | None = None) -> QuerySet[Operation]:
    """Operations waiting for a verdict: UNKNOWN, and IN_FLIGHT ones whose lease ran out.

    The lease sweep turns the second kind into UNKNOWN at its next run; the reconcile service
    accepts both, so both are waiting already.
    """
    now = now or timezone.now()
    return Operation.objects.filter(
        Q(state=g.UNKNOWN) | Q(state=g.IN_FLIGHT, lease_expires_at__lte=now)
    )
