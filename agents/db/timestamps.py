"""PostgreSQL timestamps parsed in C, with Django's own values.

Django's `timestamptz` loader is a Python subclass of psycopg's, which keeps psycopg from using
its C loader. `fast_timestamps` (connected to `connection_created`) gives each new PostgreSQL
connection a subclass of the loader Django registered that parses with
`datetime.fromisoformat` and then does what Django's loader does (the wall-clock time with
Django's time zone as tzinfo, none when USE_TZ is off). Anything `fromisoformat` refuses goes
to Django's loader unchanged, errors included. The class keeps Django's `timezone` attribute,
which Django's `create_cursor` compares (and `agents.db.prepared`).
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
