"""Revision sajq_0005 (workflows): upgraded over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained on top of it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, migration
from tests.support.models import Job
from tests.support.revisions import column_names, down_revision, job_rows, table_names

REVISION = "sajq_0005"


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_workflows(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=down_revision(REVISION))
    assert "waiting_for" not in column_names(engine)
    assert "sa_jobqueue_deps_jobs" not in table_names(engine)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, payload, status, attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 'w1', now() + interval '5 minutes'),"
                "        ('c', '{}', 'done', 1, NULL, NULL)"
            )
        )
        # The old CHECK refuses the new status.
        with pytest.raises(Exception, match="ck_jobs_status"), connection.begin_nested():
            connection.execute(text("INSERT INTO jobs (kind, status) VALUES ('x', 'waiting')"))
    before = job_rows(engine)

    migration.upgrade(url, revision=REVISION)

    assert {"waiting_for", "after_failure", "has_dependents"} <= column_names(engine)
    assert "sa_jobqueue_deps_jobs" in table_names(engine)
    assert job_rows(engine) == before
    # The new code works on the upgraded table (once any later revision ran too): a job
    # waits for the running job (another
    # worker's lease) and for the pending one; the pending one runs, the waiting one
    # stays waiting until the running one ends too.
    migration.upgrade(url)
    jobs = JobQueue(Job)
    ran: list[str] = []
    jobs.task("a")(lambda ctx: ran.append("a"))
    jobs.task("d")(lambda ctx: ran.append(f"d {dict(ctx.upstream)}"))
    with Session(engine) as session, session.begin():
        waiting = jobs.enqueue(session, "d", after=[1, 2])
        assert (waiting.status, waiting.waiting_for) == ("waiting", 2)
        waiting_id = waiting.id
    assert jobs.worker(engine, queues=["default"]).drain() == 1
    assert ran == ["a"]
    with engine.connect() as connection:
        rows = connection.execute(
            select(Job.id, Job.status, Job.waiting_for).order_by(Job.id)
        ).all()
    assert [tuple(row) for row in rows] == [
        (1, "done", None),
        (2, "running", None),
        (3, "done", None),
        (waiting_id, "waiting", 1),
    ]

    migration.downgrade(url, revision=down_revision(REVISION))
    assert "waiting_for" not in column_names(engine)
    assert "sa_jobqueue_deps_jobs" not in table_names(engine)
    with engine.connect() as connection:
        statuses = connection.execute(text("SELECT id, status FROM jobs ORDER BY id")).all()
    # The waiting job could not wait without the revision: it ends cancelled, said why.
    assert [tuple(row) for row in statuses] == [
        (1, "done"),
        (2, "running"),
        (3, "done"),
        (waiting_id, "cancelled"),
    ]
