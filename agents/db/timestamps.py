"""PostgreSQL timestamps read at C speed: Django's own values, a quarter of the cost.

Django (psycopg 3) reads every `timestamptz` column through its `BaseTzLoader`, a Python
subclass of psycopg's Python loader; being a subclass, it keeps psycopg from using its C
loader, and parsing a timestamp in Python costs about 6 us. A decision reads about five of them
(the token, the agent, the task, the call): about 1% of a decision's Python time.

`fast_timestamps` (connected to `connection_created`) gives each new PostgreSQL connection a
subclass of the loader Django registered on it, whose `load` parses PostgreSQL's ISO text
with `datetime.fromisoformat` (C) and then does exactly what Django's loader does with the
result: the wall-clock time PostgreSQL printed (in the session's time zone, which Django sets
to its own) with Django's time zone as its tzinfo (none when USE_TZ is off). Anything
`fromisoformat` refuses (a BC date, a year past 9999, infinity, a non-ISO DateStyle) goes to
Django's loader unchanged, so its errors are Django's too. The class keeps Django's
`timezone` attribute, which Django's `create_cursor` compares (and `agents.db.prepared`).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

TIMESTAMPTZ_OID = 1184


def timestamp_loader(adapters: Any) -> Any:
    """The loader of text `timestamptz` values registered in psycopg's `adapters` (a
    connection's or a cursor's)."""
    from psycopg.pq import Format

    return adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)


@cache
def _faster(base: type) -> type:
    class FastTimestamptzLoader(base):  # type: ignore[valid-type, misc]
        parses_in_c = True

        def load(self, data: Any) -> Any:
            try:
                value = datetime.fromisoformat(bytes(data).decode())
            except ValueError:
                return super().load(data)
            return value.replace(tzinfo=self.timezone)

    return FastTimestamptzLoader


def fast_timestamps(sender: Any, connection: Any, **_kwargs: Any) -> None:
    """On a new PostgreSQL connection, register the faster loader (see the module)."""
    if connection.vendor != "postgresql":
        return
    adapters = connection.connection.adapters
    loader = timestamp_loader(adapters)
    if loader is None or not hasattr(loader, "timezone") or getattr(loader, "parses_in_c", False):
        return
    adapters.register_loader(TIMESTAMPTZ_OID, _faster(loader))
