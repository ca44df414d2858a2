"""pytest fixtures for applications that use sa-jobqueue: a real PostgreSQL, two tiers.

Loaded through the ``pytest11`` entry point ``sa_jobqueue`` (``-p no:sa_jobqueue`` turns it
off); it only registers the ``jobqueue_*`` fixtures and ``--jobqueue-database-url``, and
connects nowhere until a test asks for a fixture. See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sqlalchemy import Engine, MetaData, Table
    from sqlalchemy.orm import Session

    from sa_jobqueue.jobqueue import JobQueue
    from sa_jobqueue.testing.on_commit import RunOnCommit

__all__ = [
    "jobqueue",
    "jobqueue_committed",
    "jobqueue_database_url",
    "jobqueue_engine",
    "jobqueue_migrate",
    "jobqueue_run_on_commit",
    "jobqueue_server_url",
    "jobqueue_session",
    "jobqueue_tables",
]

OPTION = "--jobqueue-database-url"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--jobqueue-database-url``."""
    group = parser.getgroup("sa_jobqueue", "sa-jobqueue test database")
    group.addoption(
        OPTION,
        default=None,
        metavar="URL",
        help="PostgreSQL server the jobqueue_* fixtures create their scratch database on "
        "(default: --database-url if the project defines it, $DATABASE_URL, "
        "else a throwaway server)",
    )


def configured_url(config: pytest.Config) -> str | None:
    """The server URL the options or the environment name, or None (make a throwaway one)."""
    given = config.getoption(OPTION) or config.getoption("--database-url", default=None)
    return str(given) if given else os.environ.get("DATABASE_URL") or None


@pytest.fixture(scope="session")
def jobqueue_server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A PostgreSQL server URL for the whole run (see the module's docstring)."""
    url = configured_url(request.config)
    if url:
        yield url
        return
    from sa_jobqueue.testing import NoPostgresError, throwaway_postgres

    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_postgres())
        except NoPostgresError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


@pytest.fixture(scope="session")
def jobqueue_migrate() -> Callable[[str], object]:
    """How the scratch database gets its jobs table; override to run your own migrations.

    Default: the shipped migration for a table named ``jobs``.
    """
    from sa_jobqueue import migration

    return migration.upgrade


@pytest.fixture(scope="session")
def jobqueue_tables() -> MetaData | Sequence[Table] | None:
    """The application's tables, created after the migration; override it (default: none)."""
    return None


@pytest.fixture(scope="session")
def jobqueue_database_url(
    jobqueue_server_url: str,
    jobqueue_migrate: Callable[[str], object],
    jobqueue_tables: MetaData | Sequence[Table] | None,
) -> Iterator[str]:
    """A migrated database of this run's own, dropped at the end of the run."""
    from sa_jobqueue.testing import scratch_database
    from sa_jobqueue.testing.database import prepare_database

    with scratch_database(jobqueue_server_url, prefix="sa_jobqueue_test") as url:
        prepare_database(url, migrate=jobqueue_migrate, tables=jobqueue_tables)
        yield url


@pytest.fixture(scope="session")
def jobqueue_engine(jobqueue_database_url: str) -> Iterator[Engine]:
    """An engine on the scratch database; its pool fits a worker of several threads."""
    from sqlalchemy import create_engine

    engine = create_engine(jobqueue_database_url, pool_size=10, max_overflow=20)
    yield engine
    engine.dispose()


@pytest.fixture
def jobqueue_session(jobqueue_engine: Engine) -> Iterator[Session]:
    """A session inside an outer transaction that is rolled back after the test."""
    from sqlalchemy.orm import Session

    with jobqueue_engine.connect() as connection:
        outer = connection.begin()
        with Session(bind=connection, join_transaction_mode="create_savepoint") as session:
            yield session
        outer.rollback()


@pytest.fixture
def jobqueue_committed(jobqueue_engine: Engine) -> Iterator[Engine]:
    """Real commits, visible across connections; every table is emptied before and after."""
    from sa_jobqueue.testing.database import truncate_tables

    truncate_tables(jobqueue_engine)
    yield jobqueue_engine
    truncate_tables(jobqueue_engine)


@pytest.fixture
def jobqueue() -> JobQueue[Any]:
    """The application's `JobQueue`; override it in your conftest.py."""
    pytest.fail(
        "this test runs jobs: define a `jobqueue` fixture in your conftest.py that returns "
        "your application's JobQueue (e.g. `return myapp.jobs.jobs`)",
        pytrace=False,
    )


@pytest.fixture
def jobqueue_run_on_commit(
    jobqueue: JobQueue[Any], jobqueue_committed: Engine
) -> Iterator[RunOnCommit]:
    """Run jobs right after the transaction that enqueued them commits, in this process."""
    from sa_jobqueue.testing.on_commit import run_on_commit

    with run_on_commit(jobqueue, jobqueue_committed) as runner:
        yield runner
