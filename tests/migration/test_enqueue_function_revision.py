"""Revision sajq_0010 (the SQL function ``<table>_enqueue``): over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from sa_jobqueue import JobQueue, migration
from tests.support.models import Job
from tests.support.revisions import down_revision, job_rows

REVISION = "sajq_0010"


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_the_function(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs"
                " (kind, payload, status, attempts, max_attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, 20, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 20, 'w1', now() + interval '5 minutes')"
            )
        )
    before = job_rows(engine)
    with engine.connect() as connection, pytest.raises(ProgrammingError):
        connection.execute(text("SELECT jobs_enqueue('a')"))  # not there yet
    with engine.connect() as connection:
        assert migration.revision_of(connection) == down_revision(REVISION)

    migration.upgrade(url, revision=REVISION)

    assert job_rows(engine) == before
    with engine.connect() as connection:
        assert migration.revision_of(connection) == REVISION
    with engine.begin() as connection:
        made = connection.execute(text("SELECT jobs_enqueue('a', '{\"n\": 3}')")).scalar_one()
    assert made == 3
    # The pending job and the one enqueued from SQL run; the running job (another's) stays.
    migration.upgrade(url)  # a worker needs every revision (sajq_0012's counters' log)
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)
    assert jobs.worker(engine, queues=["default"]).drain() == 2
    with engine.connect() as connection:
        statuses = connection.execute(text("SELECT id, status FROM jobs ORDER BY id")).all()
    assert [tuple(row) for row in statuses] == [(1, "done"), (2, "running"), (3, "done")]

    migration.downgrade(url, revision=down_revision(REVISION))
    with engine.connect() as connection:
        assert migration.revision_of(connection) == down_revision(REVISION)
        assert (
            connection.scalar(text("SELECT count(*) FROM pg_proc WHERE proname = 'jobs_enqueue'"))
            == 0
        )
    assert len(job_rows(engine)) == 3
