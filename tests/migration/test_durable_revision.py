"""Revision sajq_0007 (durable steps, signals, progress): over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, migration
from tests.support.models import Job
from tests.support.revisions import column_names, down_revision, job_rows

REVISION = "sajq_0007"
TABLES = {"sa_jobqueue_steps_jobs", "sa_jobqueue_signal_jobs"}


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_steps(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    assert not {"progress", "has_steps"} & column_names(engine, "jobs")
    assert not TABLES & set(inspect(engine).get_table_names())
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

    assert {"progress", "has_steps"} <= column_names(engine, "jobs")
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert job_rows(engine) == before
    with engine.connect() as connection:
        added = connection.execute(select(Job.progress, Job.has_steps)).all()
    assert added == [(None, None)] * 3
    # The new code works on the upgraded table: the pending job from before runs its
    # steps; the running job (another worker's lease) stays as it is.
    migration.upgrade(url)
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: ctx.step("one", lambda: 1) + 1)
    assert jobs.worker(engine, queues=["default"]).drain() == 1
    with engine.connect() as connection:
        rows = connection.execute(select(Job.id, Job.status, Job.result).order_by(Job.id)).all()
        steps = connection.execute(
            text("SELECT job_id, name, kind, result FROM sa_jobqueue_steps_jobs")
        ).all()
    assert [tuple(row) for row in rows] == [(1, "done", 2), (2, "running", None), (3, "done", None)]
    assert [tuple(row) for row in steps] == [(1, "one", "step", 1)]

    migration.downgrade(url, revision=down_revision(REVISION))
    assert not {"progress", "has_steps"} & column_names(engine, "jobs")
    assert not TABLES & set(inspect(engine).get_table_names())
    assert len(job_rows(engine)) == 3


def test_deleting_a_job_deletes_its_steps_and_signals(scratch):
    url, engine = scratch
    migration.upgrade(url)
    jobs = JobQueue(Job)
    with Session(engine) as session, session.begin():
        job_id = jobs.enqueue(session, "a", {}).id
        jobs.signal(session, job_id, "go", {"n": 1})
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, attempt)"
                " VALUES (:id, 'one', 'step', 1)"
            ),
            {"id": job_id},
        )
        connection.execute(text("DELETE FROM jobs"))
        counts = [
            connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in sorted(TABLES)
        ]
    assert counts == [0, 0]
