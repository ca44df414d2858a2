"""The one line a command prints for a database error (`describe`).

A missing table of the queue is named with the command that adds it, on each database:
PostgreSQL's SQLSTATE 42P01 (``relation "x" does not exist``), SQLite's ``no such
table: x`` and MariaDB's and MySQL's error 1146 (``Table 'db.x' doesn't exist``). Any
other error is the database's own first line. See docs/cli.md.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.exc import DBAPIError

__all__ = ["describe", "missing_table"]


def describe(error: DBAPIError, table: str, engine: Engine | None = None) -> str:
    """One line for `error`, raised while a command worked on the jobs table `table`.

    A missing table of the queue is named, with the command that adds it: the jobs
    table itself when it is missing too (a database never migrated: asked of `engine`,
    when given), else the one the database named (the database reads a statement's
    tables in an order of its own).
    """
    from sqlalchemy import exc

    missing = missing_table(error)
    if missing is not None and (missing == "" or _of_the_queue(missing, table)):
        # A message in a form not read here: the queue's table, as before.
        absent = engine is not None and _has_table(engine, table) is False
        name = table if absent or not missing else missing
        return f"table {name!r} does not exist (run: sa-jobqueue migrate --table {table})"
    first = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else repr(error)
    if isinstance(error, exc.OperationalError):
        return f"cannot reach the database: {first}"
    return f"database error: {first}"


def missing_table(error: DBAPIError) -> str | None:
    """The table a "no such table" error names, on each database; None for another error.

    "" when the message is in a form not read here.
    """
    message = str(error.orig)
    if getattr(error.orig, "sqlstate", None) == "42P01":  # relation "x" does not exist
        found = re.search(r'relation "(?:[^"]+\.)?([^".]+)" does not exist', message)
        return found.group(1) if found else ""
    if message.startswith("no such table: "):  # SQLite: no such table: [main.]x
        return message.removeprefix("no such table: ").split(".")[-1]
    args = getattr(error.orig, "args", ())
    if args and args[0] == 1146:  # MariaDB / MySQL: (1146, "Table 'db.x' doesn't exist")
        found = re.search(r"Table '(?:[^'.]+\.)?([^'.]+)' doesn't exist", str(args[-1]))
        return found.group(1) if found else ""
    return None


def _of_the_queue(name: str, table: str) -> bool:
    """Whether `name` is `table` or one of the tables beside it (``sa_jobqueue_*_<table>``)."""
    return name == table or (name.startswith("sa_jobqueue_") and name.endswith(f"_{table}"))


def _has_table(engine: Engine, table: str) -> bool | None:
    """Whether `table` exists (None: the database cannot say now)."""
    from sqlalchemy import exc, inspect

    try:
        return bool(inspect(engine).has_table(table))
    except exc.SQLAlchemyError:
        return None
