"""Revisions sajq_0013 and sajq_0014 (MySQL's indexes of pending and running jobs keyed on
status): over live jobs, and back.

On MariaDB each index held every row: a claim walked the finished jobs of its queue before
the first pending one (sajq_0013), and a limited kind's claim counted its running jobs, per
key too, over the whole table (sajq_0014). The test counts the rows and index entries one
claim reads (MariaDB's ``Handler_read_next`` and ``Handler_read_rnd_next``, not a time)
beside 2,000 done jobs, before and after the upgrade. On PostgreSQL and SQLite (partial
indexes already) the revisions change nothing. The test upgrades from each revision's own
``down_revision`` as the script states it, so it keeps working when revisions are
re-chained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import Connection, Engine, create_engine, insert, select, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobQueue, migration
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.registry import driver_for
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.migration import preflight
from sa_jobqueue.schema.status_indexes import PENDING, RUNNING, STATUS_INDEXES, StatusIndex
from tests.support.databases import DATABASES, scratch_url
from tests.support.models import Job
from tests.support.revisions import down_revision

DONE = 2000


@pytest.fixture
def new_url(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    with ExitStack() as stack:
        yield lambda database: stack.enter_context(scratch_url(database, request))


def _key(engine: Engine, index: StatusIndex) -> tuple[str, ...]:
    with engine.connect() as connection:
        key = index.key(connection, "jobs")
    assert key is not None, f"no {index.name('jobs')}"
    return key


def _fill(engine: Engine) -> None:
    """2,000 done jobs an hour old, ahead in claim order of 3 pending jobs and 1 running.

    The pending jobs have the keys k0, k1 and k2; the running one (another worker's, its
    lease live) has k0.
    """
    now = datetime.now(timezone.utc)
    old = now - timedelta(hours=1)
    done = [
        {"kind": "a", "payload": {}, "status": "done", "attempts": 1, "run_at": old,
         "finished_at": old, "concurrency_key": f"k{n % 3}"}
        for n in range(DONE)
    ]  # fmt: skip
    live = [
        {"kind": "a", "payload": {"n": n}, "status": "pending", "attempts": 0, "run_at": now,
         "concurrency_key": f"k{n}"}
        for n in range(3)
    ]  # fmt: skip
    running = {
        "kind": "a", "payload": {"n": 9}, "status": "running", "attempts": 1, "run_at": now,
        "locked_by": "w1", "locked_until": now + timedelta(minutes=5), "concurrency_key": "k0",
    }  # fmt: skip
    with engine.begin() as connection:
        connection.execute(insert(Job), done)
        connection.execute(insert(Job), [*live, running])


def _plain_claim(engine: Engine, connection: Connection) -> list[Claimed]:
    """A claim of up to 3 jobs of the queue (the claim's index: ``ix_jobs_pending``)."""
    return driver_for(engine, Job).job_claim(connection, "default", 3, "probe")


def _limited_claim(engine: Engine, connection: Connection) -> list[Claimed]:
    """A claim of kind "a" at most 5 running, 1 per key: it counts the running jobs, per key
    too (``ix_jobs_running``), so k0's pending job waits and k1's and k2's are claimed."""
    limits = {"a": Limits(max_running=5, max_running_per_key=1)}
    driver = driver_for(engine, Job, limits=limits)
    return driver.job_claim_limited(connection, "a", ["default"], 3, "probe")


#: Per index: the claim that reads it, how many jobs it claims, the most rows and index
#: entries it may read once the index has status in its key.
CLAIMS = {
    PENDING.suffix: (_plain_claim, 3, 5),
    RUNNING.suffix: (_limited_claim, 2, 60),
}

_READS = text(
    "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_read_rnd_next')"
)


def _claim_reads(engine: Engine, index: StatusIndex) -> tuple[int, int]:
    """(jobs claimed, rows and index entries read) by `index`'s claim, rolled back."""
    claim = CLAIMS[index.suffix][0]

    def reads(connection: Connection) -> int:
        return sum(int(value) for _, value in connection.execute(_READS))

    with engine.connect() as connection:
        before = reads(connection)
        connection.rollback()
        with connection.begin() as transaction:
            claimed = claim(engine, connection)
            transaction.rollback()
        after = reads(connection)
    return len(claimed), after - before


def _rows(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as connection:
        query = select(Job.id, Job.status, Job.attempts, Job.locked_by).order_by(Job.id)
        return [tuple(row) for row in connection.execute(query)]


def _warned(engine: Engine, index: StatusIndex) -> bool:
    """Whether a worker starting on the table says `index` lacks status, naming its revision."""
    said = f"{index.name('jobs')} has no status in its key (revision {index.revision})"
    return any(said in warning for warning in preflight.check_worker(engine, Job))


@pytest.mark.parametrize("index", STATUS_INDEXES, ids=lambda index: index.revision)
@pytest.mark.parametrize("database", DATABASES)
def test_upgrade_over_pending_running_and_done_jobs_keys_mysqls_index_on_status(
    database: str, index: StatusIndex, new_url: Callable[[str], str]
) -> None:
    url = new_url(database)
    engine = create_engine(url, poolclass=NullPool)
    revision = index.revision
    mysql = database == "mariadb"
    _, claimed_then, reads_after = CLAIMS[index.suffix]
    try:
        migration.upgrade(url, revision=down_revision(revision))
        assert _key(engine, index) == index.columns
        _fill(engine)
        before = _rows(engine)
        if mysql:  # the claim reads every done job too
            claimed, read = _claim_reads(engine, index)
            assert claimed == claimed_then
            assert read >= DONE
            assert _warned(engine, index)  # once, at a worker's start

        migration.upgrade(url, revision=revision)

        assert _key(engine, index) == (index.mysql_columns if mysql else index.columns)
        assert _rows(engine) == before
        with engine.connect() as connection:
            # Off MySQL the revisions change nothing, so the schema reads as the latest.
            latest = revision if mysql else migration.latest()[0]
            assert migration.revision_of(connection) == latest
        if mysql:  # now it reads the live jobs alone
            claimed, read = _claim_reads(engine, index)
            assert claimed == claimed_then
            assert read <= reads_after
        assert not _warned(engine, index)
        jobs = JobQueue(Job)
        jobs.task("a")(lambda ctx: None)
        # The pending jobs run; the running one (another worker's, its lease live) stays.
        assert jobs.worker(engine, queues=["default"], retention={}).drain() == 3
        statuses = [status for _, status, _, _ in _rows(engine)]
        assert statuses == ["done"] * (DONE + 3) + ["running"]

        migration.downgrade(url, revision=down_revision(revision))
        assert _key(engine, index) == index.columns
        assert len(_rows(engine)) == DONE + 4
        with engine.connect() as connection:
            level = migration.revision_of(connection)
        assert level == (down_revision(revision) if mysql else migration.latest()[0])
        migration.upgrade(url)  # and up again, over the same rows
        assert _key(engine, index) == (index.mysql_columns if mysql else index.columns)
        assert preflight.check_worker(engine, Job) == []
    finally:
        engine.dispose()


#: Per index: its helpers (add, drop).
HELPERS = {
    PENDING.suffix: (migration.add_pending_index_status, migration.drop_pending_index_status),
    RUNNING.suffix: (migration.add_running_index_status, migration.drop_running_index_status),
}


@pytest.mark.parametrize("index", STATUS_INDEXES, ids=lambda index: index.revision)
def test_the_helpers_run_twice_do_nothing_twice_and_refuse_a_bad_name(
    index: StatusIndex, new_url: Callable[[str], str]
) -> None:
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    from sa_jobqueue.errors import ConfigurationError

    add, drop = HELPERS[index.suffix]
    url = new_url("mariadb")
    engine = create_engine(url, poolclass=NullPool)
    try:
        migration.upgrade(url)
        with (
            engine.begin() as connection,
            Operations.context(MigrationContext.configure(connection)),
        ):
            add("jobs")  # at its revision already
            assert _key(engine, index) == index.mysql_columns
            drop("jobs")
            drop("jobs")
            assert _key(engine, index) == index.columns
            add("jobs")
            with pytest.raises(ConfigurationError, match="must be letters, digits and _"):
                add("jobs; drop")
        assert _key(engine, index) == index.mysql_columns
    finally:
        engine.dispose()
