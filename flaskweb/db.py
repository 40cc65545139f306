"""Leaf helpers shared by every app (imports no app)."""

import json
import operator
from collections.abc import Callable
from datetime import UTC
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.utils.dateparse import parse_datetime


class TimestampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        abstract = True


def is_postgres(conn=None) -> bool:
    return (conn or connections[DEFAULT_DB_ALIAS]).vendor == "postgresql"


# --- raw SQL on hot paths --------------------------------------------------------------------
#
# Building a query with the ORM costs about 0.4 ms of Python per statement on the 2-core
# development machine (a raw statement: about 0.07 ms). The annotation hot path (claim and
# submit, a few hundred per second) therefore runs fixed SQL through these helpers. Where
# the two databases need different SQL, each vendor's statements live in a module of their
# own (annotation/services/hot_path_postgres.py and hot_path_sqlite.py).


def _cursor():
    """A cursor for fixed SQL. On PostgreSQL with DATABASE_PREPARED_STATEMENTS (the one
    prepared-statement setting, on by default) it binds parameters on the server, so psycopg
    prepares each statement on a connection after its fifth run and PostgreSQL stops parsing
    and planning it (measured with pgbench: claim state 0.36 -> 0.13 ms, slot + lease 0.41 ->
    0.24 ms); with it off, the same statements run with Django's client-side binding, as the
    ORM's always do. Wrapped like Django's own cursors: errors, query logging and the health
    check behave the same. (The helpers below run the common case on a bare cursor:
    `_bare_connection`.)"""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql" or not settings.DATABASE_PREPARED_STATEMENTS:
        return conn.cursor()
    conn.close_if_health_check_failed()
    conn.ensure_connection()
    with conn.wrap_database_errors:
        raw = psycopg.Cursor(conn.connection)
        conn.validate_thread_sharing()
        if conn.queries_logged:
            return _DebugCursor(raw, conn)
        return conn.make_cursor(raw)


class _DebugCursor(CursorDebugWrapper):
    """Django's query log (DEBUG, CaptureQueriesContext) for the fixed SQL: psycopg keeps no
    query text for the run of a prepared statement (Django would log None), so the statement
    is logged as written, with its %s placeholders."""

    def execute(self, sql, params=None):
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


def _bare_connection():
    """The thread's connection, checked as Django checks it before a statement, when the
    statement may run on a bare psycopg cursor (server-side binding, errors wrapped as
    Django's): PostgreSQL with DATABASE_PREPARED_STATEMENTS, no query log (DEBUG,
    CaptureQueriesContext) and no execute wrapper (`connection.execute_wrapper`). None
    otherwise: then `_cursor` gives Django's own cursor wrapper, which serves those.

    Through Django's cursor wrapper a statement cost about 166,000 instructions (callgrind),
    psycopg's own cursor, execute and fetch about 98,000; this way, with the connection's
    reused cursor, about 106,000. The hot path runs six statements per next + submit cycle
    (bench/README.md "Hot-path CPU"). The thread's connection is looked up once: each
    attribute read through Django's `connection` proxy looks it up again."""
    conn = connections[DEFAULT_DB_ALIAS]
    if (
        conn.vendor != "postgresql"
        or not settings.DATABASE_PREPARED_STATEMENTS
        or conn.queries_logged
        or conn.execute_wrappers
    ):
        return None
    conn.close_if_health_check_failed()
    conn.ensure_connection()
    conn.validate_thread_sharing()
    conn.validate_no_broken_transaction()
    return conn


def _statement_cursor(conn) -> psycopg.Cursor:
    """The connection's reusable cursor (flaskweb/postgresql/base.py), or a new one on
    Django's own PostgreSQL backend."""
    reuse = getattr(conn, "statement_cursor", None)
    return reuse() if reuse is not None else psycopg.Cursor(conn.connection)


def _run(sql: str, params, read: Callable[[Any], Any]) -> Any:
    """Run one fixed statement and `read` its cursor: on a bare psycopg cursor when nothing
    needs Django's wrapper (_bare_connection), else on Django's."""
    conn = _bare_connection()
    if conn is None:
        with _cursor() as cursor:
            cursor.execute(sql, params)
            return read(cursor)
    with conn.wrap_database_errors:
        raw = _statement_cursor(conn)
        raw.execute(sql, params)
        return read(raw)


_ONE = operator.methodcaller("fetchone")
_ALL = operator.methodcaller("fetchall")
_ROWCOUNT = operator.attrgetter("rowcount")


def fetch_one(sql: str, params=()) -> tuple | None:
    return _run(sql, params, _ONE)


def fetch_all(sql: str, params=()) -> list[tuple]:
    return _run(sql, params, _ALL)


def execute(sql: str, params=()) -> int:
    """Run one statement; returns the number of rows it changed."""
    return _run(sql, params, _ROWCOUNT)


def db_datetime(value):
    """A timezone-aware datetime as the backend stores it (SQLite: naive UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def aware(value):
    """A datetime read by a raw statement, made aware (SQLite returns naive UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def json_value(value):
    """A JSON column read by a raw statement (both backends hand the text to Django)."""
    if isinstance(value, (str, bytes, bytearray)):
        return json.loads(value)
    return value


def instance_from(model, fields: dict):
    """A model instance from values a raw statement read, keyed by attname (`task_id`);
    fields not given are deferred and load on first access. (Model.from_db expects the
    values in the model's field order; this puts them there, every concrete field's slot
    filled, the missing ones with DEFERRED as from_db would fill them.)"""
    key = (model, *fields)
    layout = _layouts.get(key)
    if layout is None:
        layout = _layouts[key] = _layout(model, fields)
    attnames, slots = layout
    values = [models.DEFERRED] * len(attnames)
    for slot, value in zip(slots, fields.values(), strict=True):
        values[slot] = value
    return model.from_db("default", attnames, values)


#: (model, the attnames given, in order) -> (every concrete field's attname, the slot of
#: each given one). A hot path builds the same few shapes (bench/README.md "Hot-path CPU").
_layouts: dict[tuple, tuple[list[str], list[int]]] = {}


def _layout(model, fields: dict) -> tuple[list[str], list[int]]:
    attnames = [f.attname for f in model._meta.concrete_fields]
    unknown = set(fields) - set(attnames)
    if unknown:
        raise ValueError(f"{model.__name__} has no field {sorted(unknown)}")
    return attnames, [attnames.index(name) for name in fields]


class ModelRow:
    """A model's whole row read by fixed SQL, made into an instance as the ORM makes it.

    `columns` lists every concrete column under the statement's alias for the model
    (`c.id, c.created_at, …`); `instance(values)` takes those values, in that order, through
    the converters the ORM's compiler would apply (the backend's and each field's
    `from_db_value`: SQLite's text datetimes and integer booleans, JSON text, decimals) and
    returns `Model.from_db`'s instance, nothing deferred. For a hot path that needs a full
    model instance joined to others, where building the ORM query costs more than running
    it (bench/README.md "The participants' page path in process")."""

    def __init__(self, model: type[models.Model], alias: str) -> None:
        self.model = model
        self.alias = alias
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [f.attname for f in self.fields]
        self._converters: list[tuple[int, list, Any]] | None = None

    @property
    def columns(self) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{self.alias}.{quote(f.column)}" for f in self.fields)

    def _converters_get(self) -> list[tuple[int, list, Any]]:
        if self._converters is None:
            conn = connections[DEFAULT_DB_ALIAS]
            found = []
            for slot, field in enumerate(self.fields):
                col = field.get_col(self.alias)
                funcs = conn.ops.get_db_converters(col) + col.get_db_converters(conn)
                if funcs:
                    found.append((slot, funcs, col))
            self._converters = found
        return self._converters

    def instance(self, values) -> models.Model:
        row = list(values)
        if len(row) != len(self.fields):
            raise ValueError(f"{self.model.__name__}: {len(row)} values for {len(self.fields)}")
        conn = connections[DEFAULT_DB_ALIAS]
        for slot, funcs, col in self._converters_get():
            value = row[slot]
            for convert in funcs:
                value = convert(value, col, conn)
            row[slot] = value
        return self.model.from_db(DEFAULT_DB_ALIAS, self.attnames, row)

    def __len__(self) -> int:
        return len(self.fields)
