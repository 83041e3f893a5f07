"""The audit log: who did what to which task, agent or profile, when and why."""

from __future__ import annotations

from urllib.parse import urlencode

from agents import roles
from console import access, queries
from console.access import console_view
from console.forms import AuditFilterForm
from console.paging import CappedPaginator

AUDIT_PAGE_SIZE = 50


@console_view(roles.VIEW_EVENT)
def audit_log(request):
    form = AuditFilterForm(request.GET or None, kinds=queries.event_kinds())
    filters = form.filters()
    events = CappedPaginator(queries.audit_events(**filters), AUDIT_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    context = {
        "form": form,
        "events": events,
        "query": urlencode({k: v for k, v in filters.items() if v}),
    }
    return access.page(request, "console/audit.html", "console/_audit_rows.html", context)
