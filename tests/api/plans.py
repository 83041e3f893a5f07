"""PostgreSQL plans of the hot path's prepared statements, as the tests read them."""

from __future__ import annotations

import json
import re

from django.db import connection


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
