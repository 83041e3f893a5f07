"""With statistics, a decision's lock finds its task, and a report its call, by the primary key:
however many calls the task has and however many tasks its agent has.

The locks are prepared statements, each planned once per connection with a generic plan (made
without the values). PostgreSQL chooses it from the tables' statistics: on tables without
any (a new database, or autovacuum off, as on the development machine), the lock of a task with
one of its calls was planned to read all of the task's calls through the (task, seq) index, and
the task by the agent's index (seen in `manage.py bench`, which now gathers statistics as
autovacuum would; the README's deployment notes say to keep autovacuum on). These tests pin the
plans PostgreSQL makes once it has statistics.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection

from agents.guard import terms
from agents.models import Agent, ApiToken, ModelCall, ToolCall, hash_token
from agents.services.runner import MODEL_CALL_AND_OPERATION_PROBE
from agents.services.tasks import task_create
from agents.taskrow import _LOCK_OWN, _LOCK_WITH_CALL, _LOCK_WITH_MODEL_CALL
from tests.api.plans import generic_plan, scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]

LONG = 400  # calls of each kind in the long task
SHORT_TASKS = 30  # the agent's other tasks, one call of each kind each
OTHER_TASKS = 300  # another agent's tasks, as many calls
OTHER_TOKENS = 100  # more tokens of each agent (revoked ones stay in the table)


def add_calls(task, count):
    ModelCall.objects.bulk_create(
        ModelCall(task=task, seq=2 * n + 1, phase=1, round=n + 1, model="m",
                  decision=terms.ALLOW, reserved_cost=Decimal(0))
        for n in range(count)
    )  # fmt: skip
    ToolCall.objects.bulk_create(
        ToolCall(task=task, seq=2 * n + 2, phase=1, tool="fetch_page", args={"page": n},
                 effect=terms.READ, fingerprint=f"f{n}", decision=terms.EXECUTE)
        for n in range(count)
    )  # fmt: skip


@pytest.fixture
def long_task(make_task, agent_row):
    """A task of LONG calls of each kind, of an agent with SHORT_TASKS more tasks, and another
    agent's OTHER_TASKS beside them; statistics gathered, as autovacuum would."""
    task = make_task(goal="A long task")
    add_calls(task, LONG)
    for n in range(SHORT_TASKS):
        add_calls(make_task(goal=f"Short task {n}"), 1)
    other = Agent.objects.create(name="agent-b", namespace="ns-b")
    for n in range(OTHER_TASKS):
        add_calls(task_create(agent=other, goal=f"Another agent's task {n}"), 1)
    ApiToken.objects.bulk_create(
        ApiToken(agent=agent, key_hash=hash_token(f"token {agent.pk} {n}"), prefix="lw_")
        for agent in (agent_row, other)
        for n in range(OTHER_TOKENS)
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "ANALYZE agents_task, agents_modelcall, agents_toolcall, agents_agent, agents_apitoken"
        )
    return task


@pytest.fixture(params=["by agent id", "by token"])
def owner(request, agent):
    """How the lock names the task's agent: its id, or the hash of its token (a decision's
    lock that checks the token: `agents.taskrow.AgentClaim`)."""
    if request.param == "by agent id":
        return False, {"agent": agent[1].pk}
    return True, {"key_hash": hash_token(agent[0].token)}


def assert_token_found_by_key(plan: dict, by_token: bool) -> None:
    """The token, when the lock checks one, is read once, by an index of its hash."""
    if not by_token:
        assert scans(plan, "agents_apitoken") == []
        return
    (scan,) = scans(plan, "agents_apitoken")
    # Either of the column's two indexes (unique, and Django's `_like` for prefix matches).
    assert "key_hash" in scan.get("Index Name", ""), scan
    assert (scan["Actual Rows"], scan.get("Rows Removed by Filter", 0)) == (1, 0), scan


def index_read(scan: dict) -> str | None:
    """The index a scan finds its rows by: an Index Scan's own, or the one Bitmap Index Scan
    under a Bitmap Heap Scan (None for anything else: a BitmapAnd or BitmapOr of several
    indexes, a sequential scan)."""
    if scan["Node Type"] == "Bitmap Heap Scan":
        children = scan.get("Plans", [])
        if len(children) != 1 or children[0]["Node Type"] != "Bitmap Index Scan":
            return None
        return children[0].get("Index Name")
    return scan.get("Index Name")


def assert_found_by_key(plan: dict, table: str) -> None:
    """`table` is read once, by its primary key, one row and no other.

    Either way of reading one row by the key is that: an Index Scan, or a Bitmap Heap Scan of
    the key's one Bitmap Index Scan. PostgreSQL prices the two within a hair of each other for
    one row, and which one wins turns on the table's size in pages (the dead rows that the
    earlier tests' rollbacks leave behind; with time-ordered task ids, the ids' correlation
    with the table's order), not on how many rows the lock reads.
    """
    (scan,) = scans(plan, table)
    assert (index_read(scan), scan.get("Rows Removed by Filter", 0)) == (f"{table}_pkey", 0), scan
    assert scan["Actual Rows"] == 1, scan


@pytest.mark.parametrize(
    ("lock", "model", "table"),
    [(_LOCK_WITH_CALL, ToolCall, "agents_toolcall"),
     (_LOCK_WITH_MODEL_CALL, ModelCall, "agents_modelcall")],
    ids=["tool call", "model call"],
)  # fmt: skip
def test_a_reports_lock_reads_one_call_and_one_task(long_task, owner, lock, model, table):
    by_token, values = owner
    last = model.objects.filter(task=long_task).latest("seq")

    plan = generic_plan(*lock[by_token].compiled_sql(call=last.pk, task=long_task.pk, **values))

    assert_found_by_key(plan, table)
    assert_found_by_key(plan, "agents_task")
    assert_token_found_by_key(plan, by_token)


def test_a_gates_lock_reads_one_task(long_task, owner):
    by_token, values = owner
    plan = generic_plan(*_LOCK_OWN[by_token].compiled_sql(task=long_task.pk, **values))

    assert_found_by_key(plan, "agents_task")
    assert_token_found_by_key(plan, by_token)


def test_a_tool_requests_lock_reads_one_task_and_one_model_call(long_task, owner):
    by_token, values = owner
    last = ModelCall.objects.filter(task=long_task).latest("seq")
    lock = MODEL_CALL_AND_OPERATION_PROBE.lock[by_token]

    plan = generic_plan(*lock.compiled_sql(
        task=long_task.pk, model_call=last.pk, operation_key="invoice-42", **values
    ))  # fmt: skip

    assert_found_by_key(plan, "agents_task")
    assert_found_by_key(plan, "agents_modelcall")
    assert_token_found_by_key(plan, by_token)


def test_a_request_ids_answer_is_read_by_the_unique_index(long_task, owner):
    """The kept answers of a long task are many; the lock reads the one of its id by index."""
    from agents.models import RequestAnswer
    from agents.taskrow import _ANSWERED_LOCK_WITH_CALL, ANSWER_PROBE

    RequestAnswer.objects.bulk_create(
        RequestAnswer(task=long_task, request_id=f"r-{n}", digest="d", answer={})
        for n in range(LONG)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE agents_requestanswer")
    by_token, values = owner
    last = ToolCall.objects.filter(task=long_task).latest("seq")

    for plan in (
        generic_plan(*ANSWER_PROBE.lock[by_token].compiled_sql(
            task=long_task.pk, request_id="r-7", **values)),
        generic_plan(*_ANSWERED_LOCK_WITH_CALL[by_token].compiled_sql(
            call=last.pk, task=long_task.pk, request_id="r-7", **values)),
    ):  # fmt: skip
        (scan,) = scans(plan, "agents_requestanswer")
        assert scan.get("Index Name") == "request_answer_unique", scan
        assert scan["Actual Rows"] == 1, scan
        assert_found_by_key(plan, "agents_task")
