"""SQLAlchemy's private API, the only module that names it, each use beside its public path.

Enqueue's fast paths (docs/enqueue.md#what-enqueue-does) and the migration helpers use a
few private SQLAlchemy attributes. Each one is chosen here once, by a feature test at
import (or, for what only a live connection carries, at the first call), never by catching
an error per call: where SQLAlchemy no longer has it, the public path takes its place, with
the same rows and objects at a higher cost. `public_paths` forces every public path (for
the test that runs both); nothing else in the package names a private SQLAlchemy attribute
(tests/unit/test_sqlalchemy_private.py checks both).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from operator import attrgetter
from typing import Any

from sqlalchemy import Column
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import SADeprecationWarning
from sqlalchemy.orm import Mapper, Session
from sqlalchemy.orm.state import InstanceState

__all__ = [
    "PRIVATE",
    "add_as_loaded",
    "autoflush",
    "check_configure",
    "copy_column",
    "cursor_rows",
    "flushing",
    "json_deserializer",
    "public_paths",
]

_IDENTITY_MAP = type(Session().identity_map)
_PG_DIALECT: Any = postgresql.base.PGDialect

#: What each private use needs, tested once at import: the use's name to whether
#: this SQLAlchemy has it. `cursor_rows` also tests the live connection on first use.
PRIVATE: dict[str, bool] = {
    "cursor_rows": hasattr(Connection, "_cursor_execute") and hasattr(Engine, "_has_events"),
    "flushing": hasattr(Session(), "_flushing"),
    "autoflush": hasattr(Session, "_autoflush"),
    "check_configure": hasattr(Mapper, "_check_configure"),
    "json_deserializer": hasattr(_PG_DIALECT(), "_json_deserializer"),
    "add_as_loaded": (
        hasattr(InstanceState, "_expire_attributes") and hasattr(_IDENTITY_MAP, "_add_unpresent")
    ),
    "copy_column": hasattr(Column, "_copy"),
}


# cursor_rows: a statement's rows from the DBAPI cursor, past the execution context.


def _private_cursor_rows(
    connection: Connection, sql: str, params: Mapping[str, Any], many: bool
) -> Any:
    """`cursor_rows` through ``Connection._cursor_execute``."""
    if (
        connection._has_events
        or connection.engine._has_events
        or "schema_translate_map" in connection._execution_options
    ):
        return NotImplemented
    cursor = connection.connection.cursor()
    try:
        # SQLAlchemy's path for its own special-case statements: echo, the dialect's
        # do_execute hooks and its exception wrapping, without a result object.
        connection._cursor_execute(cursor, sql, params)
        return cursor.fetchall() if many else cursor.fetchone()
    finally:
        cursor.close()


def _public_cursor_rows(
    connection: Connection, sql: str, params: Mapping[str, Any], many: bool
) -> Any:
    """`cursor_rows` without the private API: always NotImplemented."""
    return NotImplemented  # the caller runs its statement through Connection.execute


def _first_cursor_rows(
    connection: Connection, sql: str, params: Mapping[str, Any], many: bool
) -> Any:
    """`cursor_rows` on its first call: what a live connection carries decides the path."""
    global cursor_rows  # chosen once, then called directly
    live = hasattr(connection, "_has_events") and hasattr(connection, "_execution_options")
    cursor_rows = _private_cursor_rows if live else _public_cursor_rows
    return cursor_rows(connection, sql, params, many)


#: ``cursor_rows(connection, sql, params, many)``: the rows (``fetchall`` when `many`, else
#: ``fetchone``) of `sql`, compiled for `connection`'s dialect with nothing to process,
#: run on a cursor of its DBAPI connection as ``Connection._cursor_execute`` runs it.
#: NotImplemented where something could tell the difference from ``Connection.execute``
#: (engine or connection events, a ``schema_translate_map``) and on the public path:
#: the caller then runs its statement through ``Connection.execute``.
cursor_rows: Callable[[Connection, str, Mapping[str, Any], bool], Any]


# flushing: whether the session is inside its flush.


def _public_flushing(session: Session) -> bool:
    """`flushing` without the private API."""
    return True  # unknown: the caller takes the ORM's own path, right in a flush too


#: ``flushing(session)``: whether `session` is inside its flush (``Session._flushing``);
#: True on the public path, which has no way to tell.
flushing: Callable[[Session], bool]


# autoflush: what the ORM does before it runs a statement.


def _public_autoflush(session: Session) -> None:
    """`autoflush` through ``Session.flush``."""
    if session.autoflush:
        session.flush()


#: ``autoflush(session)``: flush `session`'s pending objects when its ``autoflush`` is on,
#: as the ORM does before a statement (``Session._autoflush``). Not inside a flush.
autoflush: Callable[[Session], None]


# check_configure: configure the application's new mappers, a flag check once done.


def _public_check_configure(mapper: Mapper[Any]) -> None:
    """`check_configure` through ``registry.configure``."""
    mapper.registry.configure(cascade=True)


#: ``check_configure(mapper)``: configure what `mapper`'s registry (and those it depends
#: on) declared since the last call, as the ORM does before each statement.
check_configure: Callable[[Mapper[Any]], None]


# json_deserializer: how the dialect decodes JSON text.


def _public_json_deserializer(dialect: Dialect) -> Callable[[Any], Any] | None:
    """`json_deserializer` without the private API: never called."""
    raise NotImplementedError("json_deserializer: ask KNOWS_JSON_DESERIALIZER first")


#: ``json_deserializer(dialect)``: the ``json_deserializer`` `dialect`'s engine was created
#: with (None: the default, ``json.loads``), for JSON the caller gets as text. The public
#: API does not tell it (native JSON dialects decode in the driver): where
#: `KNOWS_JSON_DESERIALIZER` is False, callers let the driver decode (the ORM's path).
json_deserializer: Callable[[Dialect], Callable[[Any], Any] | None]
KNOWS_JSON_DESERIALIZER: bool


# add_as_loaded: a built instance into the session's identity map, as a load puts it.


def _private_add_as_loaded(
    session: Session, job: Any, state: Any, key: Any, unloaded: frozenset[str]
) -> None:
    """`add_as_loaded` as an ORM load does it, past ``Session.add``."""
    # What make_transient_to_detached and then an ORM load do, without Session.add's
    # cascades and events (a load fires none of them). Its _commit_all has nothing to
    # clear: the dict was filled around the attribute events, so there is no history.
    state.key = key
    state.identity_token = None
    if unloaded:  # a relationship of the application's: loads on first use
        state._expire_attributes(state.dict, unloaded)
    state.session_id = session.hash_key
    session.identity_map._add_unpresent(state, key)


def _public_add_as_loaded(
    session: Session, job: Any, state: Any, key: Any, unloaded: frozenset[str]
) -> None:
    """`add_as_loaded` through ``make_transient_to_detached`` and ``Session.add``."""
    from sqlalchemy.orm import make_transient_to_detached

    make_transient_to_detached(job)  # history clear, identity key set, the rest expired
    session.add(job)


#: ``add_as_loaded(session, job, state, key, unloaded)``: the new instance `job` (its
#: ``InstanceState`` `state`, its dict filled) becomes persistent in `session` under
#: identity `key`, as an ORM load leaves it, with the attributes `unloaded` expired; on
#: the public path through ``make_transient_to_detached`` and ``Session.add`` (which
#: runs the session's attach events and cascades).
add_as_loaded: Callable[[Session, Any, Any, Any, frozenset[str]], None]
#: Whether `add_as_loaded` bypasses ``Session.add`` (callers with attach listeners, which
#: must hear of the instance, use the public path when it does).
ADDS_WITHOUT_EVENTS: bool


# copy_column: an unattached copy of a Column, for Alembic's operations.


def _public_copy_column(column: Column[Any]) -> Column[Any]:
    """`copy_column` through ``Column.copy``."""
    with warnings.catch_warnings():
        # Deprecated since 1.4 in favour of the private name: the public one is this.
        warnings.simplefilter("ignore", SADeprecationWarning)
        copied: Column[Any] = column.copy()
    return copied


#: ``copy_column(column)``: a copy of `column` attached to no table (``Column._copy``;
#: on the public path ``Column.copy``, its older name, as Alembic's own helper falls back).
#: For the migration helpers: not on a hot path.
copy_column: Callable[[Column[Any]], Column[Any]]


def _use(public: Collection[str] = ()) -> None:
    """Bind each use to its private path where this SQLAlchemy has it and not in `public`."""
    global cursor_rows, flushing, autoflush, check_configure
    global json_deserializer, KNOWS_JSON_DESERIALIZER, add_as_loaded, ADDS_WITHOUT_EVENTS
    global copy_column
    on = {name: found and name not in public for name, found in PRIVATE.items()}
    cursor_rows = _first_cursor_rows if on["cursor_rows"] else _public_cursor_rows
    flushing = attrgetter("_flushing") if on["flushing"] else _public_flushing
    autoflush = Session._autoflush if on["autoflush"] else _public_autoflush
    check_configure = Mapper._check_configure if on["check_configure"] else _public_check_configure
    json_deserializer = (
        attrgetter("_json_deserializer") if on["json_deserializer"] else _public_json_deserializer
    )
    KNOWS_JSON_DESERIALIZER = on["json_deserializer"]
    add_as_loaded = _private_add_as_loaded if on["add_as_loaded"] else _public_add_as_loaded
    ADDS_WITHOUT_EVENTS = on["add_as_loaded"]
    copy_column = Column._copy if on["copy_column"] else _public_copy_column


_use()


@contextmanager
def public_paths(*names: str) -> Iterator[None]:
    """The uses `names` (all by default) on their public paths inside the block, for tests.

    As on a SQLAlchemy without them. Not thread-safe: it rebinds this module's
    functions for the whole process.
    """
    unknown = set(names) - set(PRIVATE)
    if unknown:
        raise ValueError(f"no such use: {sorted(unknown)}; the uses are {sorted(PRIVATE)}")
    _use(names or tuple(PRIVATE))
    try:
        yield
    finally:
        _use()
