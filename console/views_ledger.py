"""The reconcile queue: writes whose outcome nobody knows, and a verdict form for each."""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from agents import roles
from agents.errors import DomainError
from agents.redaction import redact
from agents.selectors import Redactor
from agents.services.operator import actor_name
from console import access, queries
from console.access import INVALID, console_view
from console.forms import ReconcileFilterForm, ReconcileForm
from console.timeline import args_text
from ledger import services as ledger_services
from ledger.models import Operation


def _card(operation: Operation, form: ReconcileForm | None = None, **extra) -> dict:
    return {
        "op": operation,
        "args": args_text(operation.args, Redactor().policy(operation.tool)),
        "form": form or ReconcileForm(prefix=f"op{operation.pk}"),
        **extra,
    }


def _filter_form(request) -> ReconcileFilterForm:
    agents, namespaces = queries.reconcile_filter_choices()
    return ReconcileFilterForm(request.GET or None, agents=agents, namespaces=namespaces)


@console_view(roles.VIEW_OPERATION)
def reconcile_queue(request):
    """The queue, filtered by agent, namespace and age (a GET form; htmx swaps only the list)."""
    form = _filter_form(request)
    context = {
        "form": form,
        "query": urlencode(form.query_values()),
        "cards": [_card(op) for op in queries.reconcile_queue(**form.filters(timezone.now()))],
        "recent": queries.recent_reconciliations(),
        "can_reconcile": request.user.has_perm(roles.RECONCILE),
    }
    return access.page(request, "console/reconcile.html", "console/_reconcile_list.html", context)


@console_view(roles.RECONCILE, methods=("POST",))
def operation_reconcile(request, operation_id):
    operation = get_object_or_404(Operation.objects.select_related("task__agent"), pk=operation_id)
    form = ReconcileForm(request.POST, prefix=f"op{operation.pk}")
    if form.is_valid():
        try:
            operation = ledger_services.operation_reconcile(
                operation_id=operation.pk,
                verdict=form.cleaned_data["verdict"],
                note=form.cleaned_data["note"],
                result=form.result_value(),
                actor=actor_name(request.user),
                user=request.user,
            )
        except DomainError as error:
            access.field_errors(form, error)
        else:
            operation = Operation.objects.select_related("task__agent").get(pk=operation.pk)
            verdict = form.cleaned_data["verdict"]
            return access.done(
                request,
                f"{redact(operation.operation_key)}: recorded {verdict}.",
                partial="console/_operation_card.html",
                context={
                    **_card(operation),
                    "can_reconcile": True,
                    "decided": operation.reconciliations.order_by("-created_at", "-id").first(),
                },
                then=reverse("reconcile"),
            )
    context = {**_card(operation, form, open=True), "can_reconcile": True}
    if request.htmx:
        return render(request, "console/_operation_card.html", context, status=INVALID)
    full = {
        "form": _filter_form(request),
        "cards": [
            context if op.pk == operation.pk else _card(op) for op in queries.reconcile_queue()
        ],
        "recent": queries.recent_reconciliations(),
        "can_reconcile": True,
    }
    if not any(card["op"].pk == operation.pk for card in full["cards"]):
        full["cards"].insert(0, context)  # no longer in the queue (someone else decided)
    return render(request, "console/reconcile.html", full, status=INVALID)
