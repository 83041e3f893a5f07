"""Reads behind the console pages. Nothing here changes state: that is agents/services."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, TypedDict, cast

from django.db import connection
from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils import timezone

from agents import selectors
from agents.guard import keys, terms
from agents.models import Agent, AgentDay, ApiToken, Event, EventKind, Task, ToolCall
from agents.selectors import audit_events  # noqa: F401  (the console's audit page reads it)
from console.words import CODE_WORDS, STATE_WORDS
from ledger import selectors as ledger_selectors
from ledger.models import Operation, Reconciliation
from ledger.selectors import operations_touched

if TYPE_CHECKING:
    # django-stubs' companion, a development dependency: only the type checker imports it.
    from django_stubs_ext import WithAnnotations

# Event kinds that change limits: the "who changed what" lists.
LIMIT_EVENTS = (
    EventKind.LIMITS_CHANGED,
    EventKind.PROFILE_CREATED,
    EventKind.PROFILE_CHANGED,
    EventKind.PROFILE_DELETED,
)


# -- dashboard -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateCount:
    state: str
    words: str
    count: int


def state_counts() -> list[StateCount]:
    found = selectors.task_counts_by_state()
    return [StateCount(s, STATE_WORDS[s], found.get(s, 0)) for s in terms.TASK_STATES]


def trips_today() -> list[tuple[str, str, int]]:
    """Breaker trips today (`selectors.breaker_trips`), by code, most first."""
    found = selectors.trips_on(timezone.now().date())
    return sorted(
        ((code, CODE_WORDS.get(code, code), n) for code, n in found.items()), key=lambda r: -r[2]
    )


def spend_today() -> tuple[Decimal, Decimal]:
    return selectors.spend_on(timezone.now().date())


def dashboard_tasks(
    *,
    state: str = "",
    agent: str = "",
    needs_human: bool = False,
    q: str = "",
    created_from: date | None = None,
    created_to: date | None = None,
) -> QuerySet:
    """The dashboard's task list, newest activity first, with its filters and search.

    `q` finds a task by its id, words of its goal or external_ref (any case), or an operation
    key one of its calls carries or whose ledger row it claimed (compared in NFC, as the ledger
    keeps keys). `created_from` and `created_to` are UTC days, both included.
    """
    # Newest activity first: the minute is indexed, `updated_at` orders within it (the same
    # order as `updated_at` alone; see agents.models.Task.active_minute).
    query = Task.objects.select_related("agent").order_by(
        "-active_minute", "-updated_at", "-created_at"
    )
    if state:
        query = query.filter(state=state)
    if agent:
        query = query.filter(agent__name=agent)
    if needs_human:
        # A task needs a human when the guard said so, or when a write it claimed is UNKNOWN.
        query = query.filter(
            Q(state=terms.NEEDS_HUMAN) | Q(operations__state=terms.UNKNOWN)
        ).distinct()
    if q.strip():
        query = query.filter(_search(q.strip()))
    if created_from:
        query = query.filter(created_at__gte=selectors.day_bounds(created_from)[0])
    if created_to:
        query = query.filter(created_at__lt=selectors.day_bounds(created_to)[1])
    return query.defer("window", "blocked", "signatures", "report")


def _search(text: str) -> Q:
    """What `text` may name: a task id, goal or external_ref words, or an operation key."""
    # A task whose goal or external_ref holds a secret is searched as an operator sees it,
    # masked (`Task.masked_search`): its raw text would answer guesses at the secret.
    found = Q(masked_search__isnull=True) & (
        Q(goal__icontains=text) | Q(external_ref__icontains=text)
    ) | Q(masked_search__icontains=text)
    with contextlib.suppress(ValueError):  # not an id: the other kinds may still match
        found |= Q(pk=uuid.UUID(text))
    try:
        key = keys.operation_key(text)
    except keys.InvalidOperationKey:
        return found  # the ledger refuses such a key: no call carries it
    # Through the ledger's rows of that key, then the calls that claimed or ran into them (by
    # the calls' operation index): the trace rows' own key column has no index to search.
    # Read first, as a list of ids (a key names a few rows): a subquery in the OR made every
    # other branch a filter over every task, where ids let each branch use its own index
    # (the goal's and external_ref's trigram indexes, migration 0022; a year of history:
    # docs/BENCHMARKS.md, growth).
    # By the unique (namespace, key) index, one probe per namespace: the key alone has no index
    # (one more entry on every claim), and read whole the ledger took 7 ms at 50,000 rows. A
    # row's namespace is its claiming agent's, and agents are never deleted once they have tasks.
    namespaces = Agent.objects.order_by().values("namespace").distinct()
    operations = Operation.objects.filter(namespace__in=namespaces, operation_key=key).order_by()
    claimed = dict(operations.values_list("pk", "task_id"))
    carried = ToolCall.objects.filter(operation__in=list(claimed)).order_by().values("task_id")
    ids = set(carried.values_list("task_id", flat=True)) | set(claimed.values())
    return found | Q(pk__in=ids) if ids else found


# -- task detail -----------------------------------------------------------------------------


def task_operations(task: Task) -> list[Operation]:
    return list(
        operations_touched(task)
        .select_related("task")
        .prefetch_related("reconciliations__actor_user")
        .order_by("claimed_at", "id")
    )


def task_history(task: Task, limit: int = 200) -> tuple[list[Event], int]:
    """The task's events, newest last; the most recent `limit` of them and the total."""
    query = task.events.select_related("actor_user", "operation")
    total = query.count()
    events = list(query.order_by("-created_at", "-id")[:limit])
    events.reverse()
    return events, total


def task_limit_changes(task: Task) -> list[Event]:
    return list(task.events.filter(kind=EventKind.LIMITS_CHANGED).order_by("-created_at")[:20])


# -- reconcile queue -------------------------------------------------------------------------


def reconcile_queue(**filters) -> list[Operation]:
    """Every operation waiting for a human verdict, oldest claim first, filtered as
    `ledger.selectors.reconcile_queue` filters (agent, namespace, claimed before).

    UNKNOWN ones, and IN_FLIGHT ones whose lease ran out (the lease sweep would make them
    UNKNOWN; the reconcile service accepts both).
    """
    return list(ledger_selectors.reconcile_queue(**filters))


def reconcile_filter_choices() -> tuple[list[str], list[str]]:
    """The reconcile queue's filter choices: every agent's name and every namespace."""
    agents = list(Agent.objects.order_by("name").values_list("name", "namespace"))
    return [name for name, _ in agents], sorted({ns for _, ns in agents})


def recent_reconciliations(limit: int = 10):
    return list(
        Reconciliation.objects.select_related("operation__task")
        .exclude(verdict=terms.UNKNOWN)
        .order_by("-created_at", "-id")[:limit]
    )


# -- agents ----------------------------------------------------------------------------------


class AgentTotals(TypedDict):
    """What agents_overview() adds to each agent: its running tasks, today's money, how many
    of its tokens still authenticate and when one was last used."""

    running: int
    spent_today: Decimal
    reserved_today: Decimal
    live_tokens: int
    token_last_used: datetime | None


def agents_overview() -> list[WithAnnotations[Agent, AgentTotals]]:
    today = timezone.now().date()
    # cast: the loop below sets the totals on every agent.
    agents = cast(
        "list[WithAnnotations[Agent, AgentTotals]]",
        list(
            Agent.objects.select_related("default_profile").prefetch_related(
                Prefetch("tokens", queryset=ApiToken.objects.order_by("revoked_at", "-created_at")),
                "allowed_profiles",
            )
        ),
    )
    # The running tasks only, through the state index: a count joined to every task of every
    # agent read the whole task table, which only grows, at each view of the page.
    running = dict(
        Task.objects.filter(state=terms.RUNNING)
        .order_by()
        .values_list("agent_id")
        .annotate(n=Count("*"))
    )
    days = {
        d.agent_id: d for d in AgentDay.objects.filter(day=today, agent__in=[a.pk for a in agents])
    }
    for agent in agents:
        agent.running = running.get(agent.pk, 0)
        day = days.get(agent.pk)
        agent.spent_today = day.spent if day else Decimal(0)
        agent.reserved_today = day.reserved if day else Decimal(0)
        # From the tokens prefetched above: no query per agent.
        tokens = list(agent.tokens.all())
        agent.live_tokens = sum(1 for t in tokens if t.revoked_at is None)
        used = [t.last_used_at for t in tokens if t.last_used_at is not None]
        agent.token_last_used = max(used, default=None)
    return agents


def agent_overview(name: str) -> Agent | None:
    return next((a for a in agents_overview() if a.name == name), None)


# -- audit -----------------------------------------------------------------------------------


def event_kinds() -> list[str]:
    """Every kind of event recorded, in order (the audit page's filter). A loose index scan:
    each kind is one probe of the kind index for the next one up, so the page reads as many
    index entries as there are kinds, not every event ever recorded (a DISTINCT would)."""
    quote = connection.ops.quote_name
    table, kind = quote(Event._meta.db_table), quote("kind")
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE kinds (kind) AS ("
            f"SELECT MIN({kind}) FROM {table} "
            f"UNION ALL SELECT (SELECT MIN({kind}) FROM {table} WHERE {kind} > kinds.kind) "
            f"FROM kinds WHERE kinds.kind IS NOT NULL) "
            f"SELECT kind FROM kinds WHERE kind IS NOT NULL"
        )
        return [row[0] for row in cursor.fetchall()]


def limit_changes(limit: int = 30) -> list[Event]:
    return list(
        Event.objects.filter(kind__in=LIMIT_EVENTS)
        .select_related("task", "actor_user")
        .order_by("-created_at", "-id")[:limit]
    )
