"""Revision sajq_0006 (runtime schedules, debounce and throttle keys): over live jobs, and back.

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

REVISION = "sajq_0006"


def _down_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(migration.script_location()))
    down = ScriptDirectory.from_config(config).get_revision(REVISION).down_revision
    assert isinstance(down, str)
    return down


@pytest.fixture
def scratch(server_url: str) -> Iterator[tuple[str, Engine]]:
    with scratch_database(server_url, prefix="sa_jobqueue_sajq6") as url:
        engine = create_engine(url, poolclass=NullPool)
        try:
            yield url, engine
        finally:
            engine.dispose()


def _columns(engine: Engine, table: str) -> set[str]:
    query = text("SELECT column_name FROM information_schema.columns WHERE table_name = :t")
    with engine.connect() as connection:
        return set(connection.scalars(query, {"t": table}))


def _indexes(engine: Engine) -> set[str]:
    query = text("SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'")
    with engine.connect() as connection:
        return set(connection.scalars(query))


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as connection:
        result = connection.execute(
            text(
                "SELECT id, kind, payload, status, attempts, locked_by, locked_until"
                " FROM jobs ORDER BY id"
            )
        )
        return [tuple(row) for row in result]


def test_upgrade_over_pending_and_running_jobs_keeps_them_and_adds_the_keys(scratch):
    url, engine = scratch
    migration.upgrade(url, revision=_down_revision())
    assert "debounce_key" not in _columns(engine, "jobs")
    assert "definition" not in _columns(engine, "sa_jobqueue_schedules_jobs")
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
    before = _rows(engine)

    migration.upgrade(url, revision=REVISION)

    assert {"debounce_key", "throttle_key"} <= _columns(engine, "jobs")
    assert {"definition", "paused_at"} <= _columns(engine, "sa_jobqueue_schedules_jobs")
    assert {"uq_jobs_debounce_key", "ix_jobs_throttle_key"} <= _indexes(engine)
    assert _rows(engine) == before
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

    migration.downgrade(url, revision=_down_revision())
    assert not {"debounce_key", "throttle_key"} & _columns(engine, "jobs")
    assert not {"definition", "paused_at"} & _columns(engine, "sa_jobqueue_schedules_jobs")
    assert not {"uq_jobs_debounce_key", "ix_jobs_throttle_key"} & _indexes(engine)
    assert len(_rows(engine)) == 4
