"""Revision sajq_0012 (the counters of ended jobs): over live and finished jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from sqlalchemy import text

from sa_jobqueue import JobQueue, migration, statements
from tests.support.models import Job
from tests.support.revisions import down_revision, job_rows, table_names

REVISION = "sajq_0012"


def _counted(engine):
    with engine.connect() as connection:
        rows = connection.execute(statements.counted_by_kind(Job))
        return {(r.queue, r.kind, r.status): int(r.jobs) for r in rows}


def test_upgrade_over_pending_running_and_finished_jobs_counts_the_finished_ones_once(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, payload, status, attempts, max_attempts, locked_by,"
                " locked_until, finished_at)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, 20, NULL, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 20, 'w1',"
                "         now() + interval '5 minutes', NULL),"
                "        ('a', '{}', 'done', 1, 20, 'w1', NULL, now() - interval '2 days'),"
                "        ('a', '{}', 'done', 1, 20, 'w1', NULL, now() - interval '1 minute'),"
                "        ('b', '{}', 'failed', 20, 20, 'w1', NULL, now())"
            )
        )
    before = job_rows(engine)
    assert "sa_jobqueue_counts_jobs" not in table_names(engine)

    migration.upgrade(url, revision=REVISION)

    assert job_rows(engine) == before
    with engine.connect() as connection:
        # sajq_0013 and sajq_0014 change nothing on PostgreSQL, so the table reads as at them too.
        assert migration.revision_of(connection) in (REVISION, "sajq_0013", "sajq_0014")
    assert _counted(engine) == {("default", "a", "done"): 2, ("default", "b", "failed"): 1}
    # The pending job runs; the running job (another worker's) stays; the trigger counts.
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)
    # retention={}: the default would prune the two-day-old done job whenever the
    # maintenance thread ticks before the drain ends (a slow machine), and this test
    # counts rows, not retention.
    assert jobs.worker(engine, queues=["default"], retention={}).drain() == 1
    assert _counted(engine) == {("default", "a", "done"): 3, ("default", "b", "failed"): 1}
    with engine.connect() as connection:
        statuses = connection.execute(text("SELECT id, status FROM jobs ORDER BY id")).all()
    assert [tuple(row) for row in statuses][:2] == [(1, "done"), (2, "running")]

    migration.downgrade(url, revision=down_revision(REVISION))
    with engine.connect() as connection:
        assert migration.revision_of(connection) == down_revision(REVISION)
        functions = "SELECT count(*) FROM pg_proc WHERE proname = 'jobs_count_ended'"
        assert connection.scalar(text(functions)) == 0
    assert not {"sa_jobqueue_counts_jobs", "sa_jobqueue_ended_jobs"} & table_names(engine)
    assert len(job_rows(engine)) == 5
    with engine.begin() as connection:  # no trigger left behind: ending a job still works
        connection.execute(text("UPDATE jobs SET status = 'done' WHERE id = 2"))
