"""Real ``sa-jobqueue worker`` processes for the acceptance tests, and the SQL oracle.

The spawn fixture starts workers through the shared `processes` fixture, with the app
and the lease as parameters; each worker's id is read from its start line.

`database` says which database a test runs on: PostgreSQL unless the test is marked
`every_database` (then once per database, ids ``[postgresql]``, ``[sqlite]``,
``[mariadb]``). `committed`, `processes` and `test_database_url` follow it: the
workers get that database's URL (a SQLite file, a MariaDB database of the run's own).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tests.support.models import Effect, Job
from tests.support.processes import Processes

ROOT = Path(__file__).resolve().parents[2]
_STARTED = re.compile(r"worker (\S+) started: ")

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
    """Real commits on this test's database; every row deleted afterwards."""
    engine: Engine = request.getfixturevalue(_COMMITTED[database])
    return engine


@pytest.fixture
def processes(test_database_url: str, committed: Engine, tmp_path: Path) -> Iterator[Processes]:
    """Real `sa-jobqueue` processes on this test's database; all stopped at the test's end."""
    started = Processes(test_database_url, tmp_path)
    yield started
    started.stop_all()


@pytest.fixture
def spawn(processes):
    """``spawn(*args, app=..., lease=..., concurrency=...)``: a started worker `Proc`."""

    def start(*extra, app="tests.support.apps.held:jobs", lease=2.0, concurrency=1, sweep=0.5):
        proc = processes.worker(
            app,
            *("--poll-interval", "0.5", "--sweep-interval", str(sweep), *extra),
            concurrency=concurrency,
            env={"SAJQ_LEASE": str(lease)},
            ready_timeout=60.0,
        )
        assert proc.worker_id, proc.output()
        return proc

    return start


def enqueue_many(engine, jobqueue, specs):
    """Enqueue `specs` (``(kind, payload)``) in one transaction; return their ids."""
    with Session(engine) as s, s.begin():
        return [j.id for j in jobqueue.enqueue_many(s, specs)]


def scalar(engine, statement):
    with Session(engine) as s:
        return s.scalar(statement)


def count_jobs(engine, *where):
    return scalar(engine, select(func.count()).select_from(Job).where(*where))


def effects(engine, ids=None):
    """``(job_id, attempt)`` of every Effect (of the jobs `ids`), in order."""
    statement = select(Effect.job_id, Effect.attempt).order_by(Effect.id)
    if ids is not None:
        statement = statement.where(Effect.job_id.in_(list(ids)))
    with Session(engine) as s:
        return [tuple(r) for r in s.execute(statement)]
