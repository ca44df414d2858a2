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
from tests.support.models import Job

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
