"""Behind a transaction-mode PgBouncer whose pool is smaller than the handlers running.

Issue 45, item 11: transactional handlers that called `ctx.progress` each held a server
connection in their open transaction and waited for a second one to write the progress:
once more of them ran than the pool held, none could finish (0 of 60 jobs in 60 s, all
server connections idle in transaction), heartbeats starved and leases expired under live
handlers. What the library needs for itself must never wait behind the handlers' own
transactions: a handler's progress is written off its thread.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.support.apps.durable import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.pgbouncer import NoPgBouncerError, PgBouncer, running_pgbouncer
from tests.support.processes import Processes

pytestmark = pytest.mark.slow

POOL = 10
WORKERS, CONCURRENCY, JOBS = 3, 6, 60


@pytest.fixture
def small_pgbouncer(database_url: str) -> Iterator[PgBouncer]:
    try:
        with running_pgbouncer(database_url, pool_size=POOL) as bouncer:
            yield bouncer
    except NoPgBouncerError as error:
        pytest.fail(str(error), pytrace=False)


def test_transactional_handlers_reporting_progress_finish_behind_a_pool_smaller_than_them(
    committed, small_pgbouncer: PgBouncer, processes: Processes
):
    assert WORKERS * CONCURRENCY > POOL
    with Session(committed) as session, session.begin():
        ids = [job.id for job in jobs.enqueue_many(session, [("tx_progress", {})] * JOBS)]
    url = small_pgbouncer.url("transaction")
    workers = [
        processes.worker(
            "tests.support.apps.durable:jobs",
            *("--database-url", url, "--no-prepared-statements", "--no-listen"),
            *("--poll-interval", "0.2", "--sweep-interval", "0.5"),
            concurrency=CONCURRENCY,
            env={"SAJQ_LEASE": "10"},
        )
        for _ in range(WORKERS)
    ]

    def done() -> int:
        with Session(committed) as session:
            count = select(func.count()).where(Job.id.in_(ids), Job.status == "done")
            return int(session.scalar(count) or 0)

    wait_for(lambda: done() == JOBS, timeout=90, what=f"{JOBS} jobs done (now {done()})")
    with Session(committed) as session:
        rows = session.execute(select(Job.attempts, Job.progress).where(Job.id.in_(ids))).all()
        effects = session.scalar(select(func.count()).where(Effect.job_id.in_(ids)))
    assert {attempts for attempts, _ in rows} == {1}  # no lease expired under a live handler
    assert {progress for _, progress in rows} == {0.9}  # the last value, with the done
    assert effects == JOBS
    for worker in workers:
        assert worker.terminate(timeout=15) == 0, worker.output()
        assert "Traceback" not in worker.output()
