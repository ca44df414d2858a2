"""From a database URL to the arguments of an engine: driver checks, prepared statements.

How the command line and `sa_jobqueue.migration` open their engines, in one place:
``prepare_threshold`` in the URL becomes psycopg's connect argument, drivers are checked
where the URL enters, and no error repeats the URL. See docs/pgbouncer.md and docs/cli.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sa_jobqueue.errors import ConfigurationError

if TYPE_CHECKING:
    from sqlalchemy import URL

# SQLAlchemy is imported by the functions that use it, not here: the command line
# imports this module for `NO_PREPARE_ENVVAR` before it knows it needs SQLAlchemy
# (``sa-jobqueue --version`` never does).

__all__ = [
    "NO_PREPARE_ENVVAR",
    "check_sync_url",
    "engine_arguments",
    "listen_url_of",
    "parse_url",
    "sqlite_in_memory",
    "sync_example",
]

#: Set to ``1`` to turn prepared statements off for every ``sa-jobqueue`` command.
NO_PREPARE_ENVVAR = "SA_JOBQUEUE_NO_PREPARED_STATEMENTS"

_PSYCOPG = "postgresql+psycopg://user@host/db"
#: A synchronous URL to suggest, by backend.
_SYNC_EXAMPLES = {
    "postgresql": _PSYCOPG,
    "sqlite": "sqlite:///path/to/app.db",
    "mysql": "mysql+pymysql://user@host/db",
    "mariadb": "mariadb+pymysql://user@host/db",
}
_NONE = {"none", "null", "off", ""}


def parse_url(url: str | URL) -> URL:
    """`url` as a SQLAlchemy `URL`, or a `ConfigurationError` that does not repeat it."""
    from sqlalchemy import URL, make_url
    from sqlalchemy.exc import ArgumentError

    if isinstance(url, URL):
        return url
    try:
        return make_url(url)
    except ArgumentError:
        raise ConfigurationError(
            f"the database URL is not a SQLAlchemy URL (expected e.g. {_PSYCOPG})"
        ) from None


def _threshold(raw: Any) -> int | None:
    value = raw[-1] if isinstance(raw, tuple) else raw
    if str(value).strip().lower() in _NONE:
        return None
    try:
        number = int(str(value))
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigurationError(
            f"prepare_threshold in the database URL must be None (no prepared statements) "
            f"or a whole number >= 0, not {value!r}"
        )
    return number


def engine_arguments(
    url: str | URL, *, prepared_statements: bool = True
) -> tuple[URL, dict[str, Any]]:
    """Split `url` into the URL to give `create_engine` and its ``connect_args``.

    Args:
        url: a SQLAlchemy URL; a ``prepare_threshold`` query value is taken out of
            it and passed to psycopg as a number (or None).
        prepared_statements: False turns psycopg's server-side prepared
            statements off (``prepare_threshold=None``), whatever the URL says.

    Raises:
        ConfigurationError: the URL does not parse, or its ``prepare_threshold``
            is neither None nor a number.
    """
    parsed = parse_url(url)
    query = dict(parsed.query)
    connect_args: dict[str, Any] = {}
    if "prepare_threshold" in query:
        connect_args["prepare_threshold"] = _threshold(query.pop("prepare_threshold"))
        parsed = parsed.set(query=query)
    if not prepared_statements and _driver(parsed) == "psycopg":
        connect_args["prepare_threshold"] = None
    return parsed, connect_args


def _driver(url: URL) -> str:
    from sqlalchemy.exc import NoSuchModuleError

    try:
        return str(url.get_dialect().driver)
    except NoSuchModuleError:
        return url.get_driver_name()


def check_sync_url(url: URL) -> None:
    """Refuse an asyncio driver: the command line talks to the database synchronously."""
    from sqlalchemy.exc import NoSuchModuleError

    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        raise ConfigurationError(
            f"the database URL names an unknown dialect or driver "
            f"{url.drivername!r} (use {_PSYCOPG})"
        ) from None
    if getattr(dialect, "is_async", False):
        raise ConfigurationError(
            f"{url.drivername}:// is an asyncio driver; sa-jobqueue commands need a "
            f"synchronous one: use {sync_example(url)}"
        )
    if sqlite_in_memory(url):
        raise ConfigurationError(
            "sqlite:// is an in-memory database that only one connection sees; "
            "sa-jobqueue commands need a file: use sqlite:///path/to/app.db"
        )


def sync_example(url: URL) -> str:
    """A synchronous URL of `url`'s database to suggest in a message."""
    return _SYNC_EXAMPLES.get(url.get_backend_name(), _PSYCOPG)


def sqlite_in_memory(url: URL) -> bool:
    """Whether `url` is a SQLite database in memory (seen by one connection only).

    >>> from sqlalchemy import make_url
    >>> [sqlite_in_memory(make_url(u)) for u in ("sqlite://", "sqlite:///app.db")]
    [True, False]
    """
    if url.get_backend_name() != "sqlite":
        return False
    database = url.database or ""
    if database in ("", ":memory:"):
        return True
    return url.query.get("mode") == "memory" or (
        database.startswith("file:") and "mode=memory" in database
    )


def listen_url_of(url: object) -> URL | None:
    """A worker's ``listen_url`` checked: None, or a psycopg 3 PostgreSQL `URL`.

    ``prepare_threshold`` in its query is dropped: the listener runs no
    statement often enough to prepare it.

    Raises:
        ConfigurationError: not a URL, or not ``postgresql+psycopg://``.
    """
    from sqlalchemy import URL

    if url is None:
        return None
    if not isinstance(url, (str, URL)):
        raise ConfigurationError(f"listen_url must be a URL (str or URL), not {type(url).__name__}")
    parsed, _ = engine_arguments(url)
    if parsed.get_backend_name() != "postgresql" or _driver(parsed) != "psycopg":
        raise ConfigurationError(
            f"listen_url must be PostgreSQL through psycopg 3 ({_PSYCOPG}), "
            f"not {parsed.drivername}://"
        )
    return parsed
