"""Revision sajq_0008 (worker registry, attempt history): over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue, migration
from tests.support.models import Job
from tests.support.revisions import down_revision, job_rows, table_names

REVISION = "sajq_0008"
TABLES = {"sa_jobqueue_worker_jobs", "sa_jobqueue_errors_jobs"}


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_the_two_tables(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    assert not TABLES & table_names(engine)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs"
                " (kind, payload, status, attempts, max_attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, 20, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 20, 'w1', now() + interval '5 minutes'),"
                "        ('f', '{}', 'pending', 0, 1, NULL, NULL)"
            )
        )
    before = job_rows(engine)

    migration.upgrade(url, revision=REVISION)

    assert table_names(engine) >= TABLES
    assert job_rows(engine) == before
    with engine.connect() as connection:
        # The running job's owner is not registered: it shows as gone, nothing else.
        assert (
            connection.execute(text("SELECT count(*) FROM sa_jobqueue_worker_jobs")).scalar() == 0
        )
    # The new code works on the upgraded table: the pending jobs run (one fails and
    # gets its history entry); the running job (another worker's lease) stays.
    migration.upgrade(url)
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)

    @jobs.task("f")
    def fails(ctx):
        raise RuntimeError("boom")

    with Session(engine) as session, session.begin():
        jobs.enqueue(session, "a", {"n": 4})
    assert jobs.worker(engine, queues=["default"]).drain() == 3
    with engine.connect() as connection:
        rows = connection.execute(select(Job.id, Job.status).order_by(Job.id)).all()
        history = connection.execute(
            text("SELECT job_id, attempt, error FROM sa_jobqueue_errors_jobs")
        ).all()
        registered = connection.execute(text("SELECT count(*) FROM sa_jobqueue_worker_jobs"))
        assert registered.scalar() == 0  # the drain's worker stopped cleanly: its row is gone
    assert [tuple(row) for row in rows] == [(1, "done"), (2, "running"), (3, "failed"), (4, "done")]
    assert [tuple(row)[:2] for row in history] == [(3, 1)]
    assert "RuntimeError: boom" in history[0].error

    migration.downgrade(url, revision=down_revision(REVISION))
    assert not TABLES & table_names(engine)
    assert len(job_rows(engine)) == 4


def test_a_worker_on_a_table_without_the_two_tables_says_which_revision_adds_them(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)
    with pytest.raises(ConfigurationError) as raised:
        jobs.worker(engine, listen=False).drain()
    message = str(raised.value)
    assert "sa_jobqueue_worker_jobs" in message
    assert REVISION in message
    assert "sa-jobqueue migrate --table jobs" in message
