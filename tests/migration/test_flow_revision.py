"""Revision sajq_0003 (flow control) over a table holding live jobs: pending, running
and finished rows survive the upgrade, keep running under it, and survive the downgrade."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from sa_jobqueue import migration
from sa_jobqueue.core.limits import check_limits
from sa_jobqueue.driver.postgres import completion, limits
from sa_jobqueue.testing import scratch_database
from tests.support.models import Job, new_queue

REVISION = "sajq_0003"


def _down_revision() -> str:
    script = ScriptDirectory(str(migration.script_location()))
    down = script.get_revision(REVISION).down_revision
    assert isinstance(down, str)
    return down


@pytest.fixture
def before(server_url: str) -> Iterator[tuple[str, Engine]]:
    """A database migrated to just before sajq_0003, holding live jobs."""
    with scratch_database(server_url, prefix="sa_jobqueue_flow_rev") as url:
        # A fresh install makes the current schema at once, so go up, then down past
        # sajq_0003: what an existing installation of the older version has.
        migration.upgrade(url)
        migration.downgrade(url, revision=_down_revision())
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jobs (kind, queue, payload) VALUES"
                    " ('sync_crm', 'default', '{\"n\": 1}'), ('sync_crm', 'default', '{\"n\": 2}'),"
                    " ('other', 'default', '{}')"
                )
            )
            # One running under a live lease, as a worker of the old code holds it.
            conn.execute(
                text(
                    "UPDATE jobs SET status = 'running', attempts = 1, locked_by = 'old-worker',"
                    " locked_until = now() + interval '5 minutes' WHERE id = 2"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO jobs (kind, status, finished_at)"
                    " VALUES ('sync_crm', 'done', now())"
                )
            )
        try:
            yield url, engine
        finally:
            engine.dispose()


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        query = text("SELECT id, kind, status, attempts, locked_by, payload FROM jobs ORDER BY id")
        return [tuple(row) for row in conn.execute(query)]


def test_upgrade_keeps_live_jobs_and_they_run_under_the_limits(before):
    url, engine = before
    with engine.connect() as conn:
        columns = set(
            conn.scalars(
                text("SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs'")
            )
        )
    assert "concurrency_key" not in columns
    kept = _rows(engine)

    migration.upgrade(url)

    assert _rows(engine) == kept
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM jobs WHERE concurrency_key IS NOT NULL")) == 0
        assert conn.scalar(text("SELECT count(*) FROM sa_jobqueue_starts_jobs")) == 0

    # The old worker's running job counts against max_running=2: one more fits.
    limited = limits.claim_limited(
        Job, kind="sync_crm", limits=check_limits(max_running=2, rate_limit=(5, 1.0)), lease=60.0
    )
    with engine.begin() as conn:
        conn.execute(limits.lock_limited(Job, "sync_crm"))
        params = {"queue_name": "default", "limit": 10, "owner": "new-worker"}
        claimed = conn.execute(limited, params).all()
    assert [row.id for row in claimed] == [1]
    with engine.begin() as conn:
        # The old worker's fenced completion still lands.
        done = conn.execute(
            completion.complete(Job), {"ids": [2], "attempt_numbers": [1], "owner": "old-worker"}
        ).all()
        assert [row.id for row in done] == [2]
        assert conn.scalar(text("SELECT count(*) FROM sa_jobqueue_starts_jobs")) == 1

    jobs = new_queue()
    with Session(engine) as session, session.begin():
        job = jobs.enqueue(session, "charge", {}, concurrency_key="customer:42")
        assert job.concurrency_key == "customer:42"


def test_upgrade_is_a_no_op_on_a_table_the_current_helpers_made(server_url):
    with scratch_database(server_url, prefix="sa_jobqueue_flow_rev") as url:
        migration.upgrade(url, revision=_down_revision())  # creates today's table
        engine = create_engine(url, poolclass=NullPool)
        try:
            before = _rows(engine)
            migration.upgrade(url)  # sajq_0003 finds its column and table there
            assert _rows(engine) == before
            with engine.connect() as conn:
                assert conn.scalar(text("SELECT to_regclass('sa_jobqueue_starts_jobs')"))
        finally:
            engine.dispose()


def test_downgrade_keeps_live_jobs(before):
    url, engine = before
    migration.upgrade(url)
    kept = _rows(engine)
    migration.downgrade(url, revision=_down_revision())
    assert _rows(engine) == kept
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT to_regclass('sa_jobqueue_starts_jobs')")) is None
