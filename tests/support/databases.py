"""The other databases of the suite: a SQLite file and a MariaDB database per run, never mocks.

`sqlite_committed` and `mariadb_committed` are the `committed` tier of PostgreSQL on
those databases: real commits, visible across connections (and processes), every row
deleted before and after the test. The SQLite file needs no server; MariaDB is the
server at ``--mariadb-url`` / ``$MARIADB_URL`` (default: root on 127.0.0.1:3306, which
`make test` starts when it is down). A run that cannot reach it fails and says so: it
never skips.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, delete, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from sa_jobqueue import migration
from sa_jobqueue.testing import scratch_database
from tests.support.models import APP_TABLES, Base

#: The MariaDB server when no option or environment names one.
DEFAULT_MARIADB_URL = "mariadb+pymysql://root@127.0.0.1:3306/"


def empty_tables(engine: Engine) -> None:
    """Delete every row of the suite's tables (children first), in one transaction."""
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(delete(table))


def sqlite_engine_for(url: str) -> Engine:
    """An engine on the SQLite file `url` as the suite's processes use it: WAL, a busy timeout."""
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: object, _record: object) -> None:
        cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    return engine


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file of this run's own: the jobs table migrated, then the application tables."""
    path: Path = tmp_path_factory.mktemp("sqlite") / "jobs.db"
    url = f"sqlite:///{path}"
    migration.upgrade(url)  # as users make it (PostgreSQL's database_url does the same)
    engine = sqlite_engine_for(url)
    Base.metadata.create_all(engine, tables=APP_TABLES)
    engine.dispose()
    return url


@pytest.fixture(scope="session")
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = sqlite_engine_for(sqlite_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_committed(sqlite_engine: Engine) -> Iterator[Engine]:
    """Real commits on the run's SQLite file; every row deleted before and after."""
    empty_tables(sqlite_engine)
    yield sqlite_engine
    empty_tables(sqlite_engine)


def mariadb_server_url(config: pytest.Config) -> str:
    """The MariaDB server of this run: ``--mariadb-url``, ``$MARIADB_URL``, else the default."""
    given = config.getoption("--mariadb-url", default=None)
    return str(given or os.environ.get("MARIADB_URL") or DEFAULT_MARIADB_URL)


@contextmanager
def mariadb_database(server_url: str, prefix: str = "sajq_test") -> Iterator[str]:
    """A new, empty utf8mb4 database on the MariaDB server `server_url`; dropped afterwards.

    A server that does not answer fails the test in one line saying how to start it.
    """
    server = make_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server.set(database=""), poolclass=NullPool)
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4"))
    except Exception as error:  # noqa: BLE001 (any failure to connect says the same)
        admin.dispose()
        pytest.fail(
            f"no MariaDB at {server.render_as_string(hide_password=True)} ({error}); "
            "start it (`make test` does: start-stop-daemon --start --oknodo --background "
            "--exec /usr/sbin/mariadbd) or give --mariadb-url / $MARIADB_URL",
            pytrace=False,
        )
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        admin.dispose()


@pytest.fixture(scope="session")
def mariadb_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A MariaDB database of this run's own: the jobs table migrated, then the application
    tables; dropped at the end."""
    with mariadb_database(mariadb_server_url(request.config)) as url:
        migration.upgrade(url)
        engine = create_engine(url)
        Base.metadata.create_all(engine, tables=APP_TABLES)
        engine.dispose()
        yield url


#: The databases the suite runs on, as test ids.
DATABASES = ("postgresql", "sqlite", "mariadb")


@contextmanager
def scratch_url(database: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database of `database` (one of `DATABASES`) for one test; removed afterwards.

    For the migration tests, which make and drop schemas of their own: PostgreSQL's is a
    scratch database on the run's server, SQLite's a new file, MariaDB's a new database.
    """
    if database == "sqlite":
        folder = request.getfixturevalue("tmp_path")
        yield f"sqlite:///{folder / f'scratch_{uuid.uuid4().hex[:10]}.db'}"
    elif database == "mariadb":
        with mariadb_database(mariadb_server_url(request.config), "sajq_scratch") as url:
            yield url
    elif database == "postgresql":
        server = request.getfixturevalue("server_url")
        with scratch_database(server, prefix="sa_jobqueue_scratch") as url:
            yield url
    else:
        raise ValueError(f"not one of {DATABASES}: {database!r}")


@pytest.fixture(scope="session")
def mariadb_engine(mariadb_url: str) -> Iterator[Engine]:
    engine = create_engine(mariadb_url, pool_size=10, max_overflow=20)
    yield engine
    engine.dispose()


@pytest.fixture
def mariadb_committed(mariadb_engine: Engine) -> Iterator[Engine]:
    """Real commits on the run's MariaDB database; every row deleted before and after."""
    empty_tables(mariadb_engine)
    yield mariadb_engine
    empty_tables(mariadb_engine)
