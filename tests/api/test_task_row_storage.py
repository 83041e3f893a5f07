"""How the rows a decision writes are stored (migration 0012): the task row has no index of its
own on its agent (the `task_trigger` index leads with it), and on a PostgreSQL server with lz4
their large JSON and text columns are compressed with it, not with pglz."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection

from agents.models import Task

storage = importlib.import_module("agents.migrations.0012_task_row_writes")

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="TOAST compression is PostgreSQL's"
)


@pytest.fixture
def lz4():
    """This PostgreSQL server can compress with lz4 (the migration's own check)."""
    if not storage.lz4_available(connection):
        pytest.skip("this PostgreSQL server was built without lz4")


def _indexes(table: str) -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {name: info["columns"] for name, info in found.items() if info["index"]}


def test_the_task_row_has_no_index_of_its_own_on_its_agent():
    indexes = _indexes(Task._meta.db_table)
    assert ["agent_id"] not in indexes.values()
    # ...and a lookup by agent still has an index that leads with it.
    assert indexes["task_trigger"][0] == "agent_id"


@on_postgresql
def test_a_decisions_large_columns_are_compressed_with_lz4(lz4):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attname, a.attcompression FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = ANY(%s) AND a.attnum > 0",
            [["agents_task", "agents_modelcall", "agents_toolcall"]],
        )
        method = {(table, column): how for table, column, how in cursor.fetchall()}
    for model_name, names in storage.COMPRESSED.items():
        model = apps.get_model("agents", model_name)
        for name in names:
            column = model._meta.get_field(name).column
            assert method[model._meta.db_table, column] == "l", (model_name, name)
    # A column nobody listed keeps the server's default.
    assert method["agents_task", "state"] == ""


@on_postgresql
def test_a_large_window_is_stored_compressed_with_lz4_and_read_back_as_written(lz4, make_task):
    task = make_task()
    window = [
        {"fp": f"{i:064x}", "tool": "search", "args": '{"query": "invoices of march"}',
         "result": '{"rows": 25, "page": 1}'}
        for i in range(200)
    ]  # fmt: skip
    Task.objects.filter(pk=task.pk).update(window=window)
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT pg_column_compression("window") FROM agents_task WHERE id = %s', [task.pk]
        )
        (method,) = cursor.fetchone()
    assert method == "lz4"
    assert Task.objects.get(pk=task.pk).window == window
