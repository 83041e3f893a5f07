"""The hot path's prepared queries (agents.db.prepared) send exactly the SQL Django compiles for
the same queryset with the same values, and read the same instances back."""

from __future__ import annotations

import itertools
import uuid

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from agents.api import auth
from agents.guard import terms
from agents.models import ApiToken, ToolCall, hash_token
from agents.services import runner
from agents.services.tasks import task_create
from agents.taskrow import _LOCK_ANY, _LOCK_OWN, _as_get, _lock_query, _owned


def django_sql(queryset):
    return queryset.query.get_compiler(using="default").as_sql()


def test_the_token_lookup_is_the_querysets_first(agent):
    raw = agent[0].token
    key = hash_token(raw)
    with transaction.atomic():
        ours = auth._TOKEN.compiled_sql(key_hash=key)
        first = ApiToken.objects.select_related("agent", "user").filter(
            key_hash=key, revoked_at__isnull=True
        )
        # What .first() evaluates: ordered by the model's ordering or else the pk, one row.
        expected = (first if first.ordered else first.order_by("pk"))[:1]
        assert ours == (django_sql(expected)[0], list(django_sql(expected)[1]))
    (token,) = auth._TOKEN.rows(key_hash=key)
    assert token == first.first()
    assert token.agent == agent[1] and token.agent.name == agent[1].name
    assert auth._TOKEN.rows(key_hash=hash_token("nobody's")) == []


def owners(agent):
    """Each way a lock names the task's agent: its id, or a claim's token hash (with the
    queryset that `agents.taskrow._owned` builds for it)."""
    key = hash_token(agent[0].token)
    return [
        (False, {"agent": agent[1].pk}, lambda query, path: query.filter(**{path: agent[1]})),
        (True, {"key_hash": key}, lambda query, path: _owned(query, path, {"key_hash": key})),
    ]


def test_the_task_locks_are_the_querysets_get(agent, agent_row, make_task):
    task = make_task()
    token = ApiToken.objects.get(agent=agent_row)
    with transaction.atomic():
        for prepared, values, queryset in (
            *((_LOCK_OWN[by_token], {"task": str(task.pk), **owner},
               narrow(_lock_query(), "agent").filter(pk=str(task.pk)))
              for by_token, owner, narrow in owners(agent)),
            (_LOCK_ANY, {"task": task.pk}, _lock_query().filter(pk=task.pk)),
        ):  # fmt: skip
            sql, params = django_sql(_as_get(queryset))
            assert prepared.compiled_sql(**values) == (sql, list(params))
            (locked,) = prepared.rows(**values)
            assert locked == task and locked.agent == agent_row
            assert locked.goal == task.goal and locked.limits == task.limits
            assert locked.catalog_version == queryset.get().catalog_version
            if "key_hash" in values:  # the claim's token, read with the row
                assert locked.claim_token_id == token.pk
                assert locked.claim_token_used_at == token.last_used_at
        for by_token, owner, _narrow in owners(agent):
            assert _LOCK_OWN[by_token].rows(task=uuid.uuid4(), **owner) == []
            with pytest.raises(ValidationError):
                _LOCK_OWN[by_token].rows(task="not-a-uuid", **owner)
        # A revoked token, another agent's task, a token nobody has: no row.
        assert _LOCK_OWN[True].rows(task=task.pk, key_hash=hash_token("nobody's")) == []
        ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
        assert _LOCK_OWN[True].rows(task=task.pk, key_hash=token.key_hash) == []


def test_a_prepared_lock_outside_a_transaction_is_refused_as_djangos(
    transactional_db, agent_row, make_task
):
    from django.db import connection

    task = make_task()
    if not connection.features.has_select_for_update:
        pytest.skip("no row locks on this database")
    with transaction.atomic():
        _LOCK_ANY.rows(task=task.pk)  # compiled
    with pytest.raises(TransactionManagementError):
        _LOCK_ANY.rows(task=task.pk)


def before_updated_at(sql):
    return sql.split("WHERE")[0].split('"updated_at" =')[0]


def test_save_columns_sends_the_update_save_sends(agent_row, make_task):
    from django.db import DatabaseError, connection
    from django.test.utils import CaptureQueriesContext

    from agents.db.prepared import save_columns
    from agents.models import Task

    task = make_task()
    shapes = [
        ({"state": "RUNNING", "reason": "", "report": None}, ["state", "reason", "report"]),
        ({"report": {"a": [1, 2]}, "model_calls": 3}, ["report", "model_calls", "updated_at"]),
        ({"window": [{"k": "v"}], "cost_spent": "1.5"}, ["window", "cost_spent"]),
    ]
    for values, names in shapes:
        for attr, value in values.items():
            setattr(task, attr, value)
        with CaptureQueriesContext(connection) as django:
            task.save(update_fields=names)
        django_row = Task.objects.filter(pk=task.pk).values().get()
        with CaptureQueriesContext(connection) as ours:
            save_columns(task, names)
        ours_row = Task.objects.filter(pk=task.pk).values().get()
        # The same statement; only updated_at (auto_now) differs between the two saves.
        assert [before_updated_at(q["sql"]) for q in ours] == [
            before_updated_at(q["sql"]) for q in django
        ]
        assert len(ours) == len(django) == 1
        django_row.pop("updated_at"), ours_row.pop("updated_at")
        assert ours_row == django_row
    gone = Task.objects.get(pk=task.pk)
    Task.objects.filter(pk=task.pk).update(goal="x")  # still there: saving works
    save_columns(gone, ["goal"])
    assert Task.objects.get(pk=task.pk).goal == gone.goal
    gone.pk = uuid.uuid4()
    with pytest.raises(DatabaseError, match="did not affect any rows"):
        save_columns(gone, ["goal"])


def test_an_expression_is_saved_by_djangos_save(agent_row, make_task):
    """A value that is an expression (or SQL of a field's own) is Django's to write: the
    prepared save and insert fall back to `save`, which resolves it in the statement."""
    from django.db.models import F, Value

    from agents.db.prepared import insert_row, save_columns
    from agents.models import Event, Task

    task = make_task()
    Task.objects.filter(pk=task.pk).update(model_calls=4)
    task.model_calls = F("model_calls") + 1
    task.retries = 2
    save_columns(task, ["model_calls", "retries"])
    row = Task.objects.filter(pk=task.pk).values("model_calls", "retries").get()
    assert row == {"model_calls": 5, "retries": 2}

    event = Event(task=task, kind=Value("note"), actor="agent:a")
    insert_row(event)
    assert Event.objects.get(pk=event.pk).kind == "note"


def _a_tool_call(task, agent_row):
    _task, call, outcome = runner.tool_call_request(
        task_id=task.pk, agent=agent_row, tool="search", args={"q": 1}, effect=terms.READ
    )
    assert outcome.decision == terms.EXECUTE
    return call


def _a_model_call(task, agent_row):
    _task, call, outcome = runner.model_call_gate(task_id=task.pk, agent=agent_row)
    assert outcome.decision == terms.ALLOW
    return call


@pytest.mark.parametrize(
    ("lock_name", "model_name", "make_call"),
    [("_LOCK_WITH_CALL", "ToolCall", _a_tool_call),
     ("_LOCK_WITH_MODEL_CALL", "ModelCall", _a_model_call)],
    ids=["tool-call", "model-call"],
)  # fmt: skip
def test_the_task_and_call_locks_are_the_querysets_get(
    agent, agent_row, make_task, lock_name, model_name, make_call
):
    from agents import models, taskrow
    from agents.taskrow import catalog_version_subquery

    locks, model = getattr(taskrow, lock_name), getattr(models, model_name)
    task = make_task()
    call = make_call(task, agent_row)
    with transaction.atomic():
        for by_token, owner, narrow in owners(agent):
            lock = locks[by_token]
            values = {"call": call.pk, "task": str(task.pk), **owner}
            queryset = narrow(
                model.objects.select_for_update(no_key=True, of=("task", "self"))
                .select_related("task", "task__agent")
                .annotate(catalog_version=catalog_version_subquery()),
                "task__agent",
            ).filter(pk=call.pk, task_id=str(task.pk))
            sql, params = django_sql(_as_get(queryset))
            assert lock.compiled_sql(**values) == (sql, list(params))
            (locked,) = lock.rows(**values)
            assert locked == call and locked.task == task and locked.task.agent == agent_row
            assert locked.decision == call.decision and locked.task.limits == task.limits
            assert lock.rows(**{**values, "call": call.pk + 1}) == []
            assert lock.rows(**{**values, "task": str(uuid.uuid4())}) == []
        assert locks[True].rows(call=call.pk, task=task.pk, key_hash=hash_token("x")) == []


def test_the_lock_with_the_model_call_probes_is_the_querysets_get(
    agent, agent_row, make_task, start_write
):
    from django.db.models import Exists, OuterRef

    from agents.models import ModelCall
    from ledger import services as ledger

    task = make_task()
    _task, call, _outcome = runner.model_call_gate(task_id=task.pk, agent=agent_row)
    operation = start_write(task, key="invoice-8")
    key = {"operation_key": "invoice-8"}
    known = Exists(ModelCall.objects.filter(task=OuterRef("pk"), pk=call.pk))
    with transaction.atomic():
        for (probe, values, annotations), (by_token, owner, narrow) in itertools.product((
            (runner.MODEL_CALL_PROBE, {"model_call": call.pk}, {"model_call_known": known}),
            (runner.MODEL_CALL_AND_OPERATION_PROBE, {"model_call": call.pk, **key},
             {"model_call_known": known, "operation_probe": ledger.operation_probe("invoice-8")}),
        ), owners(agent)):  # fmt: skip
            queryset = narrow(_lock_query(annotations), "agent").filter(pk=str(task.pk))
            sql, params = django_sql(_as_get(queryset))
            lock = probe.lock[by_token]
            assert lock.compiled_sql(task=str(task.pk), **owner, **values) == (sql, list(params))
            (locked,) = lock.rows(task=task.pk, **owner, **values)
            assert locked == task and locked.model_call_known is True
            (other,) = lock.rows(task=task.pk, **owner, **{**values, "model_call": call.pk + 1})
            assert other.model_call_known is False
        assert locked.operation_probe == operation.pk
    with pytest.raises(ValueError, match="same slot names"):
        runner.MODEL_CALL_PROBE + runner.MODEL_CALL_PROBE


def test_insert_row_sends_the_insert_save_sends(agent_row, make_task):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents.db.prepared import insert_row
    from agents.models import ModelCall

    task = make_task()

    def call(seq, **extra):
        return ToolCall(task=task, seq=seq, phase=1, tool="t", args={"a": [1]}, effect="read",
                        decision="EXECUTE", **extra)  # fmt: skip

    django_row, ours_row = call(1001), call(1002, job_id="j")
    with CaptureQueriesContext(connection) as django:
        django_row.save()
    with CaptureQueriesContext(connection) as ours:
        insert_row(ours_row)
    assert len(ours) == len(django) == 1
    assert ours[0]["sql"].split(" VALUES ")[0] == django[0]["sql"].split(" VALUES ")[0]
    assert ours_row.pk == django_row.pk + 1 and not ours_row._state.adding
    got = ToolCall.objects.filter(pk=ours_row.pk).values().get()
    want = ToolCall.objects.filter(pk=django_row.pk).values().get()
    for row in (got, want):
        row.pop("id"), row.pop("created_at"), row.pop("seq")
    assert got.pop("job_id") == "j" and want.pop("job_id") == ""
    assert got == want
    model_call = ModelCall(task=task, seq=1003, phase=1, model="m", decision="ALLOW")
    insert_row(model_call)
    assert ModelCall.objects.get(pk=model_call.pk).created_at == model_call.created_at


def test_insert_row_leaves_a_field_with_its_own_placeholder_to_django(
    agent_row, make_task, monkeypatch
):
    """A field that wraps its value in SQL of its own (`get_placeholder`) is inserted by
    Django's `save`, which asks the field for it; `insert_row` notes per model whether it has
    such a field, and the note must say so."""
    from agents.db import prepared
    from agents.models import Event

    task = make_task()
    field = Event._meta.get_field("kind")
    asked = []

    def placeholder(value, compiler, connection):
        asked.append(value)
        return "%s"

    monkeypatch.setattr(field, "get_placeholder", placeholder, raising=False)
    monkeypatch.setattr(prepared, "_INSERT_FIELDS", {})
    event = Event(task=task, kind="note", actor="agent:a")
    prepared.insert_row(event)
    assert asked == ["note"]  # Django's road: the field was asked for its placeholder
    assert Event.objects.get(pk=event.pk).kind == "note"


def test_the_lock_with_the_operation_probe_is_the_querysets_get(
    agent, make_task, start_write, make_agent
):
    from ledger import services as ledger

    task = make_task()
    operation = start_write(task, key="invoice-7")
    # The same key in another namespace: the probe reads the task's agent's namespace only.
    other_agent, _token = make_agent("agent-c", namespace="ns-c")
    elsewhere = task_create(agent=other_agent, goal="elsewhere")
    runner.tool_call_request(task_id=elsewhere.pk, agent=other_agent, tool="send_invoice",
                             args={}, effect=terms.WRITE, operation_key="invoice-7")  # fmt: skip
    values = {"operation_key": "invoice-7"}
    with transaction.atomic():
        for by_token, owner, narrow in owners(agent):
            queryset = narrow(
                _lock_query({"operation_probe": ledger.operation_probe("invoice-7")}), "agent"
            )
            sql, params = django_sql(_as_get(queryset.filter(pk=str(task.pk))))
            prepared = ledger.OPERATION_PROBE.lock[by_token]
            assert prepared.compiled_sql(task=str(task.pk), **owner, **values) == (
                sql, list(params),
            )  # fmt: skip
            (locked,) = prepared.rows(task=task.pk, **owner, **values)
            assert locked == task and locked.operation_probe == operation.pk
            (other,) = prepared.rows(task=task.pk, **owner, operation_key="nope")
            assert other.operation_probe is None


def test_the_locks_with_a_request_ids_answer_are_the_querysets_get(agent, agent_row, make_task):
    from django.db.models import OuterRef, Subquery

    from agents import taskrow
    from agents.models import ModelCall, RequestAnswer

    task = make_task()
    _task, call, _outcome = runner.model_call_gate(task_id=task.pk, agent=agent_row)
    kept = RequestAnswer.objects.create(task=task, request_id="r-1", digest="d", answer={})

    def answer_kept(path):
        rows = RequestAnswer.objects.filter(task=OuterRef(path), request_id="r-1")
        return {"answer_kept": Subquery(rows.values("pk")[:1])}

    with transaction.atomic():
        for by_token, owner, narrow in owners(agent):
            queryset = narrow(_lock_query(answer_kept("pk")), "agent").filter(pk=str(task.pk))
            lock = taskrow.ANSWER_PROBE.lock[by_token]
            values = {"task": str(task.pk), **owner, "request_id": "r-1"}
            assert lock.compiled_sql(**values) == (
                django_sql(_as_get(queryset))[0],
                list(django_sql(_as_get(queryset))[1]),
            )
            (locked,) = lock.rows(**values)
            assert locked == task and locked.answer_kept == kept.pk
            (other,) = lock.rows(**{**values, "request_id": "r-2"})
            assert other.answer_kept is None

            with_call = taskrow._ANSWERED_LOCK_WITH_MODEL_CALL[by_token]
            queryset = narrow(
                ModelCall.objects.select_for_update(no_key=True, of=("task", "self"))
                .select_related("task", "task__agent")
                .annotate(catalog_version=taskrow.catalog_version_subquery(),
                          **answer_kept("task_id")),
                "task__agent",
            ).filter(pk=call.pk, task_id=str(task.pk))  # fmt: skip
            values = {"call": call.pk, "task": str(task.pk), **owner, "request_id": "r-1"}
            sql, params = django_sql(_as_get(queryset))
            assert with_call.compiled_sql(**values) == (sql, list(params))
            (locked,) = with_call.rows(**values)
            assert locked == call and locked.answer_kept == kept.pk
