"""The worker, the CLI and retention behind a real PgBouncer (tests/support/pgbouncer.py).

Transaction pooling breaks psycopg's server-side prepared statements, strands
session-level advisory locks and cannot carry LISTEN; session pooling behaves like
a direct connection. Worker processes are real, and so is PgBouncer.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue.core.engines import engine_arguments
from tests.support.apps.lesson import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.pgbouncer import NoPgBouncerError, PgBouncer, running_pgbouncer
from tests.support.processes import Proc, Processes

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pgbouncer(database_url: str) -> Iterator[PgBouncer]:
    try:
        with running_pgbouncer(database_url) as bouncer:
            yield bouncer
    except NoPgBouncerError as error:
        pytest.fail(str(error), pytrace=False)


def through(bouncer: PgBouncer, mode: str) -> Engine:
    """An engine through `bouncer`, with psycopg's prepared statements off."""
    url, connect_args = engine_arguments(bouncer.url(mode), prepared_statements=False)
    return create_engine(url, connect_args=connect_args, pool_size=2)


@pytest.fixture
def spawn(processes: Processes) -> Callable[..., Proc]:
    # The lesson's lease-mode handlers write their effects over DATABASE_URL (direct).
    def start(*args: str) -> Proc:
        return processes.command(*args, env={"SAJQ_LEASE": "10"})

    return start


def worker_args(url: str, *extra: str) -> list[str]:
    return [
        *("worker", "tests.support.apps.lesson:jobs", "--database-url", url),
        *("--concurrency", "2", "--poll-interval", "0.2", "--sweep-interval", "0.5", *extra),
    ]


def statuses(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(select(Job.status, func.count()).group_by(Job.status)).all())


def effects_per_job(engine: Engine) -> dict[int, int]:
    with engine.connect() as conn:
        rows = conn.execute(select(Effect.job_id, func.count()).group_by(Effect.job_id)).all()
        return {job_id: n for job_id, n in rows}


def test_concurrent_workers_behind_transaction_pgbouncer_run_every_job_exactly_once(
    committed, pgbouncer, spawn
):
    pooled = through(pgbouncer, "transaction")
    try:
        ids = []
        # One job per transaction first: the same INSERT run more than psycopg's
        # prepare_threshold (5) times would be prepared, and break, if it could be.
        for i in range(20):
            with Session(pooled) as session, session.begin():
                ids.append(jobs.enqueue(session, "record_tx", {"i": i}).id)
        with Session(pooled) as session, session.begin():
            batch = [("record" if i % 2 else "record_tx", {"i": i}) for i in range(180)]
            ids += [job.id for job in jobs.enqueue_many(session, batch)]
    finally:
        pooled.dispose()
    url = pgbouncer.url("transaction")
    workers = [
        spawn(*worker_args(url, "--no-prepared-statements", "--no-listen")) for _ in range(3)
    ]
    wait_for(
        lambda: statuses(committed).get("done") == 200,
        timeout=180,
        what=f"200 jobs done behind PgBouncer (now {statuses(committed)})",
    )
    assert effects_per_job(committed) == dict.fromkeys(ids, 1)
    for worker in workers:
        assert worker.terminate() == 0, worker.output()
        log = worker.output()
        assert "prepared statement" not in log, log
        assert "Traceback" not in log, log


def test_a_worker_behind_session_pgbouncer_listens_and_runs_jobs(committed, pgbouncer, spawn):
    worker = spawn(*worker_args(pgbouncer.url("session"), "--poll-interval", "30"))
    wait_for(lambda: " started: " in worker.output(), timeout=60, what="the worker to start")
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("record", {"i": i}) for i in range(20)])
    # With a 30 s poll, only the notification can get these done this soon.
    wait_for(lambda: statuses(committed).get("done") == 20, timeout=25, what="20 jobs done")
    assert "heard nothing of its own test notification" not in worker.output()
    assert worker.terminate() == 0, worker.output()


def seed_done(engine: Engine, n: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, finished_at)"
                " SELECT 'k', 'done', 1, now() - interval '2 days' FROM generate_series(1, :n)"
            ),
            {"n": n},
        )


def test_prune_behind_transaction_pgbouncer_leaves_no_lock_for_a_direct_prune(
    committed, pgbouncer, spawn
):
    url = pgbouncer.url("transaction")
    # A whole prune through the pooler, then one over a direct connection.
    seed_done(committed, 50)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "sa_jobqueue.cli", "prune", "--older-than", "1d"),
            *("--batch-size", "7", "--database-url", url, "--no-prepared-statements"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "deleted 50 jobs" in done.stdout
    seed_done(committed, 3)
    direct = jobs.prune(committed, older_than=timedelta(days=1))
    assert not direct.locked_out
    assert direct.total == 3

    # A pruner killed in the middle, behind the pooler: its server connection lives
    # on in PgBouncer's pool, and a session-level lock would stay on it for good.
    seed_done(committed, 20000)
    pruner = spawn(
        *("prune", "--older-than", "1d", "--batch-size", "2"),
        *("--database-url", url, "--no-prepared-statements"),
    )
    wait_for(
        lambda: statuses(committed).get("done", 0) < 19990,
        timeout=60,
        what="the pooled pruner to delete some rows",
    )
    pruner.popen.send_signal(signal.SIGKILL)
    pruner.popen.wait(10)
    left = statuses(committed).get("done", 0)
    assert left > 0, "the pruner finished before it was killed; seed more rows"
    results = []

    def direct_prune_runs() -> bool:
        results.append(jobs.prune(committed, older_than=timedelta(days=1), batch_size=5000))
        return not results[-1].locked_out

    wait_for(direct_prune_runs, timeout=20, what="a direct prune that is not locked out")
    assert statuses(committed).get("done", 0) == 0


LISTEN_WARNING = "heard nothing of its own test notification"
POOLER_LINE = "goes through a transaction-mode pooler"
NOT_LINKED = "when not linked"


def not_linked_after_notifies(engine: Engine, bouncer: PgBouncer) -> int:
    """How many notifications PgBouncer got from server connections it holds for no client.

    A server connection left LISTENing through a transaction pooler receives each
    NOTIFY of the channel, which PgBouncer logs as a packet "when not linked". Sends
    some (new jobs, then their cancel: the queue and the ended channels) and counts.
    """
    before = bouncer.log().count(NOT_LINKED)
    with Session(engine) as session, session.begin():
        ids = [job.id for job in jobs.enqueue_many(session, [("record", {"i": 0})] * 3)]
    with Session(engine) as session, session.begin():
        jobs.cancel(session, ids)
    # A NOTIFY reaches a listening server connection at once; give PgBouncer a moment.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and bouncer.log().count(NOT_LINKED) == before:
        time.sleep(0.1)
    return bouncer.log().count(NOT_LINKED) - before


def test_a_worker_through_transaction_pgbouncer_says_so_at_start_and_leaves_no_listener(
    committed, pgbouncer, spawn
):
    worker = spawn(
        *worker_args(pgbouncer.url("transaction"), "--no-prepared-statements"),
        *("--poll-interval", "0.5"),
    )
    wait_for(lambda: POOLER_LINE in worker.output(), timeout=60, what="the pooler line")
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("record", {"i": i}) for i in range(5)])
    wait_for(lambda: statuses(committed).get("done") == 5, timeout=30, what="5 jobs (polled)")
    log = worker.output()
    assert log.count(POOLER_LINE) == 1
    assert "--listen-url" in log
    assert "--no-listen" in log
    assert LISTEN_WARNING not in log  # found at start, before any LISTEN
    assert worker.terminate() == 0, log
    # Nothing LISTENs through the pooler after the worker stopped: notifications of
    # new jobs reach no server connection PgBouncer holds for no client.
    assert not_linked_after_notifies(committed, pgbouncer) == 0


def test_jobs_wait_through_transaction_pgbouncer_says_so_and_reads_the_row(
    committed, pgbouncer, caplog
):
    pooled = through(pgbouncer, "transaction")
    try:
        with Session(committed) as session, session.begin():
            job_id = jobs.enqueue(session, "record", {"i": 1}).id
        with committed.begin() as conn:
            conn.execute(text("UPDATE jobs SET status = 'done', finished_at = now()"))
        with caplog.at_level("WARNING", logger="sa_jobqueue.ops.waiting"):
            for _ in range(2):
                assert jobs.wait(pooled, job_id, timeout=10, poll_interval=0.2).status == "done"
        said = [r.getMessage() for r in caplog.records if POOLER_LINE in r.getMessage()]
        assert len(said) == 1  # once per engine
        assert "direct URL" in said[0]
        assert not_linked_after_notifies(committed, pgbouncer) == 0
    finally:
        pooled.dispose()


def test_listen_url_gives_the_listener_a_direct_connection_beside_the_pooler(
    committed, pgbouncer, spawn, database_url
):
    worker = spawn(
        *worker_args(pgbouncer.url("transaction"), "--no-prepared-statements"),
        *("--listen-url", database_url, "--poll-interval", "30"),
    )
    wait_for(lambda: " started: " in worker.output(), timeout=60, what="the worker to start")
    # Its own test notification arrives; then enqueues wake it long before a 30 s poll.
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("record_tx", {"i": i}) for i in range(10)])
    wait_for(lambda: statuses(committed).get("done") == 10, timeout=20, what="10 jobs done")
    log = worker.output()
    assert LISTEN_WARNING not in log
    assert worker.terminate() == 0, log


def test_jobs_wait_async_through_transaction_pgbouncer_says_so_and_reads_the_row(
    committed, pgbouncer, caplog
):
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    url, connect_args = engine_arguments(pgbouncer.url("transaction"), prepared_statements=False)

    async def main(job_id: int) -> list[str]:
        pooled = create_async_engine(url, connect_args=connect_args, pool_size=2)
        try:
            return [
                (await jobs.wait_async(pooled, job_id, timeout=10, poll_interval=0.2)).status
                for _ in range(2)
            ]
        finally:
            await pooled.dispose()

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "record", {"i": 1}).id
    with committed.begin() as conn:
        conn.execute(text("UPDATE jobs SET status = 'done', finished_at = now()"))
    with caplog.at_level("WARNING", logger="sa_jobqueue.ops.waiting"):
        assert asyncio.run(main(job_id)) == ["done", "done"]
    said = [r.getMessage() for r in caplog.records if POOLER_LINE in r.getMessage()]
    assert len(said) == 1
