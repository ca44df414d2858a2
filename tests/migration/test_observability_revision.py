"""Revision sajq_0004 (``result``, ``trace_context``): upgraded over live jobs, and back.

The test upgrades from the revision's own ``down_revision`` as the script states it,
so it keeps working when revisions are re-chained.
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
from sa_jobqueue.testing import scratch_database
from tests.models import Job

REVISION = "sajq_0004"


def _down_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(migration.script_location()))
    down = ScriptDirectory.from_config(config).get_revision(REVISION).down_revision
    assert isinstance(down, str)
    return down


@pytest.fixture
def scratch(server_url: str) -> Iterator[tuple[str, Engine]]:
    with scratch_database(server_url, prefix="sa_jobqueue_sajq4") as url:
        engine = create_engine(url, poolclass=NullPool)
        try:
            yield url, engine
        finally:
            engine.dispose()


def _columns(engine: Engine) -> set[str]:
    query = text("SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs'")
    with engine.connect() as connection:
        return set(connection.scalars(query))


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_the_columns(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=_down_revision())
    assert "result" not in _columns(engine)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, payload, status, attempts, locked_by, locked_until)"
                " VALUES ('a', '{\"n\": 1}', 'pending', 0, NULL, NULL),"
                "        ('b', '{\"n\": 2}', 'running', 1, 'w1', now() + interval '5 minutes'),"
                "        ('c', '{}', 'done', 1, NULL, NULL)"
            )
        )
    before = _rows(engine)

    migration.upgrade(url, revision=REVISION)

    assert {"result", "trace_context"} <= _columns(engine)
    assert _rows(engine) == before
    with engine.connect() as connection:
        extra = connection.execute(select(Job.result, Job.trace_context)).all()
    assert extra == [(None, None)] * 3
    # The new model works on the upgraded table: enqueue, and a result on a running row.
    with Session(engine) as session, session.begin():
        job = JobQueue(Job).enqueue(session, "d", {"n": 4})
        session.get(Job, 2).result = {"ok": True}  # type: ignore[union-attr]
        new_id = job.id
    with engine.connect() as connection:
        assert connection.scalar(select(Job.result).where(Job.id == 2)) == {"ok": True}
        assert connection.scalar(select(Job.status).where(Job.id == new_id)) == "pending"

    migration.downgrade(url, revision=_down_revision())
    assert "result" not in _columns(engine)
    assert "trace_context" not in _columns(engine)
    assert len(_rows(engine)) == 4


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as connection:
        result = connection.execute(
            text(
                "SELECT id, kind, payload, status, attempts, locked_by, locked_until"
                " FROM jobs ORDER BY id"
            )
        )
        return [tuple(row) for row in result]
