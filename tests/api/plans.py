"""PostgreSQL plans of the hot path's prepared statements, as the tests read them."""

from __future__ import annotations

import json
import re

from django.db import connection, transaction


def generic_plan(sql: str, params: list) -> dict:
    """EXPLAIN ANALYZE of the statement run as a prepared statement on its generic plan."""
    count = iter(range(1, len(params) + 1))
    numbered = re.sub(r"%s", lambda _m: f"${next(count)}", sql)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE lw_plan AS {numbered}")
        try:
            slots = ", ".join(["%s"] * len(params))
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lw_plan({slots})", params)
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("DEALLOCATE lw_plan")
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def scans(plan: dict, table: str) -> list[dict]:
    """The plan's nodes that read `table`."""
    found = [plan] if plan.get("Relation Name") == table else []
    for child in plan.get("Plans", []):
        found += scans(child, table)
    return found


PLANNED = {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE"}


def plans_of(run, *, analyze: bool = False) -> list[dict]:
    """The plans of the queries `run()` sends, as EXPLAIN prints them (run too, with
    `analyze`) with sequential scans off: a small test table then does not hide which index
    the planner would use."""
    sent: list[tuple[str, list]] = []

    def capture(execute, sql, params, many, context):
        if sql.lstrip().split(None, 1)[0].upper() in PLANNED:  # not SAVEPOINT, SET, ...
            sent.append((sql, params))
        return execute(sql, params, many, context)

    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    plans = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        with connection.execute_wrapper(capture):
            run()
        for sql, params in sent:
            cursor.execute(f"EXPLAIN ({options}) {sql}", params)
            (plan,) = cursor.fetchone()
            plans.append((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
    return plans


def rows_read(scan: dict) -> int:
    """The rows an analyzed scan node looked at, kept or not."""
    return int(
        (scan.get("Actual Rows", 0) + scan.get("Rows Removed by Filter", 0)
         + scan.get("Rows Removed by Index Recheck", 0)) * scan.get("Actual Loops", 1)
    )  # fmt: skip


def index_names(node: dict) -> set[str]:
    """The indexes a scan node reads: its own, or its bitmap's."""
    names = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        names |= index_names(child)
    return names


def clone_rows(
    model, like_pk, first: int, last: int, made: dict[str, str], *,
    params: tuple = (), analyze: bool = True,
) -> None:  # fmt: skip
    """Copies of the row `like_pk` of `model`'s table, one for each n in first..last, in one
    statement, then ANALYZE (unless not `analyze`): `made` maps a column to the SQL expression
    (of `n`, with `params` for its placeholders) that replaces its value; the id is the
    table's own unless `made` gives one."""
    columns = [f.column for f in model._meta.concrete_fields
               if not f.generated and f.column not in made and f.column != "id"]  # fmt: skip
    table = model._meta.db_table
    quote = connection.ops.quote_name
    listed = ", ".join(quote(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(quote(c) for c in made)}, {listed}) "
            f"SELECT {', '.join(made.values())}, {listed} "
            f"FROM {table}, generate_series(%s, %s) AS n WHERE id = %s",
            [*params, first, last, like_pk],
        )
        if analyze:
            cursor.execute(f"ANALYZE {table}")


def clone_task(like, first: int, last: int, **made: str) -> None:
    """Copies of the task row `like`, one for each n in first..last (see `clone_rows`)."""
    from agents.models import Task

    clone_rows(Task, like.pk, first, last, {"id": "gen_random_uuid()", **made})


def clone_operation(like, first: int, last: int, **made: str) -> None:
    """Copies of the ledger row `like`, one for each n in first..last (each with its own key,
    `like`'s key and n; see `clone_rows`)."""
    from ledger.models import Operation

    clone_rows(Operation, like.pk, first, last,
               {"operation_key": "operation_key || '-' || n", **made})  # fmt: skip
