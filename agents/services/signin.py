"""Sign-in lockouts: the audit rows when django-axes locks a username or an address out, and
the admin's unlock.

axes counts the failed sign-ins (its AccessAttempt rows) and refuses a locked-out sign-in; these
put what happens to the lock in the audit log beside every other operator action.
"""

from __future__ import annotations

from axes.models import AccessAttempt
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.db import transaction

from agents.errors import BadInput
from agents.models import Event, EventKind
from agents.selectors import SIGNIN_TARGETS, signin_failures
from agents.services.operator import actor_name

LOCKED_OUT = EventKind.SIGNIN_LOCKED_OUT
UNLOCKED = EventKind.SIGNIN_UNLOCKED
REASON_MAX = 2000


def record_lockout(sender, *, request, username: str | None, ip_address: str | None, **kwargs):
    """Receiver of axes' `user_locked_out`: one audit row per username or address just locked.

    axes sends the signal on every failure at or past the limit, also while the lock holds.
    Each failure adds one to its username's count and one to its address's, so a target whose
    count is exactly the limit is one this failure has just locked; past the limit it was
    already locked and logged.
    """
    limit = settings.AXES_FAILURE_LIMIT
    cooloff = settings.AXES_COOLOFF_TIME
    minutes = int(cooloff.total_seconds() // 60) if cooloff else None
    for by, value in (("username", username), ("address", ip_address)):
        if not value or signin_failures(by=by, value=value) != limit:
            continue
        Event.objects.create(
            kind=LOCKED_OUT, actor="system:sign-in", reason=f"{limit} failed sign-ins",
            detail={"by": by, "value": value, "failures": limit, "minutes": minutes,
                    "username": username or "", "address": ip_address or ""},
        )  # fmt: skip


def signin_unlock(*, user, by: str, value: str, reason: str = "") -> int:
    """Lift the sign-in lockout of one username or one address: axes forgets its failures.

    Deletes axes' failure rows of that username (from every address) or of that address (for
    every username) and writes the audit row in the same transaction. Idempotent: with nothing
    to forget it changes nothing and logs nothing. Returns the failures forgotten.
    """
    fields = dict(SIGNIN_TARGETS)
    if by not in fields:
        raise BadInput("Unlock a username or an address.", fields={"by": "Either one."})
    value = (value or "").strip()
    if not value:
        raise BadInput("Say which one to unlock.", fields={"value": "Required."})
    if by == "address":
        try:
            validate_ipv46_address(value)
        except ValidationError:
            raise BadInput(
                "Not an IP address.", fields={"value": "An IPv4 or IPv6 address."}
            ) from None
    if len(reason) > REASON_MAX:
        raise BadInput(
            "The reason is too long.", fields={"reason": f"At most {REASON_MAX} characters."}
        )
    with transaction.atomic():
        # Locks the rows, so a failure racing the unlock is either forgotten with them or
        # counted after; the audit row states what was forgotten.
        attempts = AccessAttempt.objects.select_for_update().filter(**{fields[by]: value})
        failures = sum(attempts.values_list("failures_since_start", flat=True))
        count, _ = attempts.delete()
        if not count:
            return 0
        Event.objects.create(
            kind=UNLOCKED, actor=actor_name(user), actor_user=user, reason=reason,
            detail={"by": by, "value": value, "failures": failures},
        )  # fmt: skip
    return failures
