"""Revision sajq_0011 (the archive): over pending, running and finished jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import inspect, text

from sa_jobqueue import ConfigurationError, JobQueue, migration
from sa_jobqueue.ops.archive import archive_now
from tests.support.models import Job
from tests.support.revisions import down_revision, job_rows

REVISION = "sajq_0011"


def test_upgrade_over_pending_running_and_finished_jobs_keeps_them_and_archives_after(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs"
                " (kind, payload, status, attempts, max_attempts, locked_by, locked_until,"
                " finished_at)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, 20, NULL, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 20, 'w1',"
                "         now() + interval '5 minutes', NULL),"
                "        ('c', '{\"n\": 3}', 'done', 1, 20, NULL, NULL,"
                "         now() - interval '2 hours'),"
                "        ('c', '{\"n\": 4}', 'failed', 1, 1, NULL, NULL,"
                "         now() - interval '3 hours')"
            )
        )
    before = job_rows(engine)
    with engine.connect() as connection:
        assert not inspect(connection).has_table("jobs_archive")

    migration.upgrade(url, revision=REVISION)

    assert job_rows(engine) == before
    with engine.connect() as connection:
        assert migration.revision_of(connection) == REVISION
        kind = connection.execute(
            text("SELECT relkind FROM pg_class WHERE relname = 'jobs_archive'")
        ).scalar_one()
        assert kind == "p"  # partitioned
        connection.commit()
        assert archive_now(connection, Job, after=timedelta(hours=1)) == 2
        live = connection.execute(text("SELECT id, status FROM jobs ORDER BY id")).all()
        assert [tuple(row) for row in live] == [(1, "pending"), (2, "running")]
    # A worker needs every revision (its done statements write sajq_0012's log): it
    # refuses to start before, in one line; after, the pending job runs and the running
    # job (another's) stays.
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)
    with pytest.raises(ConfigurationError, match=r"revision sajq_0012\) does not exist"):
        jobs.worker(engine, queues=["default"]).drain()
    migration.upgrade(url)
    assert job_rows(engine)[:2] == before[:2]
    assert jobs.worker(engine, queues=["default"]).drain() == 1

    migration.downgrade(url, revision=down_revision(REVISION))
    with engine.connect() as connection:
        assert migration.revision_of(connection) == down_revision(REVISION)
        assert not inspect(connection).has_table("jobs_archive")
        left = text("SELECT count(*) FROM pg_class WHERE relname LIKE 'jobs\\_archive%'")
        assert connection.execute(left).scalar() == 0
    assert len(job_rows(engine)) == 2
