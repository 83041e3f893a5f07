"""Fixed-shape queries of the decision hot path, compiled once per database connection.

Django compiles a queryset's SQL again on every evaluation, which for the token lookup and the
task lock cost more than the statement itself. A `Prepared` query is compiled once per
connection with marker values in its parameter slots and then run with each request's values
in those slots: the very SQL the queryset compiles (a test compares them), rows as the
queryset's model instances, through the connection's cursor like any other statement.

Below the models: it imports only Django (and `agents.db.timestamps`' loader lookup).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, DataError, connections, transaction
from django.db.models import Field, Model, Q, QuerySet, signals
from django.db.models.query import get_related_populators
from django.db.models.sql import InsertQuery, UpdateQuery
from django.db.transaction import TransactionManagementError
from django.utils.functional import cached_property

from agents.db.timestamps import timestamp_loader

# psycopg prepares a statement only when its connection has a threshold; Django leaves it unset
# (None: never). The hot path's cursors ask for preparing on every statement, so a threshold no
# other statement reaches lets them do it without preparing anything else.
_ONLY_WHEN_ASKED = 2**31 - 1


def hot_cursor(using: str = "default") -> Any:
    """A cursor for the hot path's fixed-shape statements: on PostgreSQL with persistent
    connections (`DB_CONN_MAX_AGE` not 0) and `DB_PREPARED_STATEMENTS` on, one that binds its
    parameters on the server and runs each statement as a prepared statement (parsed and
    planned once per connection, then only executed); anywhere else `connection.cursor()`.

    Either way the cursor is Django's wrapper of the connection's driver cursor: execute
    wrappers, query logging, error translation and statement counts see its statements.
    Only for statements whose SQL is the same on every call (their values are parameters).
    """
    connection = connections[using]
    if not _prepares(connection):
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = _ONLY_WHEN_ASKED
        cursor = _preparing_cursor_class()(raw)
        if _timezone_differs(connection, raw):
            # What Django's `create_cursor` does for its own cursors in that case.
            from django.db.backends.postgresql.psycopg_any import register_tzloader

            register_tzloader(connection.timezone, cursor)
        return connection._prepare_cursor(cursor)


_TIMEZONES = threading.local()


def _timezone_differs(connection, raw) -> bool:
    """Whether the connection's timestamp loader disagrees with Django's time zone, asked once
    per driver connection (both are set when the connection opens)."""
    known = getattr(_TIMEZONES, "known", None)
    if known is None or known[0] is not raw:
        tzloader = timestamp_loader(raw.adapters)
        known = _TIMEZONES.known = (raw, connection.timezone != tzloader.timezone)
    return known[1]


def _prepares(connection) -> bool:
    return (
        connection.vendor == "postgresql"
        and getattr(settings, "DB_PREPARED_STATEMENTS", True)
        and connection.settings_dict.get("CONN_MAX_AGE") != 0
    )


_PREPARING_CURSOR: Any = None


def _preparing_cursor_class() -> Any:
    """Django's server-binding cursor class, asking psycopg to prepare what it executes."""
    global _PREPARING_CURSOR
    if _PREPARING_CURSOR is None:
        from django.db.backends.postgresql.base import ServerBindingCursor

        class PreparingCursor(ServerBindingCursor):
            def execute(self, query, params=None, *, prepare=None, binary=None):
                done = super().execute(query, params, prepare=prepare is not False, binary=binary)
                # A prepared execution leaves no query text where Django's query log reads it
                # (`last_executed_query`): give it the statement with its values, composed as
                # a client-side cursor would have sent it, and only if it is read.
                self._query = _Sent(self.connection, query, params)
                return done

        _PREPARING_CURSOR = PreparingCursor
    return _PREPARING_CURSOR


class _Sent:
    def __init__(self, connection: Any, sql: str, params: Any) -> None:
        self._connection, self._sql, self._params = connection, sql, params

    @cached_property
    def query(self) -> bytes:
        from psycopg import ClientCursor

        return ClientCursor(self._connection).mogrify(self._sql, self._params).encode()


class Prepared:
    """`build(**markers)` returns the queryset, its final shape (ordering, limit) included;
    `slots` names each value it filters on and the model field that value is compared with.
    A queryset that selects no model reads plain tuples."""

    def __init__(self, build: Callable[..., QuerySet], slots: dict[str, tuple[Field, Any]]) -> None:
        self.build = build
        self.slots = slots  # name -> (field, marker value)
        self._compiled = threading.local()

    def rows(self, using: str = "default", **values: Any) -> list[Any]:
        """The queryset's instances for `values` (each converted as the field's exact lookup
        converts it: a value the field refuses raises as it would there)."""
        connection = connections[using]
        compiled = self._compiled_for(using, connection)
        params = self._params(compiled, connection, values)
        if compiled.locks and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        with hot_cursor(using) as cursor:
            cursor.execute(compiled.sql, params)
            fetched = cursor.fetchall()
        return [compiled.instance(row, connection, using) for row in fetched]

    def compiled_sql(self, using: str = "default", **values: Any) -> tuple[str, list[Any]]:
        """What `rows` sends for `values` (for the test that compares it with Django's)."""
        connection = connections[using]
        compiled = self._compiled_for(using, connection)
        return compiled.sql, self._params(compiled, connection, values)

    def _params(self, compiled: _Compiled, connection: Any, values: dict[str, Any]) -> list[Any]:
        """The compiled parameters with each request value in its marker's slot."""
        params = list(compiled.params)
        for name, position in compiled.positions.items():
            field = self.slots[name][0]
            params[position] = field.get_db_prep_value(
                field.get_prep_value(values[name]), connection, prepared=True
            )
        return params

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
        self.model = klass_info["model"] if klass_info else None  # None: rows are tuples
        if klass_info:
            fields = klass_info["select_fields"]
            self.start, self.end = fields[0], fields[-1] + 1
            self.init_list = [f[0].target.attname for f in select[self.start : self.end]]
            self.populators = get_related_populators(klass_info, select, using)
        self.col_count = compiler.col_count if compiler.has_extra_select else None
        expressions = [s[0] for s in select[0 : compiler.col_count]]
        self.converters = list(compiler.get_converters(expressions).items())

    def instance(self, row: tuple, connection, using: str) -> Any:
        if self.col_count is not None:
            row = row[: self.col_count]
        if self.converters:
            row = list(row)
            for pos, (convs, expression) in self.converters:
                value = row[pos]
                for converter in convs:
                    value = converter(value, expression, connection)
                row[pos] = value
        if self.model is None:
            return tuple(row)
        obj = self.model.from_db(using, self.init_list, row[self.start : self.end])
        for populator in self.populators:
            populator.populate(row, obj)
        for name, position in self.annotations:
            setattr(obj, name, row[position])
        return obj


def _per_connection(store: threading.local, using: str, connection: Any) -> dict[Any, Any]:
    """This thread's cache in `store` for the alias `using`, emptied when the alias's
    connection object changed (statements are compiled for one connection)."""
    cache = store.__dict__.setdefault(using, {})
    if cache.get("connection") is not connection:
        cache.clear()
        cache["connection"] = connection
    return cache


def _values_sent(
    obj: Model, fields: list[Field], connection: Any, *, adding: bool
) -> tuple[list[Any], list[Any]] | None:
    """Each field's value as the save takes it (`pre_save`) and as it is sent, in one pass; None
    when one of them is the save's own to write: an expression, SQL of a field's own, or, in an
    UPDATE, a model instance (Django's UPDATE asks it for its value; its INSERT does not)."""
    values, sent = [], []
    for f in fields:
        value = f.pre_save(obj, adding)
        if hasattr(value, "resolve_expression") or (
            not adding and hasattr(value, "prepare_database_save")
        ):
            return None
        prepared = f.get_db_prep_save(value, connection=connection)
        if hasattr(prepared, "as_sql"):
            return None
        values.append(value)
        sent.append(prepared)
    return values, sent


_UPDATES = threading.local()
# The fields of each (model, set of names) an update names, and their columns' names, found once.
_UPDATE_FIELDS: dict[tuple[type[Model], frozenset[str]], tuple[list[Field], tuple[str, ...]]] = {}


def save_columns(obj: Model, update_fields: list[str], using: str = "default") -> None:
    """`obj.save(update_fields=update_fields)`, the same UPDATE, without rebuilding and
    compiling its query: the statement of each shape (the columns, and which of them are
    NULL) is compiled by Django once per connection and run with the row's values.

    Only for what that save would do by itself: a model with parents, signal receivers, or a
    value that is an expression or a model instance is saved by `save` itself.
    """
    model = type(obj)
    meta = model._meta
    if (
        meta.parents
        or signals.pre_save.has_listeners(model)
        or signals.post_save.has_listeners(model)
    ):
        obj.save(update_fields=update_fields, using=using)
        return
    names = frozenset(update_fields)
    found = _UPDATE_FIELDS.get((model, names))
    if found is None:
        named = [
            f
            for f in meta.local_concrete_fields
            if not f.primary_key and not f.generated and (f.name in names or f.attname in names)
        ]
        found = _UPDATE_FIELDS[model, names] = (named, tuple(f.attname for f in named))
    fields, attnames = found
    if len(fields) != len(names):  # an unknown name: save() says which
        obj.save(update_fields=update_fields, using=using)
        return
    connection = connections[using]
    taken = _values_sent(obj, fields, connection, adding=False)
    if taken is None:
        obj.save(update_fields=update_fields, using=using)
        return
    values, prepped = taken
    shape = (model, attnames, tuple(v is None for v in prepped))
    cache = _per_connection(_UPDATES, using, connection)
    sql = cache.get(shape)
    pk = meta.pk
    if sql is None:
        query = UpdateQuery(model)
        query.add_update_fields([(f, None, v) for f, v in zip(fields, values, strict=True)])
        query.add_q(Q(pk=obj.pk))
        sql, params = query.get_compiler(using).as_sql()
        if len(params) != sum(v is not None for v in prepped) + 1:  # not the expected shape
            obj.save(update_fields=update_fields, using=using)
            return
        cache[shape] = sql
    params = [v for v in prepped if v is not None]
    params.append(pk.get_db_prep_value(pk.get_prep_value(obj.pk), connection, prepared=True))
    obj._state.db = using
    obj._state.adding = False
    # Kept for later, the statement itself checks the count: a division by zero unless it
    # updated one row aborts it (and the transaction) before anything commits.
    if _later(using, _Write(sql + " RETURNING 1", params, "1 / (count(*) = 1)::int", _ignore)):
        return
    with transaction.mark_for_rollback_on_error(using), hot_cursor(using) as cursor:
        cursor.execute(sql, params)
        updated = cursor.rowcount
    _one_row_updated(updated)


def _ignore(_value: Any) -> None:
    pass


_NO_ROW_UPDATED = "Save with update_fields did not affect any rows."  # Django's own words


def _one_row_updated(updated: int) -> None:
    if not updated:
        raise DatabaseError(_NO_ROW_UPDATED)


_INSERTS = threading.local()
# The fields an INSERT writes, per model, and whether any of them has its own placeholder.
_INSERT_FIELDS: dict[type[Model], tuple[list[Field], bool]] = {}


def insert_row(obj: Model, using: str = "default") -> None:
    """`obj.save()` of a new row (its id from the database, or set already: a UUID primary key
    with a default), the same INSERT, without rebuilding and compiling its query: the statement
    is compiled by Django once per model and connection and run with the row's values. As
    `save_columns`, only for what that save would do by itself; anything else is saved by
    `save`."""
    model = type(obj)
    meta = model._meta
    auto = meta.auto_field
    # What the INSERT reads back: not a generated column (the database computes it on every
    # write; an instance that reads it loads it, as a deferred field).
    returning = [f for f in meta.db_returning_fields if not f.generated]
    # The key comes from the database (an auto field not set yet), or was set before the INSERT
    # and the database fills in nothing else that is read back.
    keyed = (
        getattr(obj, auto.attname) is None
        if auto is not None
        else obj.pk is not None and not returning
    )
    if (
        meta.parents
        or meta.order_with_respect_to
        or not obj._state.adding
        or not keyed
        or signals.pre_save.has_listeners(model)
        or signals.post_save.has_listeners(model)
    ):
        obj.save(using=using)
        return
    obj._prepare_related_fields_for_save(operation_name="save")
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert:
        obj.save(using=using)
        return
    found = _INSERT_FIELDS.get(model)
    if found is None:
        written = [f for f in meta.local_concrete_fields if not f.generated and f is not auto]
        # A field with its own placeholder (SQL around its value) is Django's to insert.
        found = _INSERT_FIELDS[model] = (
            written,
            any(hasattr(f, "get_placeholder") for f in written),
        )
    fields, placeholders = found
    if placeholders:
        obj.save(using=using)
        return
    taken = _values_sent(obj, fields, connection, adding=True)
    if taken is None:
        obj.save(using=using)
        return
    params = taken[1]
    cache = _per_connection(_INSERTS, using, connection)
    compiled = cache.get(model)
    if compiled is None:
        query = InsertQuery(model)
        query.insert_values(fields, [obj])
        compiler = query.get_compiler(using=using)
        compiler.returning_fields = returning
        ((sql, django_params),) = compiler.as_sql()
        if len(django_params) != len(params) or compiler.returning_params:
            obj.save(using=using)
            return
        cols = [f.get_col(meta.db_table) for f in returning]
        compiled = cache[model] = (sql, list(compiler.get_converters(cols).items()))
    sql, converters = compiled

    def returned(row: list[Any]) -> None:
        for position, (convs, expression) in converters:
            for converter in convs:
                row[position] = converter(row[position], expression, connection)
        for value, field in zip(row, returning, strict=True):
            setattr(obj, field.attname, value)
        obj._state.db = using
        obj._state.adding = False

    if not returning:  # the key was set before the INSERT: nothing comes back
        if _later(using, _Write(sql + " RETURNING 1", params, "count(*)",
                                lambda _count: returned([]))):  # fmt: skip
            return
        with transaction.mark_for_rollback_on_error(using), hot_cursor(using) as cursor:
            cursor.execute(sql, params)
        returned([])
        return
    if len(returning) == 1 and _later(
        using,
        _Write(sql, params, connection.ops.quote_name(returning[0].column),
               lambda value: returned([value])),
    ):  # fmt: skip
        return
    with transaction.mark_for_rollback_on_error(using), hot_cursor(using) as cursor:
        cursor.execute(sql, params)
        returned(list(connection.ops.fetch_returned_insert_columns(cursor, ())))


# -- writes sent together ------------------------------------------------------------------------


@dataclass
class _Write:
    """A write statement kept for later: `sql` (with RETURNING), its `params`, what its part
    of the combined statement answers (`pick`: an expression over its returned rows), and what
    to do with that answer (`done`)."""

    sql: str
    params: list[Any]
    pick: str
    done: Callable[[Any], None]


_BATCHES = threading.local()
_NOT_ONE_ROW = "22012"  # division_by_zero: a kept save's count check (see save_columns)


@contextmanager
def writes_together(using: str = "default") -> Iterator[None]:
    """Within it, on PostgreSQL, the writes whose answer the caller does not need at once
    (`insert_row`'s new id, `save_columns`' row count, `write_later`) wait, and go to the
    database as one statement (a WITH of each write, PostgreSQL's data-modifying CTEs) when
    the block ends, or before any other statement the connection runs meanwhile: the order of
    statements is kept, one round trip does the work of several. Their answers are checked as
    each write's own would be (a save that updated no row raises), inside the statement.

    For writes on different rows (PostgreSQL applies the parts of one statement in no set
    order), inside the transaction that holds the rows' locks. An error leaves nothing
    pending: the transaction rolls back and the kept writes are dropped. Anywhere else (SQLite,
    or nested in another such block) it changes nothing.
    """
    connection = connections[using]
    batches = _BATCHES.__dict__.setdefault(using, [])
    if connection.vendor != "postgresql" or batches:
        yield
        return
    batch: list[_Write] = []
    batches.append(batch)
    flushing = False

    def send_kept_first(execute, sql, params, many, context):
        nonlocal flushing
        if batch and not flushing:
            flushing = True
            try:
                _send(using, batch)
            finally:
                flushing = False
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(send_kept_first):
            yield
            if batch:
                flushing = True
                _send(using, batch)
    finally:
        batches.pop()


@contextmanager
def decision_transaction(using: str = "default") -> Iterator[None]:
    """`transaction.atomic()` for one decision, its closing writes kept together
    (`writes_together`) and sent just before the COMMIT."""
    with transaction.atomic(using=using), writes_together(using):
        yield


def update_rows(queryset: QuerySet, **values: Any) -> None:
    """`queryset.update(**values)`, kept for the enclosing `writes_together` block when there is
    one (the caller does not read how many rows it updated); anywhere else, run now. The same
    UPDATE either way: Django compiles it."""
    using = queryset.db
    if not getattr(_BATCHES, using, None) or queryset.query.is_sliced:
        queryset.update(**values)
        return
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.annotations = {}
    compiler = query.get_compiler(using)
    sql, params = compiler.as_sql()
    if not sql or query.related_updates:  # nothing to set, or parents' rows too: Django's road
        queryset.update(**values)
        return
    write_later(using, sql + " RETURNING 1", list(params))


def write_later(using: str, sql: str, params: list[Any]) -> bool:
    """Keep a write (SQL with a RETURNING clause) for the enclosing `writes_together` block; its
    answer is not read. False when there is no such block: the caller runs it now."""
    return _later(using, _Write(sql, params, "1", _ignore))


def _later(using: str, write: _Write) -> bool:
    batches = getattr(_BATCHES, using, None)
    if not batches:
        return False
    batches[-1].append(write)
    return True


def _send(using: str, batch: list[_Write]) -> None:
    writes = list(batch)
    batch.clear()
    parts = ", ".join(f'"lw{i}" AS ({w.sql})' for i, w in enumerate(writes))
    picks = ", ".join(f'(SELECT {w.pick} FROM "lw{i}")' for i, w in enumerate(writes))
    sql = f"WITH {parts} SELECT {picks}"
    params: list[Any] = []
    for w in writes:
        params += w.params
    try:
        with transaction.mark_for_rollback_on_error(using), hot_cursor(using) as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
    except DataError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == _NOT_ONE_ROW:
            raise DatabaseError(_NO_ROW_UPDATED) from exc
        raise
    for write, value in zip(writes, row, strict=True):
        write.done(value)
