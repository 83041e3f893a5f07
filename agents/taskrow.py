"""The task row under its lock: take the lock, read the row as the guard core's `TaskState`,
write the core's answer back, release a pending execution.

Below the services (it imports only the models and the guard core), so both `agents.services`
and `ledger.services` build on it.

Lock order, everywhere a transaction takes more than one row lock:

    1. the task row (`lock_task`; `lock_task_and_call` and `lock_task_and_model_call` lock a
       call of the task with it, task first: PostgreSQL locks a statement's rows in the order
       of its `FOR ... OF` list),
    2. then the ledger's operation row (`ledger.services.operation_lock`, a
       `select_for_update` of the operation, or an UPDATE of it: a claim or a settle),
    3. then the agent's day row (`agents.db.day_money.move_day_money`, or
       `move_day_money_later`, whose upsert goes in the decision's closing statement with the
       trace row and the task row's update: `agents.db.prepared.writes_together`; every row that
       statement writes besides the day row is already locked, so the day row is still last).

Never an operation before its task: an event or trace row that references the task waits for
the task row lock on PostgreSQL, so holding an operation meanwhile deadlocks with a tool
request that holds the task and waits for the operation. A service that starts from an
operation (reconcile, the lease sweep) reads the operation's task id without a lock, locks
that task, then locks the operation and checks it again.
"""

from __future__ import annotations

import copy
import marshal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connections, models
from django.db.models import F, Field, OuterRef, Q, Subquery
from django.utils.functional import cached_property

from agents.db.prepared import Prepared, save_columns
from agents.errors import NotFound
from agents.guard import core, terms
from agents.models import (
    Agent,
    ApiToken,
    CatalogVersion,
    ModelCall,
    RequestAnswer,
    Task,
    ToolCall,
)

SNAPSHOT_FIELDS = (
    "model_calls", "tool_requests", "tool_executions", "retries", "polls", "tokens_used",
    "tokens_reserved", "cost_spent", "cost_reserved", "revision", "stagnant", "milestones",
    "phase", "deadline_at",
)  # fmt: skip


@dataclass(eq=False)
class AgentClaim:
    """An agent's bearer token that nothing has looked up yet, as the decision endpoints hand
    it to their service (`agents.api.auth.TokenCheckedByLock`): the task lock checks it in
    its own statement, on the task's agent (`ApiToken.live`, the rule the token lookup uses),
    so a decision reads no token row before its lock.

    The lock that finds the row resolves the claim: `agent` is then the token's agent (the row
    the lock read), `token_id` and `token_used_at` its token's. A lock that finds no row says
    nothing of the token, only TASK_NOT_FOUND, which the endpoint answers after checking the
    token the usual way (a bad token answers 401 first, as anywhere else).
    """

    key_hash: str
    agent: Agent | None = None
    token_id: int | None = None
    token_used_at: datetime | None = None

    def settle(self, agent: Agent, token_id: int, token_used_at: datetime | None) -> None:
        """A lock found the row of this claim's token: the claim is that agent from now on."""
        self.agent, self.token_id, self.token_used_at = agent, token_id, token_used_at
        _vouch(self.key_hash)


Owner = Agent | AgentClaim

# Agent tokens a lock (or `vouched`'s lookup) of this process found live lately, by hash: what
# a decision does before its lock beyond reading its body (the semantic provider's model run)
# is done only for one of them, so a caller without a live token cannot make the server do
# it. A token revoked meanwhile is refused by the lock as ever; until VOUCHED_SECONDS have
# passed, its requests may still run the model before that refusal.
VOUCHED_SECONDS = 60
VOUCHED_MAX = 10_000
_vouched: OrderedDict[str, float] = OrderedDict()
_vouched_lock = threading.Lock()


def _vouch(key_hash: str) -> None:
    with _vouched_lock:
        _vouched[key_hash] = time.monotonic()
        _vouched.move_to_end(key_hash)
        while len(_vouched) > VOUCHED_MAX:
            _vouched.popitem(last=False)


def vouched(owner: Owner) -> bool:
    """Whether `owner` is an agent, or a claim whose token was found live lately; else looked
    up (one statement, the rule the lock applies) and remembered when live."""
    if isinstance(owner, Agent) or owner.agent is not None:
        return True
    with _vouched_lock:
        seen = _vouched.get(owner.key_hash)
    if seen is not None and time.monotonic() - seen < VOUCHED_SECONDS:
        return True
    if not ApiToken.objects.filter(ApiToken.live(owner.key_hash), agent__isnull=False).exists():
        return False
    _vouch(owner.key_hash)
    return True


def forget_vouched() -> None:
    """Forget the tokens vouched for (a test's process that has not seen them)."""
    with _vouched_lock:
        _vouched.clear()


def owned_by(owner: Owner, path: str = "agent") -> Q:
    """The rows whose agent (reached by `path`) is `owner`: the agent itself, or the agent of
    the claim's live token."""
    return _owner_q(path, **_owner_values(owner)[1])


def _owner_q(path: str, *, agent: Any = None, key_hash: Any = None) -> Q:
    """`owned_by` for the owner's value (an agent's id, or a token's hash), a marker too."""
    if key_hash is not None:
        return ApiToken.live(key_hash, f"{path}__tokens__")
    return Q(**{path: agent})


def catalog_version_subquery() -> Subquery:
    """The catalog's version (`agents.services.catalog`), for an annotation on the lock."""
    return Subquery(CatalogVersion.objects.filter(pk=1).values("number")[:1])


def _lock_query(probes: dict[str, Any] | None = None) -> Any:
    return (
        Task.objects.select_for_update(no_key=True, of=("self",))
        .select_related("agent")
        .annotate(catalog_version=catalog_version_subquery(), **(probes or {}))
    )


def _as_get(query: Any) -> Any:
    """The shape `QuerySet.get` gives a query (no ordering; a limit where locks allow one)."""
    return query.order_by()[:21] if _get_limited(query) else query.order_by()


def _get_limited(query: Any) -> bool:
    return connections[query.db].features.supports_select_for_update_with_limit


_MARK_TASK = uuid.UUID("00000000-0000-4000-8000-00000000b0c1")
_MARK_AGENT = 8_765_432_109_876
_MARK_CALL = 8_765_432_109_877
_MARK_KEY = "prepared:marker:claim-key-hash"
_TASK_PK = Task._meta.pk
_AGENT_PK = Agent._meta.pk

# Each lock of an agent's task comes in two shapes: by the agent's id (`False`), and by an
# unchecked token's hash (`True`, an `AgentClaim`), whose live token the statement joins on the
# task's agent and reads its id and last use with the row.
_OWNER_SLOTS: dict[bool, dict[str, tuple[Field, Any]]] = {
    False: {"agent": (_AGENT_PK, _MARK_AGENT)},
    True: {"key_hash": (ApiToken._meta.get_field("key_hash"), _MARK_KEY)},
}


def _owned(query: Any, path: str, owner: dict[str, Any]) -> Any:
    """`query`'s rows whose agent (at `path`) is the owner in `owner`, one of `_OWNER_SLOTS`;
    by a token, with the token's id and last use."""
    query = query.filter(_owner_q(path, **owner))
    if "key_hash" not in owner:
        return query
    tokens = f"{path}__tokens__"
    return query.annotate(
        claim_token_id=F(f"{tokens}id"), claim_token_used_at=F(f"{tokens}last_used_at")
    )


def _owner_values(owner: Owner) -> tuple[bool, dict[str, Any]]:
    if isinstance(owner, AgentClaim):
        return True, {"key_hash": owner.key_hash}
    return False, {"agent": owner.pk}


def _settle_claim(owner: Owner, agent: Agent, row: Any) -> None:
    """The lock found the row of a claim's token: the claim is the token's agent from now on."""
    if isinstance(owner, AgentClaim):
        owner.settle(agent, row.claim_token_id, row.claim_token_used_at)


# The lock of an agent's task, the lock without an agent (operators, sweeps) and the lock of
# a task with one of its calls: fixed shapes, compiled once per connection (agents.db.prepared).
_LOCK_OWN = {
    by_token: Prepared(
        lambda task, **owner: _as_get(_owned(_lock_query(), "agent", owner).filter(pk=task)),
        {"task": (_TASK_PK, _MARK_TASK), **_OWNER_SLOTS[by_token]},
    )
    for by_token in (False, True)
}
_LOCK_ANY = Prepared(
    lambda task: _as_get(_lock_query().filter(pk=task)), {"task": (_TASK_PK, _MARK_TASK)}
)


# The answer kept for a request's `request_id` (`RequestAnswer`), read by the lock's statement
# when the request carries one: the id of its row, None when there is none.
_ANSWER_SLOTS: dict[str, tuple[Field, Any]] = {
    "request_id": (RequestAnswer._meta.get_field("request_id"), "prepared:marker:request-id"),
}


def _answer_reads(task: str, request_id: Any) -> dict[str, Any]:
    """`answer_kept`: the id of the answer kept for the request id in the task (`task`: the
    path to the task's id in the locked row), or None."""
    rows = RequestAnswer.objects.filter(task=OuterRef(task), request_id=request_id)
    return {"answer_kept": Subquery(rows.values("pk")[:1])}


def answer_values(request_id: str) -> dict[str, str]:
    """The values of the answer reads' slots (`ANSWER_PROBE`, `lock_task_and_call`)."""
    return {"request_id": request_id}


def _lock_with_call(
    model: type[ToolCall] | type[ModelCall], by_token: bool, answer: bool = False
) -> Prepared:
    """The lock of a task with one of its calls (`model`'s rows), task first; `answer`: with
    the reads of a request id's kept answer."""

    def build(call: Any, task: Any, **values: Any) -> Any:
        reads = _answer_reads("task_id", values.pop("request_id")) if answer else {}
        return _as_get(
            _owned(
                model.objects.select_for_update(no_key=True, of=("task", "self"))
                .select_related("task", "task__agent")
                .annotate(catalog_version=catalog_version_subquery(), **reads),
                "task__agent",
                values,
            ).filter(pk=call, task_id=task)
        )

    return Prepared(
        build,
        {
            "call": (model._meta.pk, _MARK_CALL),
            "task": (_TASK_PK, _MARK_TASK),
            **_OWNER_SLOTS[by_token],
            **(_ANSWER_SLOTS if answer else {}),
        },
    )


_LOCK_WITH_CALL = {by_token: _lock_with_call(ToolCall, by_token) for by_token in (False, True)}
_LOCK_WITH_MODEL_CALL = {
    by_token: _lock_with_call(ModelCall, by_token) for by_token in (False, True)
}
# The same, for a request with a request id.
_ANSWERED_LOCK_WITH_CALL = {
    by_token: _lock_with_call(ToolCall, by_token, answer=True) for by_token in (False, True)
}
_ANSWERED_LOCK_WITH_MODEL_CALL = {
    by_token: _lock_with_call(ModelCall, by_token, answer=True) for by_token in (False, True)
}


@dataclass(frozen=True, eq=False)
class LockProbe:
    """Reads of a fixed shape for the lock's statement (`lock_task(probe=...)`): `build(**values)`
    returns the annotations, `slots` names each value and its field as `Prepared` does. The
    lock with them is compiled once per connection, like the lock without."""

    build: Callable[..., dict[str, Any]]
    slots: dict[str, tuple[Field, Any]]

    def __add__(self, other: LockProbe) -> LockProbe:
        """Both probes' reads in one lock statement (their slot names must differ)."""
        if set(self.slots) & set(other.slots):
            raise ValueError("probes with the same slot names cannot be combined")
        return LockProbe(
            build=lambda **values: {
                **self.build(**{name: values[name] for name in self.slots}),
                **other.build(**{name: values[name] for name in other.slots}),
            },
            slots={**self.slots, **other.slots},
        )

    @cached_property
    def lock(self) -> dict[bool, Prepared]:
        """The lock with these reads, by agent id (False) and by a claim's token (True)."""
        return {by_token: self._lock(by_token) for by_token in (False, True)}

    def _lock(self, by_token: bool) -> Prepared:
        owner_names = set(_OWNER_SLOTS[by_token])

        def build(task: Any, **values: Any) -> Any:
            owner = {name: values.pop(name) for name in owner_names}
            return _as_get(
                _owned(_lock_query(self.build(**values)), "agent", owner).filter(pk=task)
            )

        return Prepared(build, {"task": (_TASK_PK, _MARK_TASK), **_OWNER_SLOTS[by_token],
                                **self.slots})  # fmt: skip


ANSWER_PROBE = LockProbe(
    build=lambda request_id: _answer_reads("pk", request_id), slots=_ANSWER_SLOTS
)


def lock_task(
    task_id: uuid.UUID | str,
    *,
    agent: Owner | None = None,
    probe: tuple[LockProbe, dict[str, Any]] | None = None,
) -> Task:
    """Take the task row lock (SELECT ... FOR NO KEY UPDATE) for the rest of the transaction.

    Every decision on a task runs under this lock, so gates, results, stops and resumes of one
    task are serialized whichever web worker handles them. NO KEY: the lock still excludes
    every other locker, but lets other transactions insert rows that reference the task
    (events, trace rows) without waiting for it. An agent only sees its own tasks: another
    agent's task is answered like a missing one.

    One statement: the same SELECT reads the agent's flags (paused, daily cap; the agent row
    is joined, not locked: `of=("self",)`) and the catalog's version (see `catalog_of`). The
    flags are as of the statement's start, like any read that races an operator's pause: a
    request that starts after the pause committed sees it. `probe`, a `LockProbe` and its
    values, adds more such reads of a fixed shape (as of the statement's start too), e.g.
    `ledger.services.OPERATION_PROBE`.

    `agent` may be an `AgentClaim`: the statement then checks its token too (a task of the
    token's agent, the token live) and resolves the claim; no row is TASK_NOT_FOUND.
    """
    try:
        if probe is not None:
            if agent is None:
                raise TypeError("a lock with a probe reads an agent's own task")
            by_token, owner = _owner_values(agent)
            lock_probe, values = probe
            rows = lock_probe.lock[by_token].rows(task=task_id, **owner, **values)
        elif agent is not None:
            by_token, owner = _owner_values(agent)
            rows = _LOCK_OWN[by_token].rows(task=task_id, **owner)
        else:
            rows = _LOCK_ANY.rows(task=task_id)
        if not rows:
            raise Task.DoesNotExist
        (task,) = rows
    except (Task.DoesNotExist, ValueError, ValidationError):  # not a UUID: 404
        raise NotFound("No such task.", code="TASK_NOT_FOUND") from None
    if agent is not None:
        _settle_claim(agent, task.agent, task)
    _remember_locked(task)
    return task


def lock_task_and_call(
    task_id: uuid.UUID | str, tool_call_id: int, *, agent: Owner, request_id: str = ""
) -> tuple[Task, ToolCall]:
    """`lock_task`, and the tool call `tool_call_id` of that task locked with it: one statement
    (`OF task, call`, in that order, so the task row is locked first, as everywhere).

    The call row is locked, not only joined: a row only joined is read as of the statement's
    start, so a duplicate result report that waited for the task lock would read the call as
    it was before the first report committed. A locked row is read again once its lock is
    granted. Everything that writes a call row holds its task's lock, so this lock never waits
    on its own. A call that is not in the task: NotFound, TASK_NOT_FOUND first.

    With a `request_id`, the statement also reads the answer kept for it, as `ANSWER_PROBE`
    does for `lock_task` (the task's `answer_kept`).
    """
    locks = _ANSWERED_LOCK_WITH_CALL if request_id else _LOCK_WITH_CALL
    return _lock_task_and(
        locks, tool_call_id, task_id, agent, "tool call", "TOOL_CALL_NOT_FOUND",
        request_id,
    )  # fmt: skip


def lock_task_and_model_call(
    task_id: uuid.UUID | str, model_call_id: int, *, agent: Owner, request_id: str = ""
) -> tuple[Task, ModelCall]:
    """`lock_task`, and the model call `model_call_id` of that task locked with it, as
    `lock_task_and_call` does for a tool call (a duplicate usage report that waited for the
    task lock reads the call as the first report left it)."""
    locks = _ANSWERED_LOCK_WITH_MODEL_CALL if request_id else _LOCK_WITH_MODEL_CALL
    return _lock_task_and(
        locks, model_call_id, task_id, agent, "model call",
        "MODEL_CALL_NOT_FOUND", request_id,
    )  # fmt: skip


def _lock_task_and(
    lock: dict[bool, Prepared],
    call_id: int,
    task_id: uuid.UUID | str,
    agent: Owner,
    what: str,
    code: str,
    request_id: str,
) -> tuple[Task, Any]:
    by_token, owner = _owner_values(agent)
    answer = answer_values(request_id) if request_id else {}
    try:
        rows = lock[by_token].rows(call=call_id, task=task_id, **owner, **answer)
    except (ValueError, ValidationError):
        rows = []
    if not rows:
        lock_task(task_id, agent=agent)  # TASK_NOT_FOUND when the task is not the agent's
        raise NotFound(f"No such {what} in this task.", code=code)
    (call,) = rows
    task = call.task
    task.catalog_version = call.catalog_version
    if answer:
        task.answer_kept = call.answer_kept
    _settle_claim(agent, task.agent, call)
    _remember_locked(task)
    return task, call


def _remember_locked(task: Task) -> None:
    """What the row held when locked, so saving it writes only the columns that changed."""
    task._as_locked = _snapshot(vars(task), _SAVED_FIELDS)  # type: ignore[attr-defined]


def _snapshot(values: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The row's `values` of the columns `names`, JSON ones copied (`_copied`)."""
    return {name: _copied(values[name]) if name in _JSON_FIELDS else values[name] for name in names}


def _copied(value: Any) -> Any:
    """A JSON column's value copied (marshal's round trip) so that a change made in place
    cannot reach the copy. The other columns hold immutable values and are not copied."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:  # not JSON's types (set by code, not read from the row)
        return copy.deepcopy(value)


_SAVED_FIELDS = tuple(
    f.attname
    for f in Task._meta.concrete_fields
    if not f.primary_key and not f.generated and f.name != "updated_at"
)
_JSON_FIELDS = frozenset(
    f.attname for f in Task._meta.concrete_fields if isinstance(f, models.JSONField)
)


def save_task(task: Task) -> None:
    """Write the columns a decision changed (all of them for a row `lock_task` did not load):
    an UPDATE of the whole row would rewrite the goal text and the window on every call."""
    locked = getattr(task, "_as_locked", None)
    if locked is None:
        task.save()
        return
    values = vars(task)
    changed = [name for name in _SAVED_FIELDS if values[name] != locked[name]]
    if changed:
        save_columns(task, [*changed, "updated_at"])
        locked.update(_snapshot(values, changed))


def to_state(task: Task, *, seen_hashes: list[str] | None = None) -> terms.TaskState:
    """The core's view of the row. `seen_hashes` are the few seen data hashes a decision needs
    (they live in their own table; see `runner.tool_call_result`)."""
    return terms.TaskState(
        state=task.state,
        reason=task.reason or None,
        limits=terms.Limits.from_dict(task.limits),
        window=[terms.WindowEntry.from_dict(e) for e in task.window],
        blocked=list(task.blocked),
        pending=list(task.pending),
        awaited=list(task.awaited),
        signatures=list(task.signatures),
        plans=list(task.plans),
        reflection=task.reflection,
        seen_hashes=list(seen_hashes or []),
        report=task.report,
        **{name: getattr(task, name) for name in SNAPSHOT_FIELDS},
    )


def apply_state(task: Task, state: terms.TaskState) -> None:
    """Copy the core's result onto the row (the caller saves it)."""
    task.state = state.state
    task.reason = state.reason or ""
    task.limits = state.limits.to_dict()
    task.window = [e.to_dict() for e in state.window]
    task.blocked = state.blocked
    task.pending = state.pending
    task.awaited = state.awaited
    task.signatures = state.signatures
    task.plans = state.plans
    task.reflection = state.reflection
    task.report = state.report
    for name in SNAPSHOT_FIELDS:
        setattr(task, name, getattr(state, name))


def release_execution(
    task: Task, state: terms.TaskState, call: ToolCall | None, now: datetime
) -> bool:
    """The claim of an EXECUTE'd `call` expired or was reconciled: it leaves the pending set.

    Once per call: the call row is marked released with a conditional update, so a sweep, a
    reconcile and a racing request releasing the same call remove one pending entry between
    them, and a late result (`ToolCallView.in_flight` false) removes none. Called under the
    lock of the call's `task`, whose `state` the caller writes back. True when released now.
    """
    if call is None or call.decision != terms.EXECUTE or call.task_id != task.pk:
        return False
    claimed = ToolCall.objects.filter(
        pk=call.pk, task_id=task.pk, reported_at=None, released_at=None
    ).update(released_at=now)
    if claimed != 1:
        return False
    call.released_at = now
    core.release_pending(state, call.fingerprint)
    return True
