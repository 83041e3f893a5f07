"""What `manage.py bench` needs of the server it starts: a baseline and a statement count.

The baseline endpoint is the cheapest authenticated write the API can do: one bearer-token
authentication and one single-row UPDATE in one transaction, through the same middleware and
DRF stack as every guard decision. The bench compares the decisions with it, so the figures say
what the guard itself costs beyond "an authenticated write to the database".

Routed (devtools/urls.py) only when the devtools app is installed: never in production.
"""

from __future__ import annotations

from django.core.exceptions import MiddlewareNotUsed
from django.db import connection, transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import ApiToken
from loopwarden.env import env_bool


class Baseline(APIView):
    @extend_schema(exclude=True)
    def post(self, request):
        # The caller's own token row: always there, touched by nobody else in the bench, so
        # this measures a write and its commit rather than lock waits.
        with transaction.atomic():
            ApiToken.objects.filter(pk=request.auth.pk).update(last_used_at=timezone.now())
        return Response({"ok": True})


class StatementCountMiddleware:
    """Under `manage.py bench` only (LOOPWARDEN_BENCH=true): every answer says in a header how
    many SQL statements its request issued, so the bench prints counted figures per decision
    kind rather than estimates. Anywhere else it removes itself at start."""

    header = "X-Loopwarden-Statements"

    def __init__(self, get_response):
        if not env_bool("LOOPWARDEN_BENCH", False):
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request):
        count = 0

        def counted(execute, sql, params, many, context):
            nonlocal count
            # Transaction control is not counted: SQLite's driver sends BEGIN as a statement,
            # PostgreSQL's does not, and the figures should compare.
            if not sql.lstrip().upper().startswith(("BEGIN", "SAVEPOINT", "RELEASE")):
                count += 1
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counted):
            response = self.get_response(request)
        response[self.header] = str(count)
        return response
