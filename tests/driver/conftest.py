"""The conformance suite's fixtures: every registered driver, on a database of its dialect.

`db` is parametrized over the databases of `ENGINES`: a new driver registers its
dialect in `sa_jobqueue.driver.DRIVERS` and names, in `ENGINES`, the fixture that gives
a committed engine of that database; every test of tests/driver/ then runs against it,
unchanged. A dialect no server here can run is in `NOT_HERE`, with the reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
from sqlalchemy import Connection, Engine, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue.core.limits import Limits, check_limits
from sa_jobqueue.driver import Claimed, Driver, driver_for
from tests.support.models import Job

#: Dialect name -> the fixture that gives a committed (truncated afterwards) engine of it.
ENGINES = {
    "mariadb": "mariadb_committed",
    "postgresql": "committed",
    "sqlite": "sqlite_committed",
}

#: Registered dialects the suite cannot run here, and why (tests/unit checks the list).
NOT_HERE = {
    "mysql": "no MySQL 8 server can be installed here; MariaDB runs the same statements",
}

T = TypeVar("T")

OWNER = "worker-1"
OTHER = "worker-2"

#: The limits of the kinds the conformance drivers know about.
LIMITS: dict[str, Limits] = {
    "limited": check_limits(max_running=2),
    "per_key": check_limits(max_running_per_key=1),
    "rated": check_limits(rate_limit=(2, 60.0)),
}


@pytest.fixture(params=sorted(ENGINES))
def db(request: pytest.FixtureRequest) -> Engine:
    """A committed engine of each registered driver's database."""
    engine: Engine = request.getfixturevalue(ENGINES[request.param])
    return engine


@pytest.fixture
def driver(db: Engine) -> Driver:
    """`db`'s driver, as a worker builds it: leases by kind, the limited kinds of `LIMITS`."""
    return driver_for(db, Job, leases={"short": 5.0}, default_lease=60.0, limits=LIMITS)


@pytest.fixture
def make_driver(db: Engine) -> Callable[..., Driver]:
    """`db`'s driver with other options (``kinds``, ``limits``...)."""

    def make(**options: Any) -> Driver:
        options.setdefault("default_lease", 60.0)
        return driver_for(db, Job, **options)

    return make


def add(engine: Engine, n: int = 1, **columns: Any) -> list[int]:
    """Insert `n` due pending jobs (plain ORM rows), committed; return their ids in order."""
    columns.setdefault("kind", "plain")
    with Session(engine) as session, session.begin():
        jobs = [Job(payload={"i": i}, **columns) for i in range(n)]
        session.add_all(jobs)
        session.flush()
        return [int(job.id) for job in jobs]


def later(seconds: float) -> datetime:
    return datetime.now(timezone.utc) + timedelta(seconds=seconds)


def claim(
    engine: Engine, driver: Driver, n: int = 1, owner: str = OWNER, queue: str = "default"
) -> list[Claimed]:
    """Claim up to `n` jobs of `queue` for `owner`, committed."""
    with engine.begin() as conn:
        return driver.job_claim(conn, queue, n, owner)


def row(engine: Engine, job_id: int) -> Any:
    """The job's row as committed now."""
    with engine.connect() as conn:
        return conn.execute(select(Job.__table__).where(Job.id == job_id)).one()


def expire(engine: Engine, ids: Iterable[int]) -> None:
    """Make the leases of `ids` expired (as if their worker had died a while ago)."""
    with engine.begin() as conn:
        past = datetime.now(timezone.utc) - timedelta(minutes=5)
        conn.execute(update(Job).where(Job.id.in_(list(ids))).values(locked_until=past))


def reclaimed(engine: Engine, driver: Driver, job: Claimed, owner: str = OTHER) -> Claimed:
    """`job`'s lease expired, swept back to pending and claimed again by `owner`."""
    expire(engine, [job.id])
    with engine.begin() as conn:
        driver.job_sweep(conn, 10)
    [again] = claim(engine, driver, 1, owner, job.queue)
    assert again.id == job.id
    assert again.attempts == job.attempts + 1
    return again


#: Dialect name -> the execution options of a worker's own transactions there (see
#: `sa_jobqueue.worker`: READ COMMITTED on MySQL, where REPEATABLE READ's gap locks held
#: by a stalled worker would hold up the others).
WORKER_OPTIONS: dict[str, dict[str, Any]] = {"mariadb": {"isolation_level": "READ COMMITTED"}}

#: Dialect name -> a query counting the lock waits in progress in this database (a
#: session blocked on a row): another test process's waits are on another database.
LOCK_WAITS = {
    "mariadb": "SELECT count(*) FROM information_schema.innodb_trx t"
    " JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id"
    " WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()",
    "postgresql": "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE NOT l.granted AND a.datname = current_database()",
}

#: Dialect name -> the pause between two reads of `LOCK_WAITS`. InnoDB refreshes the
#: snapshot behind ``information_schema.innodb_trx`` only when it was last read more
#: than 0.1 s before (``CACHE_MIN_IDLE_TIME_US``): polled faster, it shows the same stale
#: snapshot for ever (a wait begun after the first read was never seen under load).
LOCK_WAITS_POLL = {"mariadb": 0.25, "postgresql": 0.02}


def wait_for_a_lock_wait(engine: Engine, timeout: float = 30.0) -> None:
    """Return once a session of `engine`'s database waits for a lock (fail after `timeout`)."""
    name = engine.dialect.name
    query = text(LOCK_WAITS[name])
    deadline = time.monotonic() + timeout
    with engine.connect() as conn:
        while conn.execute(query).scalar_one() == 0:
            conn.rollback()  # a new snapshot each time
            assert time.monotonic() < deadline, "no session ever waited for a lock"
            time.sleep(LOCK_WAITS_POLL[name])


def writing_beside(driver: Driver, open_: Connection, write: Callable[[], T]) -> T:
    """`write`'s result, run while `open_`'s transaction is still open, where it can be.

    With row locks (``driver.supports_skip_locked``) `write` runs now, beside the open
    transaction, and must not wait for it (it fails after 30 s if it does). Where
    writers take turns (SQLite) no write can run beside another: `write` waits for
    `open_`'s COMMIT, which this then makes, and its result is what that turn gave.
    """
    if driver.supports_skip_locked:
        got: list[T] = []
        thread = threading.Thread(target=lambda: got.append(write()))
        thread.start()
        thread.join(30)
        assert not thread.is_alive(), "the write waited for the open transaction"
        return got[0]
    waited: list[T] = []
    thread = threading.Thread(target=lambda: waited.append(write()))
    thread.start()
    time.sleep(0.2)
    assert waited == []  # the one writer is `open_`
    open_.commit()
    thread.join(30)
    assert not thread.is_alive(), "the write never got its turn"
    return waited[0]
