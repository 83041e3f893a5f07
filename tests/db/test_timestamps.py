"""PostgreSQL timestamps are read by `agents.db.timestamps`' loader, with Django's values."""

from __future__ import annotations

import pytest
from django.db import DataError, connection
from django.db.backends.postgresql.psycopg_any import register_tzloader

from agents.db.timestamps import timestamp_loader

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]

LITERALS = [
    "2026-12-01 10:00:00+00",
    "2026-12-01 10:00:00.5+00",
    "2026-12-01 10:00:00.123456+05:30",
    "2026-03-29 01:59:59.999999-09:30",
    "1900-01-01 00:00:00+00:19:32",  # a seconds offset (local mean time), printed as such
    "0002-01-01 00:00:00+00",
    "9999-12-30 23:59:59.999999+00",
]
REFUSED = ["0044-03-15 00:00:00+00 BC", "20000-01-01 00:00:00+00", "infinity", "-infinity"]


def _read(sql: str, *, djangos: bool, zone: str | None = None) -> list:
    with connection.cursor() as cursor:
        if djangos:
            # A cursor's own loader overrides the connection's: Django's, as it registers it.
            register_tzloader(connection.timezone, cursor.cursor)
        if zone:
            cursor.execute(f"SET LOCAL TIME ZONE {connection.ops.quote_name(zone)}")
        cursor.execute(sql)
        return cursor.fetchall()


def test_a_new_connection_reads_timestamps_with_the_fast_loader():
    connection.ensure_connection()
    loader = timestamp_loader(connection.connection.adapters)
    assert loader.__name__ == "FastTimestamptzLoader"
    # Django compares this attribute on every cursor it creates.
    assert loader.timezone == connection.timezone


@pytest.mark.parametrize("zone", [None, "Asia/Kolkata", "America/St_Johns", "Europe/Amsterdam"])
def test_the_values_are_djangos(zone):
    sql = "SELECT " + ", ".join(f"'{text}'::timestamptz" for text in LITERALS) + ", now()"
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")  # one transaction: now() is the same in both reads
        fast = _read(sql, djangos=False, zone=zone)
        djangos = _read(sql, djangos=True, zone=zone)
    assert fast == djangos
    assert [v.tzinfo for v in fast[0]] == [v.tzinfo for v in djangos[0]]


@pytest.mark.parametrize("text", REFUSED)
def test_what_python_cannot_hold_fails_as_djangos_loader_fails(text):
    errors = []
    for djangos in (False, True):
        with pytest.raises(DataError) as caught:
            _read(f"SELECT '{text}'::timestamptz", djangos=djangos)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]


def test_a_model_row_reads_aware_utc_times(make_task):
    task = make_task()
    from agents.models import Task

    loaded = Task.objects.get(pk=task.pk)
    assert loaded.created_at == task.created_at
    assert loaded.created_at.utcoffset().total_seconds() == 0
