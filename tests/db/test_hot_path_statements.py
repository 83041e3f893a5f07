"""The hot path on PostgreSQL: its fixed-shape statements run as prepared statements on a
persistent connection (`agents.db.prepared.hot_cursor`), and the writes that end a decision go as
one statement (`agents.db.prepared.writes_together`), with the same rows and the same checks as
when they are sent one by one."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.db.prepared import (
    hot_cursor,
    insert_row,
    save_columns,
    update_rows,
    write_later,
    writes_together,
)
from agents.guard import terms
from agents.models import AgentDay, ModelCall, ModelPrice, Phase, Task, ToolCall
from agents.services import runner

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements and data-modifying WITH are PostgreSQL's")


@pytest.fixture
def persistent(monkeypatch):
    """A persistent connection, as in production (DB_CONN_MAX_AGE not 0)."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_decision_prepares_its_statements_on_a_persistent_connection(
    persistent, agent_row, make_task
):
    task = make_task()
    _task, call, outcome = runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m")
    assert outcome.decision == terms.ALLOW

    statements = prepared_statements()
    assert any("FOR NO KEY UPDATE" in sql and '"agents_task"' in sql for sql in statements)
    assert any("INSERT INTO agents_agentday" in sql for sql in statements)
    assert any(sql.startswith("WITH") and '"agents_modelcall"' in sql for sql in statements)
    # The rows are as the decision left them (the id came back from the combined statement).
    row = ModelCall.objects.get(pk=call.pk)
    assert (row.task_id, row.decision, row.seq) == (task.pk, terms.ALLOW, call.seq)
    assert Task.objects.get(pk=task.pk).model_calls == 1


def test_without_a_persistent_connection_nothing_is_prepared(monkeypatch, agent_row, make_task):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    task = make_task()
    before = prepared_statements()  # the connection may have prepared some in earlier tests
    runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m")

    assert prepared_statements() == before


def test_prepared_statements_can_be_turned_off(persistent, settings, agent_row, make_task):
    settings.DB_PREPARED_STATEMENTS = False
    task = make_task()
    before = prepared_statements()
    runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m")

    assert prepared_statements() == before


def test_a_whole_round_reads_back_the_same_with_and_without_preparing(
    persistent, settings, agent_row, make_task
):
    ModelPrice.objects.create(model="m", input_per_million=Decimal(3), output_per_million=15)

    def one_round():
        task = make_task()
        _t, call, _o = runner.model_call_gate(
            task_id=task.pk, agent=agent_row, model="m", est_prompt_tokens=100,
            max_output_tokens=50,
        )  # fmt: skip
        runner.model_call_usage(task_id=task.pk, agent=agent_row, model_call_id=call.pk,
                                prompt_tokens=90, completion_tokens=40)  # fmt: skip
        _t, tool, outcome = runner.tool_call_request(
            task_id=task.pk, agent=agent_row, tool="send", args={"to": "a"}, effect=terms.WRITE,
            operation_key=f"key-{task.pk}", model_call_id=call.pk,
        )  # fmt: skip
        assert outcome.decision == terms.EXECUTE
        runner.tool_call_result(
            task_id=task.pk, agent=agent_row, tool_call_id=tool.pk,
            result=terms.ToolResult(kind="SUCCESS", data={"id": 1},
                                    evidence={"revision": 1, "done": False, "committed": True}),
        )  # fmt: skip
        task = Task.objects.get(pk=task.pk)
        fields = ("model_calls", "tool_requests", "tool_executions", "tokens_used",
                  "cost_spent", "cost_reserved", "revision", "pending", "state")  # fmt: skip
        return (
            {name: getattr(task, name) for name in fields},
            [(c.cost, c.settled_at is None) for c in ModelCall.objects.filter(task=task)],
            list(ToolCall.objects.filter(task=task).values_list("decision", "result_kind")),
        )

    prepared = one_round()
    settings.DB_PREPARED_STATEMENTS = False
    before = prepared_statements()
    unprepared = one_round()
    assert prepared_statements() == before

    assert prepared == unprepared
    assert prepared[0]["cost_spent"] > 0 and prepared[0]["revision"] == 1


def test_writes_kept_together_go_as_one_statement_with_their_answers(agent_row, make_task):
    task = make_task()
    with transaction.atomic():
        with CaptureQueriesContext(connection) as captured, writes_together():
            call = ModelCall(task=task, seq=1, phase=1, decision=terms.ALLOW, model="m")
            insert_row(call)
            task.goal = "changed"
            save_columns(task, ["goal"])
            sql = "INSERT INTO agents_agentday (agent_id, day, spent, reserved) VALUES " \
                  "(%s, %s, %s, %s) RETURNING 1"  # fmt: skip
            # (1 unit of money: the columns hold whole millionths.)
            assert write_later("default", sql, [agent_row.pk, "2026-01-02", 1_000_000, 0])
            assert call.pk is None  # kept: nothing sent yet
        assert len(captured) == 1 and captured[0]["sql"].startswith("WITH ")
    assert ModelCall.objects.get(pk=call.pk).model == "m"
    assert Task.objects.get(pk=task.pk).goal == "changed"
    assert AgentDay.objects.get(agent=agent_row, day="2026-01-02").spent == 1


def test_a_statement_run_meanwhile_sends_the_kept_writes_first(agent_row, make_task):
    task = make_task()
    with transaction.atomic(), writes_together():
        call = ModelCall(task=task, seq=1, phase=1, decision=terms.ALLOW, model="m")
        insert_row(call)
        # A read of the kept row sees it: the kept write went before the read.
        assert ModelCall.objects.filter(task=task).count() == 1
        assert call.pk is not None


def test_a_row_with_its_key_set_and_a_queryset_update_are_kept_too(agent_row, make_task):
    task = make_task()
    new = Task(agent=agent_row, goal="kept", limits=task.limits, initial_limits=task.limits,
               deadline_at=task.deadline_at)  # fmt: skip
    with transaction.atomic():
        with CaptureQueriesContext(connection) as captured, writes_together():
            insert_row(new)  # its UUID is set before the INSERT
            insert_row(Phase(task=new, number=1, reason="created"))
            update_rows(Task.objects.filter(pk=task.pk), goal="updated")
            update_rows(Task.objects.filter(goal="no such goal"), goal="none")  # no row: fine
            assert new._state.adding  # kept: nothing sent yet
        assert len(captured) == 1 and captured[0]["sql"].startswith("WITH ")
    assert not new._state.adding and new._state.db == "default"
    assert Task.objects.get(pk=new.pk).goal == "kept"
    assert Phase.objects.get(task=new).reason == "created"
    assert Task.objects.get(pk=task.pk).goal == "updated"


def test_outside_a_block_they_are_sent_at_once(agent_row, make_task):
    task = make_task()
    new = Task(agent=agent_row, goal="now", limits=task.limits, initial_limits=task.limits,
               deadline_at=task.deadline_at)  # fmt: skip
    with CaptureQueriesContext(connection) as captured:
        insert_row(new)
        update_rows(Task.objects.filter(pk=task.pk), goal="updated now")
    assert [q["sql"].split()[0] for q in captured] == ["INSERT", "UPDATE"]
    assert Task.objects.get(pk=new.pk).goal == "now" and not new._state.adding
    assert Task.objects.get(pk=task.pk).goal == "updated now"


def test_a_kept_save_that_updates_no_row_raises_as_a_save_does(agent_row, make_task):
    task = make_task()
    gone = Task.objects.get(pk=task.pk)
    gone.pk = "00000000-0000-4000-8000-000000000000"
    with (
        pytest.raises(DatabaseError, match="did not affect any rows"),
        transaction.atomic(),
        writes_together(),
    ):
        save_columns(gone, ["goal"])


def test_an_error_in_the_block_drops_the_kept_writes(agent_row, make_task):
    task = make_task()
    with pytest.raises(RuntimeError), transaction.atomic(), writes_together():
        insert_row(ModelCall(task=task, seq=1, phase=1, decision=terms.ALLOW, model="m"))
        raise RuntimeError("the decision failed")
    assert not ModelCall.objects.filter(task=task).exists()
    with transaction.atomic(), writes_together():  # the next block starts empty
        pass


def test_a_hot_cursor_is_djangos_wrapper(db, persistent):
    with CaptureQueriesContext(connection) as captured, hot_cursor() as cursor:
        cursor.execute("SELECT %s::int + 1", [41])
        assert cursor.fetchone() == (42,)
    assert captured[0]["sql"] == "SELECT 41::int + 1"
    assert any("SELECT $1::int + 1" in sql for sql in prepared_statements())


# -- a decision's transaction of its own (no test transaction around it) ----------------------


@pytest.mark.django_db(transaction=True)
def test_a_failing_kept_write_commits_nothing_and_raises_djangos_error(agent_row, make_task):
    from django.db import IntegrityError

    from agents.db.prepared import decision_transaction

    task = make_task()
    ModelCall.objects.create(task=task, seq=1, phase=1, decision=terms.ALLOW, model="first")
    with pytest.raises(IntegrityError), decision_transaction():
        task.goal = "changed"
        save_columns(task, ["goal"])
        insert_row(ModelCall(task=task, seq=1, phase=1, decision=terms.ALLOW, model="again"))

    assert Task.objects.get(pk=task.pk).goal != "changed"
    assert list(ModelCall.objects.filter(task=task).values_list("model", flat=True)) == ["first"]
    with decision_transaction():  # the connection is usable again
        save_columns(task, ["goal"])
    assert Task.objects.get(pk=task.pk).goal == "changed"


@pytest.mark.django_db(transaction=True)
def test_a_kept_save_of_no_row_rolls_the_decision_back(agent_row, make_task):
    from agents.db.prepared import decision_transaction

    task = make_task()
    gone = Task.objects.get(pk=task.pk)
    gone.pk = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(DatabaseError, match="did not affect any rows"), decision_transaction():
        insert_row(ModelCall(task=task, seq=1, phase=1, decision=terms.ALLOW, model="m"))
        save_columns(gone, ["goal"])

    assert not ModelCall.objects.filter(task=task).exists()


# -- one generic plan per prepared statement --------------------------------------------------


def test_the_connection_plans_prepared_statements_once(db):
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone() == ("force_generic_plan",)


@pytest.mark.parametrize(("switch", "options"), [("true", True), ("false", False)])
def test_the_generic_plan_option_follows_db_prepared_statements(switch, options):
    import os
    import subprocess
    import sys

    from tests.live import ROOT

    env = {**os.environ, "DB_PREPARED_STATEMENTS": switch, "PYTHONWARNINGS": "ignore"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", "import os; os.environ['DJANGO_SETTINGS_MODULE'] = "
         "'loopwarden.settings'; from django.conf import settings; "
         "print(settings.DATABASES['default'].get('OPTIONS', {}).get('options', ''))"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ("plan_cache_mode=force_generic_plan" in done.stdout) is options
