"""What `manage.py bench` needs of the server it starts: a baseline, a floor and a statement
count.

The baseline endpoint is the cheapest authenticated write the API can do: one bearer-token
authentication and one single-row UPDATE in one transaction, through the same middleware and
DRF stack as every guard decision. The bench compares the decisions with it, so the figures say
what the guard itself costs beyond "an authenticated write to the database". The floor
(`Floor`) is the database work of a gate without its code: between the two, the figures say how
much of that cost the guarantees take and how much the guard's code does.

Routed (devtools/urls.py) only when the devtools app is installed: never in production (the
floor only in the bench's own server).
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.core.exceptions import MiddlewareNotUsed
from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api.auth import TokenCheckedByLock, claim_of
from agents.db.day_money import day_upsert
from agents.db.prepared import hot_cursor
from agents.errors import BadInput, NotFound
from agents.models import Agent, ApiToken, ModelCall, Task
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
            # (Only the head is upper-cased: the cost of the count does not grow with the SQL.)
            if not sql.lstrip()[:9].upper().startswith(("BEGIN", "SAVEPOINT", "RELEASE")):
                count += 1
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counted):
            response = self.get_response(request)
        response[self.header] = str(count)
        return response


class Floor(TokenCheckedByLock, APIView):
    """The database work every gate must do and nothing else: the bench's second reference,
    beside the baseline. The guard's guarantees need it (the task row lock, the trace row,
    the task's counters, the agent's day reservation); what a decision costs beyond it is the
    guard's own code (validation, the rules, the ORM's rows, the log line and metrics).

    One request, shaped as a gate on the same connection settings: the lock of the caller's
    task with the agent's flags, checking the caller's token as a gate's lock does (one SELECT
    ... FOR NO KEY UPDATE; the same authentication, `TokenCheckedByLock`), one statement of
    writes (a model call row, the task's counters, the day row's reservation; three
    statements on SQLite, as the guard's are there), the COMMIT. It
    decides nothing: a task the caller owns is always allowed, whatever its state or limits,
    which is why only the bench's own server routes it (devtools/urls.py). Body: `{"task":
    "<the task's id>"}`.
    """

    @extend_schema(exclude=True)
    def post(self, request):
        task_id = request.data.get("task") if isinstance(request.data, dict) else None
        try:
            task_id = uuid.UUID(str(task_id)) if isinstance(task_id, str) else None
        except ValueError:
            task_id = None
        if task_id is None:
            raise BadInput('Send {"task": "<a task id>"}.', code="INVALID_FIELDS")
        claim = claim_of(request)
        if claim is None:  # (only the decisions' authentication gives one)
            raise NotFound("No such task.", code="TASK_NOT_FOUND")
        now = timezone.now()
        estimate = Decimal("0.0007")
        # Each value as its field sends it (SQLite keeps ids and decimals as text).
        task_key = _db(Task, "id", task_id)
        with transaction.atomic(), hot_cursor() as cursor:
            cursor.execute(_FLOOR_LOCK, [task_key, claim.key_hash])
            row = cursor.fetchone()
            if row is None:
                raise NotFound("No such task.", code="TASK_NOT_FOUND")
            seq, calls, agent_id = row[0] + 1, row[1] + 1, row[4]
            claim.settle(Agent(id=agent_id), row[5], _aware(row[6]))
            stamp = _db(Task, "updated_at", now)
            call = [seq, calls, MODEL, _db(ModelCall, "reserved_cost", estimate), stamp, task_key]
            task = [seq, calls, stamp, task_key]
            # The day's reservation is the guard's own upsert (agents.services.common).
            day_sql, day = day_upsert(agent_id, now.date(), estimate, Decimal(0))
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"WITH c AS ({_FLOOR_CALL} RETURNING id), t AS ({_FLOOR_TASK}), "
                    f"d AS ({day_sql}) SELECT id FROM c",
                    [*call, *task, *day],
                )
                (call_id,) = cursor.fetchone()
            else:
                cursor.execute(_FLOOR_CALL, call)
                call_id = cursor.lastrowid
                cursor.execute(_FLOOR_TASK, task)
                cursor.execute(day_sql, day)
        return Response({"decision": "ALLOW", "model_call": call_id, "round": calls})


def _aware(value: Any) -> Any:
    """A timestamp read by a raw cursor as Django reads it (SQLite's driver gives text)."""
    convert = getattr(connection.ops, "convert_datetimefield_value", None)
    return value if value is None or convert is None else convert(value, None, connection)


def _db(model: type[Model], field: str, value: Any) -> Any:
    return model._meta.get_field(field).get_db_prep_save(value, connection)


MODEL = "bench-model"
_TASK = Task._meta.db_table
_AGENT = Agent._meta.db_table
_FLOOR_LOCK = (
    "SELECT t.trace_seq, t.model_calls, a.paused, a.daily_cost_cap, a.id, k.id, k.last_used_at "
    f"FROM {_TASK} t JOIN {_AGENT} a ON a.id = t.agent_id "
    f"JOIN {ApiToken._meta.db_table} k ON k.agent_id = a.id "
    "WHERE t.id = %s AND k.key_hash = %s AND k.revoked_at IS NULL"
    + (" FOR NO KEY UPDATE OF t" if connection.vendor == "postgresql" else "")
)
_FLOOR_CALL = (
    f"INSERT INTO {ModelCall._meta.db_table} (seq, phase, round, model, decision, reason, "
    "est_prompt_tokens, max_output_tokens, reserved_cost, reserved_tokens, signature, "
    "created_at, expired, task_id) VALUES (%s, 1, %s, %s, 'ALLOW', '', 800, 200, %s, 1000, '', "
    "%s, false, %s)"
)
_FLOOR_TASK = f"UPDATE {_TASK} SET trace_seq = %s, model_calls = %s, updated_at = %s WHERE id = %s"
