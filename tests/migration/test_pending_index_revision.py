"""Revision sajq_0013 (MySQL's claim index keyed on status): over live jobs, and back.

On MariaDB the claim's index held every row, so a claim walked the finished jobs of its
queue before the first pending one: the test counts the index entries a claim reads
(MariaDB's ``Handler_read_next``, not a time) beside 2,000 done jobs, before and after
the upgrade. On PostgreSQL and SQLite (a partial index already) the revision changes
nothing. The test upgrades from the revision's own ``down_revision`` as the script states
it, so it keeps working when revisions are re-chained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, create_engine, insert, select, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobQueue, migration
from sa_jobqueue.driver.registry import driver_for
from sa_jobqueue.migration import preflight
from sa_jobqueue.schema.pending_index import (
    MYSQL_PENDING_COLUMNS,
    PENDING_COLUMNS,
    pending_index_key,
)
from tests.support.databases import DATABASES, scratch_url
from tests.support.models import Job
from tests.support.revisions import down_revision

REVISION = "sajq_0013"
DONE = 2000


@pytest.fixture
def new_url(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    with ExitStack() as stack:
        yield lambda database: stack.enter_context(scratch_url(database, request))


def _pending_key(engine: Engine) -> tuple[str, ...]:
    with engine.connect() as connection:
        key = pending_index_key(connection, "jobs")
    assert key is not None, "no ix_jobs_pending"
    return key


def _fill(engine: Engine) -> None:
    """2,000 done jobs an hour old, ahead in claim order of 3 pending jobs and 1 running."""
    now = datetime.now(timezone.utc)
    old = now - timedelta(hours=1)
    done = [
        {"kind": "a", "payload": {}, "status": "done", "attempts": 1, "run_at": old,
         "finished_at": old}
        for _ in range(DONE)
    ]  # fmt: skip
    live = [
        {"kind": "a", "payload": {"n": n}, "status": "pending", "attempts": 0, "run_at": now}
        for n in range(3)
    ]
    running = {
        "kind": "a", "payload": {"n": 9}, "status": "running", "attempts": 1, "run_at": now,
        "locked_by": "w1", "locked_until": now + timedelta(minutes=5),
    }  # fmt: skip
    with engine.begin() as connection:
        connection.execute(insert(Job), done)
        connection.execute(insert(Job), [*live, running])


def _claim_reads(engine: Engine) -> tuple[int, int]:
    """(jobs claimed, index entries read) by one claim of up to 3 jobs, rolled back."""
    driver = driver_for(engine, Job)
    count = text("SHOW SESSION STATUS LIKE 'Handler_read_next'")
    with engine.connect() as connection:
        before = int(connection.execute(count).one()[1])
        connection.rollback()
        with connection.begin() as transaction:
            claimed = driver.job_claim(connection, "default", 3, "probe")
            transaction.rollback()
        after = int(connection.execute(count).one()[1])
    return len(claimed), after - before


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as connection:
        query = select(Job.id, Job.status, Job.attempts, Job.locked_by).order_by(Job.id)
        return [tuple(row) for row in connection.execute(query)]


@pytest.mark.parametrize("database", DATABASES)
def test_upgrade_over_pending_running_and_done_jobs_keys_mysqls_claim_index_on_status(
    database: str, new_url: Callable[[str], str]
) -> None:
    url = new_url(database)
    engine = create_engine(url, poolclass=NullPool)
    try:
        migration.upgrade(url, revision=down_revision(REVISION))
        assert _pending_key(engine) == PENDING_COLUMNS
        _fill(engine)
        before = _rows(engine)
        if database == "mariadb":  # the claim walks every done job ahead of the pending
            claimed, read = _claim_reads(engine)
            assert claimed == 3
            assert read >= DONE
            # A worker starting on it says so once, naming the revision.
            (warning,) = preflight.check_worker(engine, Job)
            assert "ix_jobs_pending has no status in its key (revision sajq_0013)" in warning

        migration.upgrade(url, revision=REVISION)

        mysql = database == "mariadb"
        assert _pending_key(engine) == (MYSQL_PENDING_COLUMNS if mysql else PENDING_COLUMNS)
        assert _rows(engine) == before
        with engine.connect() as connection:
            assert migration.revision_of(connection) == REVISION
        if mysql:  # now it reads the pending jobs alone
            claimed, read = _claim_reads(engine)
            assert claimed == 3
            assert read <= 5
        assert preflight.check_worker(engine, Job) == []
        jobs = JobQueue(Job)
        jobs.task("a")(lambda ctx: None)
        # The pending jobs run; the running one (another worker's, its lease live) stays.
        assert jobs.worker(engine, queues=["default"], retention={}).drain() == 3
        statuses = [status for _, status, _, _ in _rows(engine)]
        assert statuses == ["done"] * (DONE + 3) + ["running"]

        migration.downgrade(url, revision=down_revision(REVISION))
        assert _pending_key(engine) == PENDING_COLUMNS
        assert len(_rows(engine)) == DONE + 4
        with engine.connect() as connection:
            level = migration.revision_of(connection)
        # Off MySQL the revision changes nothing, so the schema reads as its level still.
        assert level == (down_revision(REVISION) if mysql else REVISION)
        migration.upgrade(url)  # and up again, over the same rows
        assert _pending_key(engine) == (MYSQL_PENDING_COLUMNS if mysql else PENDING_COLUMNS)
    finally:
        engine.dispose()


def test_the_helpers_run_twice_do_nothing_twice_and_refuse_a_bad_name(
    new_url: Callable[[str], str],
) -> None:
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    from sa_jobqueue.errors import ConfigurationError

    url = new_url("mariadb")
    engine = create_engine(url, poolclass=NullPool)
    try:
        migration.upgrade(url)
        with (
            engine.begin() as connection,
            Operations.context(MigrationContext.configure(connection)),
        ):
            migration.add_pending_index_status("jobs")  # at sajq_0013 already
            assert _pending_key(engine) == MYSQL_PENDING_COLUMNS
            migration.drop_pending_index_status("jobs")
            migration.drop_pending_index_status("jobs")
            assert _pending_key(engine) == PENDING_COLUMNS
            migration.add_pending_index_status("jobs")
            with pytest.raises(ConfigurationError, match="must be letters, digits and _"):
                migration.add_pending_index_status("jobs; drop")
        assert _pending_key(engine) == MYSQL_PENDING_COLUMNS
    finally:
        engine.dispose()
