"""Wake-ups on commit (LISTEN/NOTIFY), scheduled jobs, and polling as the safety net.

Workers here poll every 30 s, so a job that runs within a few seconds was started
by a notification (or a scheduled wake-up), never by polling. Waits are generous
deadlines on conditions, never timing assertions.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, func, make_url, select, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobContext, JobQueue, Retry
from sa_jobqueue.migration.scripts import channel_name
from sa_jobqueue.worker.listener import APPLICATION_NAME, Listener, PollingNotifier, parse_payload
from sa_jobqueue.worker.worker import Worker
from tests.support.helpers import wait_for as _wait_for
from tests.support.models import Job, new_queue

SLOW_POLL = 30.0  # far longer than any wait below: only a wake-up can start a job in time
DEADLINE = 10.0  # generous, for a loaded 2-core machine


def wait_for(condition: Any, timeout: float = DEADLINE, what: str = "condition") -> None:
    _wait_for(condition, timeout, what)


class Recorder:
    """A task that records each start (job id, attempt, wall time)."""

    def __init__(self) -> None:
        self.starts: list[tuple[int, int, float]] = []
        self.lock = threading.Lock()

    def __call__(self, ctx: JobContext) -> None:
        with self.lock:
            self.starts.append((ctx.id, ctx.attempt, time.time()))

    def ids(self) -> list[int]:
        with self.lock:
            return [job_id for job_id, _, _ in self.starts]


def queue_with(recorder: Recorder, queue: str, kind: str = "ping") -> JobQueue[Job]:
    jobs = new_queue()
    jobs.task(kind, queue=queue)(recorder)
    return jobs


@contextlib.contextmanager
def tx(engine: Engine) -> Iterator[Session]:
    """A committed transaction whose objects stay readable after the commit."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session


@contextlib.contextmanager
def running(worker: Worker[Job], *, name: str = "worker") -> Iterator[Worker[Job]]:
    thread = threading.Thread(target=worker.run, name=name, daemon=True)
    thread.start()
    try:
        if worker.listen:
            wait_for(
                lambda: worker.notifier.connected.is_set(),
                what="the listener to connect",
            )
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()


def warm_up(engine: Engine, jobs: JobQueue[Job], recorder: Recorder, kind: str = "ping") -> None:
    """Run one job, so the worker's start-up and reconnect wake-ups are spent."""
    with tx(engine) as session:
        job = jobs.enqueue(session, kind, {"warm_up": True})
    wait_for(lambda: job.id in recorder.ids(), what="the warm-up job")


@contextlib.contextmanager
def listening(database_url: str, table: str = "jobs") -> Iterator[psycopg.Connection[Any]]:
    """A LISTEN connection of the test's own, on the table's channel."""
    url = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'LISTEN "{channel_name(table)}"')
        yield conn


def heard(conn: psycopg.Connection[Any], quiet: float = 0.5) -> list[str]:
    """Payloads received until `quiet` seconds pass without one."""
    payloads: list[str] = []
    while True:
        batch = [n.payload for n in conn.notifies(timeout=quiet)]
        if not batch:
            return payloads
        payloads += batch


def test_commit_wakes_an_idle_worker_long_before_the_poll(committed: Engine) -> None:
    recorder = Recorder()
    jobs = queue_with(recorder, "wake")
    with running(jobs.worker(committed, poll_interval=SLOW_POLL)):
        warm_up(committed, jobs, recorder)
        with tx(committed) as session:
            by_enqueue = jobs.enqueue(session, "ping", {"n": 1})
        wait_for(lambda: by_enqueue.id in recorder.ids(), what="the enqueued job")
        with tx(committed) as session:
            plain = Job(kind="ping", queue="wake")
            session.add(plain)  # plain ORM, no library call
        wait_for(lambda: plain.id in recorder.ids(), what="the session.add job")


def test_rollback_notifies_nobody_and_runs_nothing(committed: Engine, database_url: str) -> None:
    recorder = Recorder()
    jobs = queue_with(recorder, "rollback")
    with listening(database_url) as listener, running(jobs.worker(committed, poll_interval=0.2)):
        warm_up(committed, jobs, recorder)
        heard(listener, quiet=0.3)  # the warm-up's notification
        with Session(committed) as session, session.begin():
            jobs.enqueue(session, "ping", {"rolled": "back"})
            jobs.enqueue_many(session, [("ping", {"i": i}) for i in range(10)])
            session.rollback()
        assert heard(listener) == []
        # The worker polls every 0.2 s here: it had ample chances to run a ghost job.
        assert len(recorder.ids()) == 1
        with committed.connect() as conn:
            assert conn.execute(select(func.count()).select_from(Job)).scalar() == 1
        # The same enqueue, committed, is heard: the listener above could fail.
        with tx(committed) as session:
            job = jobs.enqueue(session, "ping", {"committed": True})
        assert heard(listener) == ["rollback"]
        wait_for(lambda: job.id in recorder.ids(), what="the committed job")


def test_raw_sql_insert_by_another_program_wakes_the_worker(committed: Engine) -> None:
    recorder = Recorder()
    jobs = queue_with(recorder, "raw")
    with running(jobs.worker(committed, poll_interval=SLOW_POLL)):
        warm_up(committed, jobs, recorder)
        with committed.begin() as conn:
            job_id = conn.execute(
                text("INSERT INTO jobs (kind, queue) VALUES ('ping', 'raw') RETURNING id")
            ).scalar_one()
        wait_for(lambda: job_id in recorder.ids(), what="the raw-SQL job")


def test_one_notification_per_queue_not_per_row(committed: Engine, database_url: str) -> None:
    jobs = new_queue()
    with listening(database_url) as listener:
        with tx(committed) as session:
            jobs.enqueue_many(
                session, [{"kind": "k", "queue": ("a" if i % 2 else "b")} for i in range(1000)]
            )
        assert sorted(heard(listener)) == ["a", "b"]

        # Many ORM flushes and statements in one transaction: identical payloads fold.
        with tx(committed) as session:
            for _ in range(3):
                session.add_all([Job(kind="k", queue="c") for _ in range(700)])
                session.flush()
        assert heard(listener) == ["c"]

        # Only jobs due later: the payload says when the earliest one is due.
        with tx(committed) as session:
            jobs.enqueue_many(
                session, [{"kind": "k", "queue": "d", "delay": 60 + i} for i in range(5)]
            )
            due = session.scalar(select(func.min(Job.run_at)).where(Job.queue == "d"))
        (payload,) = heard(listener)
        queue, run_at = parse_payload(payload)
        assert queue == "d"
        assert due is not None
        assert run_at == pytest.approx(due.timestamp(), abs=1e-3)

        # Rows that are not pending (an import of finished jobs) wake nobody.
        with committed.begin() as conn:
            conn.execute(text("INSERT INTO jobs (kind, status) VALUES ('k', 'done')"))
        assert heard(listener) == []


def test_listener_reconnects_and_runs_what_was_enqueued_meanwhile(
    committed: Engine, database_url: str, server_url: str
) -> None:
    database = make_url(database_url).database
    admin = create_engine(server_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    recorder = Recorder()
    jobs = queue_with(recorder, "reconnect")
    with running(jobs.worker(committed, poll_interval=SLOW_POLL)) as worker:
        warm_up(committed, jobs, recorder)
        listener = worker.notifier
        assert isinstance(listener, Listener)
        old_pid = listener.backend_pid
        with committed.connect() as conn:
            name = conn.execute(
                text("SELECT application_name FROM pg_stat_activity WHERE pid = :pid"),
                {"pid": old_pid},
            ).scalar()
            assert name == APPLICATION_NAME
        with (
            committed.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
            admin.connect() as other_database,
        ):
            # Keep the listener out until the job is committed: new connections to this
            # scratch database are refused; established ones, like `conn`, carry on.
            other_database.execute(text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false'))
            try:
                # Waits until the backend is gone; then enqueue while the listener is deaf.
                assert conn.execute(
                    text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": old_pid}
                )
                job_id, enqueued_at = conn.execute(
                    text(
                        "INSERT INTO jobs (kind, queue) VALUES ('ping', 'reconnect') "
                        "RETURNING id, clock_timestamp()"
                    )
                ).one()
                wait_for(lambda: listener.reconnects >= 2, what="a refused reconnection")
            finally:
                other_database.execute(text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'))
        wait_for(lambda: job_id in recorder.ids(), what="the job enqueued while disconnected")
        new_pid = listener.backend_pid
        assert new_pid is not None
        assert new_pid != old_pid
        with committed.connect() as conn:
            started = conn.execute(
                text("SELECT backend_start FROM pg_stat_activity WHERE pid = :pid"),
                {"pid": new_pid},
            ).scalar()
        # The job was committed before the new connection existed: no notification
        # could reach the worker; the wake-up after reconnecting ran it.
        assert started is not None
        assert started > enqueued_at
        # And notifications work again on the new connection.
        with tx(committed) as session:
            job = jobs.enqueue(session, "ping", {"after": "reconnect"})
        wait_for(lambda: job.id in recorder.ids(), what="a job after the reconnect")


def test_scheduled_jobs_run_at_their_time_not_at_the_next_poll(committed: Engine) -> None:
    recorder = Recorder()
    jobs = queue_with(recorder, "later")
    with tx(committed) as session:
        # Before the worker starts: it learns this one from the table, not a notification.
        before = jobs.enqueue(session, "ping", {"n": "before"}, delay=timedelta(seconds=2))
    with running(jobs.worker(committed, poll_interval=SLOW_POLL)):
        with tx(committed) as session:
            # While it sleeps: it learns this one from the notification's payload.
            during = jobs.enqueue(session, "ping", {"n": "during"}, delay=3)
        wait_for(lambda: {before.id, during.id} <= set(recorder.ids()), what="scheduled jobs")
    started = {job_id: at for job_id, _, at in recorder.starts}
    for job in (before, during):
        # Not before its run_at (same machine, same clock; a little slack for rounding),
        # and long before the 30 s poll.
        assert started[job.id] >= job.run_at.timestamp() - 0.05
        assert started[job.id] < job.run_at.timestamp() + SLOW_POLL / 3


class _SlowWallClock:
    """The `time` module as a worker whose wall clock is 20 s slow sees it."""

    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    @staticmethod
    def time() -> float:
        return time.time() - 20.0


def test_a_worker_whose_clock_is_slow_still_starts_a_notified_job_on_time(
    committed: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Notified run_at values are placed by the database's clock, not the worker's."""
    recorder = Recorder()
    jobs = queue_with(recorder, "skewed")
    monkeypatch.setattr("sa_jobqueue.worker.loop.time", _SlowWallClock)  # its wall clock
    with running(jobs.worker(committed, poll_interval=SLOW_POLL)):
        with tx(committed) as session:
            job = jobs.enqueue(session, "ping", {}, delay=2)
        wait_for(lambda: job.id in recorder.ids(), timeout=15, what="the scheduled job")
    (started,) = [at for job_id, _, at in recorder.starts if job_id == job.id]
    # With the worker's clock it would start 20 s late; by the database's, about on time.
    assert started < job.run_at.timestamp() + 5


def test_a_retry_with_a_delay_runs_at_its_time(committed: Engine) -> None:
    attempts: list[float] = []

    def flaky(ctx: JobContext) -> None:
        attempts.append(time.time())
        if ctx.attempt == 1:
            raise Retry(delay=1.0)

    jobs = new_queue()
    jobs.task("flaky", queue="retry")(flaky)
    with running(jobs.worker(committed, poll_interval=SLOW_POLL)):
        with tx(committed) as session:
            jobs.enqueue(session, "flaky")
        wait_for(lambda: len(attempts) == 2, what="the retried attempt")
    assert 1.0 - 0.05 <= attempts[1] - attempts[0] < SLOW_POLL / 3


def test_listen_false_works_by_polling(committed: Engine, database_url: str) -> None:
    recorder = Recorder()
    jobs = queue_with(recorder, "polling")
    worker = jobs.worker(committed, poll_interval=0.3, listen=False)
    with running(worker):
        with tx(committed) as session:
            job = jobs.enqueue(session, "ping")
        wait_for(lambda: job.id in recorder.ids(), what="the polled job")
        assert isinstance(worker.notifier, PollingNotifier)
        database = make_url(database_url).database
        with committed.connect() as conn:
            listeners = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = :db AND application_name = :name"
                ),
                {"db": database, "name": APPLICATION_NAME},
            ).scalar()
        assert listeners == 0


def test_one_notification_costs_each_idle_worker_one_claim_at_most(committed: Engine) -> None:
    recorder = Recorder()
    jobs = queue_with(recorder, "herd")
    queries: list[tuple[str, str]] = []

    def counted(name: str, worker: Worker[Job]) -> None:
        """Count the driver operations (not SQL texts) each worker runs."""
        claim, next_due = worker.driver.job_claim, worker.driver.queue_next_due

        def claim_counted(*args: Any) -> Any:
            if args[1] == "herd":  # the claim statement of the queue under test
                queries.append((name, "claim"))
            return claim(*args)

        def next_due_counted(*args: Any) -> Any:
            queries.append((name, "next_run_at"))
            return next_due(*args)

        worker.driver.job_claim = claim_counted  # type: ignore[method-assign,assignment]
        worker.driver.queue_next_due = next_due_counted  # type: ignore[method-assign,assignment]

    def settled() -> bool:
        before = len(queries)
        time.sleep(0.5)
        return len(queries) == before

    workers = [jobs.worker(committed, poll_interval=SLOW_POLL) for _ in range(3)]
    for i, worker in enumerate(workers):
        counted(f"herd-{i}", worker)
    with contextlib.ExitStack() as stack:
        for i, worker in enumerate(workers):
            stack.enter_context(running(worker, name=f"herd-{i}"))
        warm_up(committed, jobs, recorder)
        wait_for(settled, what="the workers to go idle")
        queries.clear()
        processed = [w.processed for w in workers]
        with tx(committed) as session:
            job = jobs.enqueue(session, "ping")
        wait_for(lambda: job.id in recorder.ids(), what="the job")
        wait_for(settled, what="the workers to go idle again")
        seen = list(queries)
    (winner,) = [i for i, w in enumerate(workers) if w.processed > processed[i]]
    names = {f"herd-{i}" for i in range(3)}
    winner_name = f"herd-{winner}"
    for name in names:
        claims = sum(1 for n, kind in seen if n == name and kind == "claim")
        lookups = sum(1 for n, kind in seen if n == name and kind == "next_run_at")
        if name == winner_name:
            # Its claim, then the round that acknowledges the job (and claims nothing),
            # and one look at the next run_at since its job may have been rescheduled.
            assert claims <= 2, seen
            assert lookups <= 1, seen
        else:
            assert claims == 1, seen
            assert lookups == 0, seen
