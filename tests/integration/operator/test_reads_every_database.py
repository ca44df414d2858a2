"""The operator's reads on every database: the same rows give the same stats and lists.

Rows are inserted with plain Core inserts (times computed here, in UTC), then read
through the statements `sa-jobqueue stats`, `jobs list` and the dashboard use, on
PostgreSQL, a SQLite file and MariaDB (ids ``[postgresql]``, ``[sqlite]``, ``[mariadb]``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.ops import admin
from sa_jobqueue.ops.passed_over import passed_over
from sa_jobqueue.ops.workers import live_worker_count
from sa_jobqueue.schema.registry_tables import workers_table_for
from tests.support.models import Job

COMMITTED = {
    "postgresql": "committed",
    "sqlite": "sqlite_committed",
    "mariadb": "mariadb_committed",
}


@pytest.fixture(params=sorted(COMMITTED))
def engine_of(request):
    return request.getfixturevalue(COMMITTED[request.param])


def _rows(now: datetime) -> list[dict[str, Any]]:
    minute = timedelta(minutes=1)
    row = {"kind": "k", "queue": "mail", "payload": {}}
    return [
        {**row, "status": "pending", "run_at": now - 2 * minute},  # due for two minutes
        {**row, "status": "pending", "run_at": now + 10 * minute},  # not due
        {**row, "status": "pending", "run_at": now - minute, "attempts": 1, "last_error": "x"},
        {**row, "status": "running", "attempts": 1, "locked_until": now - minute},  # expired
        {**row, "status": "running", "attempts": 1, "locked_until": now + minute},
        {**row, "status": "failed", "attempts": 3, "finished_at": now - 5 * minute},
        {**row, "status": "failed", "attempts": 3, "finished_at": now - 120 * minute},
        {**row, "status": "done", "attempts": 1, "finished_at": now - minute},
        {**row, "queue": "other", "status": "cancelled", "finished_at": now - minute},
    ]


def test_stats_count_each_status_the_lag_expired_leases_and_the_last_hours_dead_letters(
    engine_of,
):
    with Session(engine_of) as session, session.begin():
        now = session.execute(statements.db_now()).scalar_one()
        session.execute(insert(Job), _rows(now))
    with Session(engine_of) as session:
        rows = {r.queue: r for r in session.execute(statements.stats(Job))}
    mail = rows["mail"]
    counts = (mail.pending, mail.due, mail.running, mail.expired_leases, mail.done, mail.failed)
    assert counts == (3, 2, 2, 1, 1, 2)
    assert (mail.cancelled, mail.failed_last_hour, mail.retrying) == (0, 1, 1)
    assert 115 <= mail.lag_seconds <= 180  # the oldest due job: two minutes, read just now
    other = rows["other"]
    assert (other.cancelled, other.pending, other.lag_seconds) == (1, 0, None)


def test_jobs_list_filters_by_lists_of_statuses_queues_and_kinds(engine_of):
    with Session(engine_of) as session, session.begin():
        now = session.execute(statements.db_now()).scalar_one()
        session.execute(insert(Job), _rows(now))
    with Session(engine_of) as session:
        failed = admin.list_jobs(session, Job, status=["failed", "cancelled"])
        mail = admin.list_jobs(session, Job, status="pending", queue=["mail"], kind="k")
        none = admin.list_jobs(session, Job, kind=["nothing"])
    assert sorted(j.status for j in failed) == ["cancelled", "failed", "failed"]
    assert [j.id for j in failed] == sorted((j.id for j in failed), reverse=True)
    assert len(mail) == 3
    assert {j.queue for j in mail} == {"mail"}
    assert none == []


def test_live_workers_and_passed_over_kinds_read_the_registry(engine_of):
    workers = workers_table_for(Job.__table__)  # type: ignore[arg-type]
    with Session(engine_of) as session, session.begin():
        now = session.execute(statements.db_now()).scalar_one()
        session.execute(insert(Job), _rows(now))
        session.execute(
            insert(workers),
            [
                {
                    "id": f"w{i}",
                    "host": "h",
                    "pid": i,
                    "version": "test",
                    "queues": ["mail"],
                    "kinds": ["other_kind"],
                    "concurrency": 1,
                    "started_at": now,
                    "heartbeat_at": now,
                    "expires_at": now + timedelta(minutes=expires),
                }
                for i, expires in ((1, 5), (2, -5))
            ],
        )
    with Session(engine_of) as session:
        assert live_worker_count(session, Job) == 1
        skipped = passed_over(session, Job)
    # The live worker serves "mail" without a handler for "k": its due jobs wait.
    assert [(p.queue, p.kind, p.due, p.reason) for p in skipped] == [
        ("mail", "k", 2, "no live worker")
    ]
    assert 0 <= skipped[0].waited_seconds <= 60  # since it was inserted (its updated_at)
    assert now.tzinfo is not None
    assert now.utcoffset() == timedelta(0)  # the database clock read back in UTC


def test_cancel_ends_pending_and_running_jobs_and_reports_the_others(engine_of):
    with Session(engine_of) as session, session.begin():
        now = session.execute(statements.db_now()).scalar_one()
        session.execute(insert(Job), _rows(now))
        found = session.execute(select(Job.status, func.min(Job.id)).group_by(Job.status))
        ids = {status: job_id for status, job_id in found}
    wanted = [ids["pending"], ids["running"], ids["done"], 10**9]
    with Session(engine_of) as session, session.begin():
        changed = admin.cancel(session, Job, wanted)
    assert changed.ids == sorted([ids["pending"], ids["running"]])
    assert changed.was_running == [ids["running"]]
    assert changed.skipped == {ids["done"]: "done"}
    assert changed.missing == [10**9]
    with Session(engine_of) as session:
        rows = session.execute(
            select(Job.status, Job.finished_at, Job.locked_until).where(Job.id.in_(changed.ids))
        ).all()
    assert [(status, ended is not None, lease) for status, ended, lease in rows] == [
        ("cancelled", True, None)
    ] * 2
