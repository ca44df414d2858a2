"""Real ``sa-jobqueue worker`` processes for the acceptance tests, and the SQL oracle.

The spawn fixture starts workers through the shared `processes` fixture, with the app
and the lease as parameters; each worker's id is read from its start line.

`processes` and `committed` follow the test's `database` (tests/conftest.py): marked
`every_database`, a test runs on PostgreSQL, a SQLite file and MariaDB.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.support.models import Effect, Job

ROOT = Path(__file__).resolve().parents[2]
_STARTED = re.compile(r"worker (\S+) started: ")


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
