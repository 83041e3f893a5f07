"""The operation ledger: one row per business action of a write tool, shared by a namespace."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents.db.domains import Count, OperationState
from agents.guard import terms

VERDICT_CHOICES = [
    (terms.OP_COMMITTED, terms.OP_COMMITTED),
    (terms.NOT_COMMITTED, terms.NOT_COMMITTED),
    (terms.UNKNOWN, terms.UNKNOWN),
]


class Operation(models.Model):
    namespace = models.CharField(max_length=100)
    operation_key = models.CharField(max_length=300)
    tool = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64)
    args = models.JSONField(default=dict)
    state = OperationState()
    task = models.ForeignKey(
        "agents.Task", on_delete=models.PROTECT, related_name="operations"
    )  # the task whose call claimed it last
    # The claiming call, the one whose result may settle the claim: the call `claim_seq` of
    # `task`. Named by its place in the task's trace rather than by its id, so a claim is
    # written in the statement that claims (the call row, inserted after it, is not yet there).
    claim_seq = Count(null=True, blank=True)
    tool_call = models.ForeignObject(
        "agents.ToolCall",
        on_delete=models.DO_NOTHING,
        from_fields=["task", "claim_seq"],
        to_fields=["task", "seq"],
        null=True,
        related_name="+",
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    claimed_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    attempts = Count(default=1)
    reconcile_checks = Count(default=0)

    class Meta:
        ordering = ["claimed_at"]
        permissions = [("reconcile_operation", "Can reconcile an operation")]
        indexes = [models.Index(fields=["state", "lease_expires_at"], name="op_state_lease")]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "operation_key"], name="operation_key_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.operation_key} ({self.state})"


class Reconciliation(models.Model):
    """A verdict on an UNKNOWN operation, by an operator or a reconciler. Append-only."""

    operation = models.ForeignKey(
        Operation, on_delete=models.PROTECT, related_name="reconciliations"
    )
    verdict = models.CharField(max_length=14, choices=VERDICT_CHOICES)
    previous_state = models.CharField(max_length=14)
    note = models.TextField()
    result = models.JSONField(null=True, blank=True)
    evidence = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=150)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    automatic = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
