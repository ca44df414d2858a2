"""Revision sajq_0009 (the schedules table's index of due rows): over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, migration, periodic
from sa_jobqueue.driver.postgres import ticks
from tests.support.models import Job
from tests.support.revisions import down_revision, index_names, job_rows

REVISION = "sajq_0009"
TABLE = "sa_jobqueue_schedules_jobs"
INDEX = "ix_jobs_schedules_due"


def _due_plan(engine) -> str:
    """The plan of a worker's due read, the planner told to avoid a sequential scan."""
    sql = str(ticks.due_schedules(Job).compile(dialect=postgresql.psycopg.dialect()))
    with engine.connect() as connection:
        connection.execute(text("SET enable_seqscan = off"))
        rows = connection.exec_driver_sql("EXPLAIN " + sql, {"names": "{}", "limit": 200}).scalars()
        return "\n".join(rows)


def test_upgrade_over_pending_and_running_jobs_and_schedules_keeps_them_and_adds_the_index(
    scratch,
):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    assert INDEX not in index_names(engine, TABLE)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs"
                " (kind, payload, status, attempts, max_attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, 20, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 20, 'w1', now() + interval '5 minutes')"
            )
        )
        connection.execute(
            text(
                f"INSERT INTO {TABLE} (name, kind, spec, next_run_at, paused_at) VALUES"
                " ('tick', 'a', 'every 3600s', now() - interval '1 second', NULL),"
                " ('held', 'a', 'every 60s', now() - interval '1 hour', now())"
            )
        )
    before = job_rows(engine)
    with engine.connect() as connection:
        schedules = connection.execute(text(f"SELECT * FROM {TABLE} ORDER BY name")).all()

    migration.upgrade(url, revision=REVISION)

    assert INDEX in index_names(engine, TABLE)
    assert job_rows(engine) == before
    with engine.connect() as connection:
        assert connection.execute(text(f"SELECT * FROM {TABLE} ORDER BY name")).all() == schedules
    assert f"Index Scan using {INDEX}" in _due_plan(engine)
    # The new code works on the upgraded table: the due code schedule fires, the
    # paused one does not, the pending job runs, the running job (another's) stays.
    migration.upgrade(url)
    jobs = JobQueue(Job)
    jobs.task("a")(lambda ctx: None)
    jobs.periodic("a", every=timedelta(hours=1), name="tick")
    jobs.periodic("a", every=timedelta(minutes=1), name="held")
    with engine.connect() as connection:
        ticks = periodic.enqueue_due(connection, Job, jobs.registry, jobs.schedules)
    assert [tick.schedule for tick in ticks] == ["tick"]
    assert jobs.worker(engine, queues=["default"]).drain() == 2
    with Session(engine) as session:
        statuses = session.execute(text("SELECT id, status FROM jobs ORDER BY id")).all()
    assert [tuple(row) for row in statuses] == [(1, "done"), (2, "running"), (3, "done")]

    migration.downgrade(url, revision=down_revision(REVISION))
    assert INDEX not in index_names(engine, TABLE)
    assert len(job_rows(engine)) == 3
    # A worker of this version on a table without the index still takes due ticks
    # (reading the schedules table whole, as before it).
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {TABLE} SET next_run_at = now() - interval '1 s'"))
    with engine.connect() as connection:
        ticks = periodic.enqueue_due(connection, Job, jobs.registry, jobs.schedules)
    assert [tick.schedule for tick in ticks] == ["tick"]


def test_the_level_of_a_table_is_read_from_the_index(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    with engine.connect() as connection:
        assert migration.revision_of(connection) == down_revision(REVISION)
    migration.upgrade(url, revision=REVISION)
    with engine.connect() as connection:
        assert migration.revision_of(connection) == REVISION
