"""Fixed-shape queries of the decision hot path, compiled once per database connection.

Django compiles a queryset's SQL again on every evaluation: for the joined token lookup and the
task lock (a join, a subquery annotation, `FOR NO KEY UPDATE OF`) that compiling cost more
than the statement's round trip. A `Prepared` query is built and compiled once per connection
with marker values in its parameter slots, and then run with each request's values put in
those slots: the statement sent is the very SQL the queryset compiles (a test compares them),
rows come back as the queryset's model instances (related rows and annotations included), and
the statement goes through the connection's cursor like any other (execute wrappers, query
logging and statement counts see it).

Below the models: it imports only Django.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models import Field, Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.transaction import TransactionManagementError


class Prepared:
    """`build(**markers)` returns the queryset, its final shape (ordering, limit) included;
    `slots` names each value it filters on and the model field that value is compared with."""

    def __init__(self, build: Callable[..., QuerySet], slots: dict[str, tuple[Field, Any]]) -> None:
        self.build = build
        self.slots = slots  # name -> (field, marker value)
        self._compiled = threading.local()

    def rows(self, using: str = "default", **values: Any) -> list[Any]:
        """The queryset's instances for `values` (each converted as the field's exact lookup
        converts it: a value the field refuses raises as it would there)."""
        connection = connections[using]
        compiled = self._compiled_for(using, connection)
        params = list(compiled.params)
        for name, position in compiled.positions.items():
            field = self.slots[name][0]
            params[position] = field.get_db_prep_value(
                field.get_prep_value(values[name]), connection, prepared=True
            )
        if compiled.locks and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            fetched = cursor.fetchall()
        return [compiled.instance(row, connection, using) for row in fetched]

    def compiled_sql(self, using: str = "default", **values: Any) -> tuple[str, list[Any]]:
        """What `rows` sends for `values` (for the test that compares it with Django's)."""
        connection = connections[using]
        compiled = self._compiled_for(using, connection)
        params = list(compiled.params)
        for name, position in compiled.positions.items():
            field = self.slots[name][0]
            params[position] = field.get_db_prep_value(
                field.get_prep_value(values[name]), connection, prepared=True
            )
        return compiled.sql, params

    def _compiled_for(self, using: str, connection) -> _Compiled:
        # Per thread, as Django's connections are; compiled again if the alias's connection
        # object changed (a test that swaps databases).
        compiled = getattr(self._compiled, using, None)
        if compiled is None or compiled.connection is not connection:
            compiled = _Compiled(self, using, connection)
            setattr(self._compiled, using, compiled)
        return compiled


class _Compiled:
    def __init__(self, prepared: Prepared, using: str, connection) -> None:
        self.connection = connection
        markers = {name: marker for name, (_field, marker) in prepared.slots.items()}
        queryset = prepared.build(**markers).using(using)
        compiler = queryset.query.get_compiler(using=using)
        features = connection.features
        self.locks = bool(
            queryset.query.select_for_update
            and features.has_select_for_update
            and features.supports_transactions
        )
        # Compiled in the caller's transaction: outside one, a lock is refused here as the
        # queryset refuses it (and by `rows` on every later call).
        sql, params = compiler.as_sql()
        self.sql = sql
        self.params = list(params)
        self.positions: dict[str, int] = {}
        for name, (field, marker) in prepared.slots.items():
            wanted = field.get_db_prep_value(
                field.get_prep_value(marker), connection, prepared=True
            )
            found = [
                i for i, p in enumerate(self.params) if type(p) is type(wanted) and p == wanted
            ]
            if len(found) != 1:
                raise RuntimeError(f"prepared query: marker {name!r} found {len(found)} times")
            self.positions[name] = found[0]
        select, klass_info = compiler.select, compiler.klass_info
        self.annotations = list(compiler.annotation_col_map.items())
        self.model = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [f[0].target.attname for f in select[self.start : self.end]]
        self.populators = get_related_populators(klass_info, select, using)
        self.col_count = compiler.col_count if compiler.has_extra_select else None
        expressions = [s[0] for s in select[0 : compiler.col_count]]
        self.converters = list(compiler.get_converters(expressions).items())

    def instance(self, row: tuple, connection, using: str) -> Model:
        if self.col_count is not None:
            row = row[: self.col_count]
        if self.converters:
            row = list(row)
            for pos, (convs, expression) in self.converters:
                value = row[pos]
                for converter in convs:
                    value = converter(value, expression, connection)
                row[pos] = value
        obj = self.model.from_db(using, self.init_list, row[self.start : self.end])
        for populator in self.populators:
            populator.populate(row, obj)
        for name, position in self.annotations:
            setattr(obj, name, row[position])
        return obj
