"""Revision sajq_0006 (runtime schedules, debounce and throttle keys): over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, migration
from tests.support.models import Job
from tests.support.revisions import column_names, down_revision, index_names, job_rows

REVISION = "sajq_0006"


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_the_keys(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    assert "debounce_key" not in column_names(engine, "jobs")
    assert "definition" not in column_names(engine, "sa_jobqueue_schedules_jobs")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, payload, status, attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 'w1', now() + interval '5 minutes'),"
                "        ('c', '{}', 'done', 1, NULL, NULL)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO sa_jobqueue_schedules_jobs (name, kind, spec, next_run_at)"
                " VALUES ('beat', 'a', 'every 60s', now() + interval '1 minute')"
            )
        )
    before = job_rows(engine)

    migration.upgrade(url, revision=REVISION)

    assert {"debounce_key", "throttle_key"} <= column_names(engine, "jobs")
    assert {"definition", "paused_at"} <= column_names(engine, "sa_jobqueue_schedules_jobs")
    assert {"uq_jobs_debounce_key", "ix_jobs_throttle_key"} <= index_names(engine)
    assert job_rows(engine) == before
    with engine.connect() as connection:
        keys = connection.execute(select(Job.debounce_key, Job.throttle_key)).all()
        schedule = connection.execute(
            text("SELECT spec, definition, paused_at FROM sa_jobqueue_schedules_jobs")
        ).one()
    assert keys == [(None, None)] * 3
    assert tuple(schedule) == ("every 60s", None, None)  # a code-declared schedule, running
    # The new code works on the upgraded table: the pending job from before and a
    # debounced one from after run; the running job (another worker's lease) stays.
    migration.upgrade(url)
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)
    jobs.task("d")(lambda ctx: None)
    with Session(engine) as session, session.begin():
        new_id = jobs.enqueue(session, "d", {"n": 4}, debounce=("d:1", 0)).id
    assert jobs.worker(engine, queues=["default"]).drain() == 2
    with engine.connect() as connection:
        rows = connection.execute(select(Job.id, Job.status).order_by(Job.id)).all()
    assert [tuple(row) for row in rows] == [
        (1, "done"),
        (2, "running"),
        (3, "done"),
        (new_id, "done"),
    ]

    migration.downgrade(url, revision=down_revision(REVISION))
    assert not {"debounce_key", "throttle_key"} & column_names(engine, "jobs")
    assert not {"definition", "paused_at"} & column_names(engine, "sa_jobqueue_schedules_jobs")
    assert not {"uq_jobs_debounce_key", "ix_jobs_throttle_key"} & index_names(engine)
    assert len(job_rows(engine)) == 4
