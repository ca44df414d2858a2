"""Revision sajq_0004 (``result``, ``trace_context``): upgraded over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, migration
from tests.support.models import Job
from tests.support.revisions import column_names, down_revision, job_rows

REVISION = "sajq_0004"


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_the_columns(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    assert "result" not in column_names(engine)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, payload, status, attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 'w1', now() + interval '5 minutes'),"
                "        ('c', '{}', 'done', 1, NULL, NULL)"
            )
        )
    before = job_rows(engine)

    migration.upgrade(url, revision=REVISION)

    assert {"result", "trace_context"} <= column_names(engine)
    assert job_rows(engine) == before
    with engine.connect() as connection:
        extra = connection.execute(select(Job.result, Job.trace_context)).all()
    assert extra == [(None, None)] * 3
    # The new code works on the upgraded table (once the later revisions it needs ran
    # too; they touch no row of it): a worker runs the pending job that was
    # there before the upgrade and one enqueued after it, storing their results; the
    # running job (another worker's lease) is left alone.
    migration.upgrade(url)
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: {"ran": ctx.payload})
    jobs.task("d")(lambda ctx: {"ran": ctx.payload})
    with Session(engine) as session, session.begin():
        new_id = jobs.enqueue(session, "d", {"n": 4}).id
    assert jobs.worker(engine, queues=["default"]).drain() == 2
    with engine.connect() as connection:
        rows = connection.execute(select(Job.id, Job.status, Job.result).order_by(Job.id)).all()
    assert [tuple(row) for row in rows] == [
        (1, "done", {"ran": {"n": 1}}),
        (2, "running", None),
        (3, "done", None),
        (new_id, "done", {"ran": {"n": 4}}),
    ]

    migration.downgrade(url, revision=down_revision(REVISION))
    assert "result" not in column_names(engine)
    assert "trace_context" not in column_names(engine)
    assert len(job_rows(engine)) == 4
