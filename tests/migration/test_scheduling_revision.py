"""Revision sajq_0002 over a table holding live pending and running jobs.

The starting point is the revision sajq_0002 revises (read from its script, so a
re-chained history is tested as it is), reached by downgrading from the head; the
test first checks that it really is the older schema (no ``unique_key``, no tables
beside the jobs table), then upgrades with jobs in flight.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobQueue, migration
from sa_jobqueue.driver.postgres import claims, completion
from sa_jobqueue.testing import scratch_database
from tests.support.models import Job

REVISION = "sajq_0002"

#: The jobs table's columns as revision sajq_0001 shipped them.
SAJQ_0001_COLUMNS = [
    "id",
    "queue",
    "kind",
    "payload",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "run_at",
    "locked_until",
    "locked_by",
    "idempotency_key",
    "last_error",
    "created_at",
    "updated_at",
    "finished_at",
]


def _scripts() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(migration.script_location()))
    return ScriptDirectory.from_config(config)


def _down_revision() -> str:
    script = _scripts().get_revision(REVISION)
    assert script is not None
    down = script.down_revision
    assert isinstance(down, str)
    return down


@pytest.fixture
def scratch(server_url: str) -> Iterator[tuple[str, Engine]]:
    with scratch_database(server_url, prefix="sa_jobqueue_migration") as url:
        engine = create_engine(url, poolclass=NullPool)
        try:
            yield url, engine
        finally:
            engine.dispose()


def _columns(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return list(
            connection.scalars(
                text(
                    "SELECT attname FROM pg_attribute WHERE attrelid = 'jobs'::regclass"
                    " AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
                )
            )
        )


def _tables(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(
            connection.scalars(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
        )


def test_upgrade_keeps_pending_and_running_jobs_and_adds_the_scheduling_schema(scratch):
    url, engine = scratch
    migration.upgrade(url)
    migration.downgrade(url, revision=_down_revision())
    # The older schema, exactly: what an existing installation has.
    base = _columns(engine)
    assert [c for c in base if c in SAJQ_0001_COLUMNS] == SAJQ_0001_COLUMNS
    assert "unique_key" not in base
    assert not {"sa_jobqueue_paused_jobs", "sa_jobqueue_schedules_jobs"} & _tables(engine)

    # Live jobs, written as that version wrote them (no unique_key column to name).
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, queue, payload, idempotency_key) VALUES"
                " ('mail', 'default', '{\"n\": 1}', 'k1'), ('mail', 'default', '{\"n\": 2}', NULL),"
                " ('mail', 'default', '{\"n\": 3}', NULL)"
            )
        )
        connection.execute(
            text(
                "UPDATE jobs SET status = 'running', attempts = 1, locked_by = 'old-worker',"
                " locked_until = now() + interval '5 minutes' WHERE id = 3"
            )
        )
        before = connection.execute(text("SELECT * FROM jobs ORDER BY id")).mappings().all()

    migration.upgrade(url)
    with engine.connect() as connection:
        versions = list(
            connection.scalars(text("SELECT version_num FROM sa_jobqueue_version_jobs"))
        )
        after = connection.execute(text("SELECT * FROM jobs ORDER BY id")).mappings().all()
    assert versions == [_scripts().get_current_head()]
    assert _columns(engine)[: len(base)] == base
    assert "unique_key" in _columns(engine)
    assert [{k: row[k] for k in before[0]} for row in after] == [dict(row) for row in before]
    assert all(row["unique_key"] is None for row in after)

    # The jobs in flight go on: the running one completes under its old fence, the
    # pending ones are claimed, and the new features work on the upgraded table.
    jobs = JobQueue(Job)
    with engine.begin() as connection:
        done = connection.execute(
            completion.complete(Job), {"ids": [3], "attempt_numbers": [1], "owner": "old-worker"}
        ).all()
        assert [row.id for row in done] == [3]
    with Session(engine) as session, session.begin():
        jobs.pause(session, "default")
    claim = claims.claim(Job, leases={}, default_lease=30.0, ceiling=32)
    params = {"queue_name": "default", "limit": 10, "owner": "new-worker"}
    with engine.begin() as connection:
        assert connection.execute(claim, params).all() == []
    with Session(engine) as session, session.begin():
        jobs.resume(session, "default")
        first = jobs.enqueue(session, "mail", {}, unique_key="u")
        assert jobs.enqueue(session, "mail", {}, unique_key="u") is first
    with engine.begin() as connection:
        claimed = sorted(row.id for row in connection.execute(claim, params))
    assert claimed[:2] == [1, 2]
    with engine.connect() as connection:
        assert connection.scalar(select(Job.status).where(Job.id == 3)) == "done"


def test_upgrade_is_a_no_op_on_a_table_the_current_helpers_made(scratch):
    """A fresh install runs every revision; the one adding what create_jobs_table made
    already must not fail on it."""
    url, engine = scratch
    migration.upgrade(url, revision=_down_revision())
    columns = _columns(engine)
    migration.upgrade(url, revision=REVISION)  # later revisions may add columns of their own
    assert _columns(engine) == columns
    migration.downgrade(url, revision=_down_revision())
    assert "unique_key" not in _columns(engine)
    migration.downgrade(url)
    assert _tables(engine) == set()
