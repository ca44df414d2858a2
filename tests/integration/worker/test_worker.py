"""The worker in-process, against real PostgreSQL: drain, fencing, retries, signals, modes.

Crashes and signals with real processes live in test_processes.py.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext, JobQueue, Retry
from sa_jobqueue.driver.postgres import claims, completion, runtime
from sa_jobqueue.retry import Backoff
from sa_jobqueue.worker.attempt import Outcome, Result
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database, on_databases

FAST = Backoff(base=0.2, factor=2, cap=5, jitter=0)


def effects(engine, job_id=None):
    with Session(engine) as s:
        query = select(Effect.job_id, Effect.attempt).order_by(Effect.id)
        if job_id is not None:
            query = query.where(Effect.job_id == job_id)
        return [tuple(r) for r in s.execute(query)]


def row(engine, job_id):
    with Session(engine) as s:
        job = s.get_one(Job, job_id)
        s.expunge(job)
        return job


def enqueue(engine, jobs, kind, payload=None, **options):
    with Session(engine) as s, s.begin():
        return jobs.enqueue(s, kind, payload, **options).id


def make_due(engine, *ids):
    """Skip a backoff delay: the retry's timing lives in the row, so we move it there."""
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id.in_(ids)).values(run_at=func.now()))


def recording_queue(engine, **task_options) -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("record", backoff=FAST, **task_options)
    def record(ctx: JobContext) -> None:
        with Session(engine) as s, s.begin():
            s.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=str(ctx.payload)))

    return jobs


# -- drain ---------------------------------------------------------------------


@every_database
def test_drain_runs_every_due_job_once_and_returns_the_count(committed):
    jobs = recording_queue(committed)
    ids = [enqueue(committed, jobs, "record", {"i": i}) for i in range(7)]
    later = enqueue(committed, jobs, "record", delay=3600)
    assert jobs.worker(committed, concurrency=3).drain() == 7
    assert sorted(j for j, _ in effects(committed)) == ids
    assert {row(committed, i).status for i in ids} == {"done"}
    assert all(row(committed, i).finished_at is not None for i in ids)
    assert row(committed, later).status == "pending"  # not due: left alone
    assert jobs.worker(committed).drain() == 0


@on_databases("postgresql", "sqlite")  # its expired lease is now() - 1 h in SQL
def test_drain_sweeps_expired_leases_first(committed):
    jobs = recording_queue(committed)
    job_id = enqueue(committed, jobs, "record")
    with committed.begin() as c:  # a worker that died an hour ago holding the job
        c.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(
                status="running",
                attempts=1,
                locked_by="dead:1:x",
                locked_until=func.now() - timedelta(hours=1),
            )
        )
    assert jobs.worker(committed).drain() == 1
    assert effects(committed) == [(job_id, 2)]
    assert row(committed, job_id).status == "done"


# -- fencing of every statement after the claim ----------------------------------


def _claim(conn, owner):
    claim = claims.claim(Job, leases={}, default_lease=60, ceiling=32)
    return conn.execute(claim, {"queue_name": "default", "limit": 1, "owner": owner}).one()


def _fenced(name):
    one = {"delay": 0.0, "error": "e"}
    return {
        "complete": (completion.complete(Job), True, {}),
        "heartbeat": (runtime.heartbeat(Job), True, {"leases": [60.0]}),
        "release": (runtime.release(Job), True, {}),
        "fail": (runtime.fail(Job), False, one),
        "retry_later": (runtime.retry_later(Job), False, one),
        "discard": (runtime.discard(Job), False, {"error": "e"}),
    }[name]


@pytest.mark.parametrize(
    "name", ["complete", "fail", "retry_later", "discard", "heartbeat", "release"]
)
def test_every_change_after_the_claim_rejects_a_stale_owner_or_attempt(committed, name):
    jobs = recording_queue(committed)
    job_id = enqueue(committed, jobs, "record")
    statement, batched, extra = _fenced(name)

    def params(owner, attempt):
        if batched:
            return {"ids": [job_id], "attempt_numbers": [attempt], "owner": owner, **extra}
        return {"job_id": job_id, "attempt": attempt, "owner": owner, **extra}

    with committed.begin() as c:
        claimed = _claim(c, "worker-a")
    assert claimed.attempts == 1
    before = row(committed, job_id)
    with committed.begin() as c:
        assert c.execute(statement, params("worker-b", 1)).all() == []  # another owner
        assert c.execute(statement, params("worker-a", 2)).all() == []  # another attempt
        assert c.execute(statement, params("worker-a", 0)).all() == []
    after = row(committed, job_id)
    assert (after.status, after.locked_until, after.updated_at) == (
        before.status,
        before.locked_until,
        before.updated_at,
    )
    with committed.begin() as c:  # the real owner's change goes through
        assert len(c.execute(statement, params("worker-a", 1)).all()) == 1
    if name != "heartbeat":  # and once the job has left `running`, nothing matches
        with committed.begin() as c:
            assert c.execute(statement, params("worker-a", 1)).all() == []


# -- retries, signals, unknown kinds ------------------------------------------------


@every_database
def test_failures_back_off_longer_each_time_then_dead_letter_with_last_error(committed):
    jobs = JobQueue(Job)

    @jobs.task("smtp", max_attempts=4, backoff=Backoff(base=0.1, factor=3, cap=60, jitter=0))
    def smtp(ctx: JobContext) -> None:
        raise ConnectionError(f"SMTP timeout on attempt {ctx.attempt}")

    job_id = enqueue(committed, jobs, "smtp")
    delays = []
    worker = jobs.worker(committed)
    for attempt in range(1, 5):
        assert worker.drain() == 1
        job = row(committed, job_id)
        assert job.attempts == attempt
        if attempt < 4:
            assert job.status == "pending"
            delays.append((job.run_at - job.updated_at).total_seconds())
            make_due(committed, job_id)
    assert delays == pytest.approx([0.1, 0.3, 0.9])
    assert job.status == "failed"
    assert job.finished_at is not None
    assert job.last_error.startswith("ConnectionError: SMTP timeout on attempt 4")
    assert "Traceback" in job.last_error
    assert "in smtp" in job.last_error
    assert worker.drain() == 0  # the dead letter stays dead


@every_database
def test_last_error_is_truncated(committed):
    jobs = JobQueue(Job)

    @jobs.task("loud", max_attempts=1)
    def loud(ctx: JobContext) -> None:
        raise RuntimeError("x" * 100_000)

    job_id = enqueue(committed, jobs, "loud")
    jobs.worker(committed).drain()
    job = row(committed, job_id)
    assert job.status == "failed"
    assert 0 < len(job.last_error) <= 4000


@every_database
def test_retry_signal_reschedules_without_using_up_attempts(committed):
    jobs = JobQueue(Job)

    @jobs.task("later", max_attempts=1)
    def later(ctx: JobContext) -> None:
        raise Retry(delay=timedelta(minutes=10), reason="rate limited")

    job_id = enqueue(committed, jobs, "later")
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert (job.status, job.attempts, job.max_attempts) == ("pending", 1, 2)
    assert job.last_error == "rate limited"
    assert 590 < (job.run_at - job.updated_at).total_seconds() <= 600


@every_database
def test_discard_signal_dead_letters_at_once(committed):
    jobs = JobQueue(Job)

    @jobs.task("bad", max_attempts=10)
    def bad(ctx: JobContext) -> None:
        raise Discard("order 4 was deleted")

    job_id = enqueue(committed, jobs, "bad")
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.last_error == "discarded: order 4 was deleted"


@every_database
def test_unknown_kind_is_left_pending_untouched_and_does_not_stop_the_worker(committed):
    jobs = recording_queue(committed)
    ghost = enqueue(committed, jobs, "not_deployed_yet", max_attempts=2)
    ok = enqueue(committed, jobs, "record")
    worker = jobs.worker(committed)
    assert worker.drain() == 1
    job = row(committed, ghost)
    # Left for a worker that has its handler (a deploy in flight): no attempt used.
    assert (job.status, job.attempts, job.last_error) == ("pending", 0, None)
    assert row(committed, ok).status == "done"
    assert worker.drain() == 0


@every_database
def test_handler_exit_or_exception_never_kills_the_worker(committed):
    jobs = recording_queue(committed)

    @jobs.task("exits", max_attempts=1)
    def exits(ctx: JobContext) -> None:
        sys.exit(3)

    @jobs.task("raises", max_attempts=1)
    def raises(ctx: JobContext) -> None:
        raise KeyError("missing")

    bad = [enqueue(committed, jobs, "exits"), enqueue(committed, jobs, "raises")]
    good = [enqueue(committed, jobs, "record") for _ in range(3)]
    assert jobs.worker(committed, concurrency=2).drain() == 5
    assert [row(committed, i).status for i in bad] == ["failed", "failed"]
    assert row(committed, bad[0]).last_error.startswith("SystemExit: 3")
    assert [row(committed, i).status for i in good] == ["done"] * 3


# -- task options and queues ------------------------------------------------------------


@every_database
def test_task_queue_and_max_attempts_are_written_into_the_row_and_obeyed(committed):
    jobs = JobQueue(Job)
    ran = []

    @jobs.task("mail", queue="mail", max_attempts=3)
    def mail(ctx: JobContext) -> None:
        ran.append((ctx.queue, ctx.attempt))
        raise ConnectionError("down")

    first = enqueue(committed, jobs, "mail")
    second = enqueue(committed, jobs, "mail", queue="bulk", max_attempts=1)
    assert (row(committed, first).queue, row(committed, first).max_attempts) == ("mail", 3)
    assert (row(committed, second).queue, row(committed, second).max_attempts) == ("bulk", 1)

    assert jobs.worker(committed, queues=["default"]).drain() == 0
    assert jobs.worker(committed).drain() == 1  # default: the tasks' queues ("mail")
    assert row(committed, second).status == "pending"
    assert jobs.worker(committed, queues=["bulk"]).drain() == 1
    assert row(committed, second).status == "failed"  # the row's max_attempts=1 ruled
    with committed.begin() as c:  # the operator raises the budget in SQL; the worker obeys
        c.execute(update(Job).where(Job.id == first).values(max_attempts=1, run_at=func.now()))
    assert jobs.worker(committed, queues=["mail"]).drain() == 1
    assert row(committed, first).status == "failed"
    assert ran == [("mail", 1), ("bulk", 1), ("mail", 2)]


@every_database
def test_one_worker_serves_several_queues(committed):
    jobs = recording_queue(committed)
    ids = {q: enqueue(committed, jobs, "record", queue=q) for q in ("a", "b", "c")}
    assert jobs.worker(committed, queues=["a", "b"]).drain() == 2
    assert sorted(j for j, _ in effects(committed)) == [ids["a"], ids["b"]]
    assert row(committed, ids["c"]).status == "pending"


# -- run() / stop() -------------------------------------------------------------------


@every_database
def test_run_in_a_thread_processes_new_jobs_until_stop(committed):
    jobs = recording_queue(committed)
    worker = jobs.worker(committed, concurrency=2, poll_interval=0.5)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        ids = [enqueue(committed, jobs, "record", {"i": i}) for i in range(5)]
        wait_for(lambda: len(effects(committed)) == 5, what="five effects")
        wait_for(lambda: {row(committed, i).status for i in ids} == {"done"}, what="done")
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()
    # Stopped means stopped: no thread of the worker is left to claim anything.
    wait_for(
        lambda: not [t for t in threading.enumerate() if t.name.startswith("sa_jobqueue-")],
        what="the worker's threads to exit",
    )
    late = enqueue(committed, jobs, "record")
    assert row(committed, late).status == "pending"


def test_run_survives_its_connections_being_terminated(committed):
    jobs = recording_queue(committed)
    worker = jobs.worker(committed, poll_interval=0.3, sweep_interval=0.5)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        first = enqueue(committed, jobs, "record")
        wait_for(lambda: row(committed, first).status == "done", what="first job")
        for _ in range(3):
            with committed.begin() as c:
                killed = c.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).scalar()
            assert killed >= 1
            time.sleep(0.5)
        committed.dispose()  # our own pooled connections were terminated too
        second = enqueue(committed, jobs, "record")
        wait_for(lambda: row(committed, second).status == "done", what="job after the cuts")
        assert thread.is_alive()
    finally:
        worker.stop()
        thread.join(15)
    assert sorted(j for j, _ in effects(committed)) == [first, second]


@every_database
def test_shutdown_releases_claimed_jobs_that_never_started(committed):
    jobs = recording_queue(committed)
    job_id = enqueue(committed, jobs, "record")
    worker = jobs.worker(committed, shutdown_timeout=5)
    with committed.begin() as c:  # the loop claimed it, then the stop signal came
        [job] = worker.driver.job_claim(c, "default", 1, worker.worker_id)
    worker.stop()
    worker._start(listen=False)
    worker.inflight.add([job])
    worker.pool.submit([job])
    worker._shutdown(wait=5)
    after = row(committed, job_id)
    assert effects(committed) == []  # the handler never ran
    assert (after.status, after.attempts, after.max_attempts) == ("pending", 1, 21)
    assert after.last_error == "released at worker shutdown"
    assert after.locked_until is None


@every_database
def test_stop_releases_a_job_still_running_after_the_shutdown_timeout(committed):
    jobs = JobQueue(Job)
    started, finish = threading.Event(), threading.Event()

    @jobs.task("stuck")
    def stuck(ctx: JobContext) -> None:
        started.set()
        finish.wait(30)

    job_id = enqueue(committed, jobs, "stuck")
    worker = jobs.worker(committed, shutdown_timeout=0.5, poll_interval=0.2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        assert started.wait(15)
        worker.stop()
        thread.join(15)
        assert not thread.is_alive()
        job = row(committed, job_id)
        assert (job.status, job.attempts, job.locked_until) == ("pending", 1, None)
    finally:
        finish.set()


# -- heartbeats -----------------------------------------------------------------------


def test_heartbeats_keep_a_slow_job_leased_past_its_lease(committed):
    jobs = JobQueue(Job)

    @jobs.task("slow", lease=timedelta(seconds=1))
    def slow(ctx: JobContext) -> None:
        time.sleep(3.5)
        with Session(committed) as s, s.begin():
            s.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    @jobs.task("report", lease=timedelta(hours=1))
    def report(ctx: JobContext) -> None: ...

    job_id = enqueue(committed, jobs, "slow")
    # Default sweep interval (30 s) and another task with a long lease: the heartbeat
    # schedule must follow the 1-second lease of the job that runs.
    worker = jobs.worker(committed)
    thread = threading.Thread(target=worker.drain)
    thread.start()
    rival = jobs.worker(committed, sweep_interval=0.3)
    lease_left = []
    while thread.is_alive():
        with committed.connect() as c:
            left = c.execute(
                select(func.extract("epoch", Job.locked_until - func.now())).where(
                    Job.id == job_id, Job.status == "running"
                )
            ).scalar()
        if left is not None:
            lease_left.append(float(left))
        rival.maintenance.sweep_once()  # another worker's sweeper, over and over
        time.sleep(0.1)
    thread.join()
    assert len(lease_left) >= 10
    assert min(lease_left) > 0  # never expired
    assert effects(committed) == [(job_id, 1)]
    job = row(committed, job_id)
    assert (job.status, job.attempts) == ("done", 1)


# -- transactional mode ---------------------------------------------------------------


@every_database
def test_transactional_handler_error_rolls_back_its_writes_and_records_the_failure(committed):
    jobs = JobQueue(Job)

    @jobs.task("invoice", transactional=True, max_attempts=2, backoff=FAST)
    def invoice(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))
        ctx.session.flush()
        raise RuntimeError(f"boom {ctx.attempt}")

    job_id = enqueue(committed, jobs, "invoice")
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert (job.status, job.attempts) == ("pending", 1)  # the failure was recorded...
    assert job.last_error.startswith("RuntimeError: boom 1")
    assert effects(committed) == []  # ...and the handler's write rolled back
    make_due(committed, job_id)
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert (job.status, job.attempts) == ("failed", 2)
    assert effects(committed) == []


@every_database
def test_transactional_success_commits_writes_and_done_together(committed):
    jobs = JobQueue(Job)

    @jobs.task("invoice", transactional=True)
    def invoice(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="invoice"))

    ids = [enqueue(committed, jobs, "invoice") for _ in range(3)]
    assert jobs.worker(committed, concurrency=2).drain() == 3
    assert sorted(effects(committed)) == [(i, 1) for i in ids]
    assert {row(committed, i).status for i in ids} == {"done"}


# Not on SQLite: the test's own write (the lease taken over) waits for the handler's.
@on_databases("postgresql", "mariadb")
def test_transactional_work_of_a_lost_lease_is_rolled_back(committed):
    jobs = JobQueue(Job)

    @jobs.task("invoice", transactional=True)
    def invoice(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))
        with committed.begin() as c:  # meanwhile the job was reclaimed by someone else
            c.execute(update(Job).where(Job.id == ctx.id).values(locked_by="other:1:x"))

    job_id = enqueue(committed, jobs, "invoice")
    jobs.worker(committed).drain()
    assert effects(committed) == []
    job = row(committed, job_id)
    assert (job.status, job.locked_by) == ("running", "other:1:x")


# -- the lesson's walkthrough -----------------------------------------------------------


def test_lesson_seed_walkthrough_expired_leases(committed):
    jobs = JobQueue(Job)
    attempts_seen = []

    @jobs.task("send_receipt")
    def send_receipt(ctx: JobContext) -> None:
        attempts_seen.append((ctx.id, ctx.attempt))

    @jobs.task("sync_crm")
    def sync_crm(ctx: JobContext) -> None:
        attempts_seen.append((ctx.id, ctx.attempt))

    with committed.begin() as c:
        c.execute(
            text(
                "INSERT INTO jobs (id, kind, payload, status, attempts, max_attempts,"
                " locked_by, locked_until) OVERRIDING SYSTEM VALUE VALUES"
                " (1, 'send_receipt', '{}', 'running', 1, 3, 'A', now() + interval '5 min'),"
                " (4, 'send_receipt', '{}', 'running', 1, 3, 'D', now() - interval '1 min'),"
                " (5, 'sync_crm', '{}', 'running', 3, 3, 'E', now() - interval '1 min')"
            )
        )
    # Step 3: the sweeper reclaims the expired leases; step 4: worker C claims job 4.
    worker = jobs.worker(committed)
    assert worker.drain() == 1
    assert attempts_seen == [(4, 2)]  # attempt 2 of job 4: the counter survived the crash
    job4, job5, job1 = row(committed, 4), row(committed, 5), row(committed, 1)
    assert (job4.status, job4.attempts, job4.locked_by) == ("done", 2, worker.worker_id)
    assert (job5.status, job5.attempts) == ("failed", 3)  # out of attempts: dead letter
    assert job5.last_error.startswith("lease expired")
    assert (job1.status, job1.locked_by) == ("running", "A")  # a live lease is left alone
    # Step 5: job 4's original worker wakes up and reports it done: no rows.
    complete = completion.complete(Job)
    with committed.begin() as c:
        stale = c.execute(complete, {"ids": [4], "attempt_numbers": [1], "owner": "D"}).all()
        assert stale == []
        # Step 6: worker A reports job 1 done: accepted.
        assert c.execute(complete, {"ids": [1], "attempt_numbers": [1], "owner": "A"}).all()
    assert row(committed, 1).status == "done"


def test_executor_outcome_of_stale_report_is_logged_not_raised(committed, caplog):
    jobs = recording_queue(committed)
    job_id = enqueue(committed, jobs, "record")
    worker = jobs.worker(committed)
    with committed.begin() as c:
        [claimed] = worker.driver.job_claim(c, "default", 1, "someone-else")
    with committed.begin() as c:  # our worker believes it holds the job; it does not
        worker.completer.record(
            c, [Outcome(claimed, Result.DONE), Outcome(claimed, Result.FAIL, 1, "x")]
        )
    assert row(committed, job_id).status == "running"
    assert "lease was lost" in caplog.text


def test_an_error_text_postgresql_cannot_store_does_not_wedge_the_worker(committed):
    jobs = recording_queue(committed)

    @jobs.task("nul", max_attempts=1)
    def nul(ctx: JobContext) -> None:
        raise ValueError("bad byte \x00 in input")

    @jobs.task("nul_discard")
    def nul_discard(ctx: JobContext) -> None:
        raise Discard("reason with \x00")

    @jobs.task("endless", backoff=lambda attempt: float("inf"))
    def endless(ctx: JobContext) -> None:
        raise RuntimeError("a backoff policy gone wrong must not wedge the worker either")

    bad = [enqueue(committed, jobs, "nul"), enqueue(committed, jobs, "nul_discard")]
    good = enqueue(committed, jobs, "record")
    later = enqueue(committed, jobs, "endless")
    done = []
    thread = threading.Thread(target=lambda: done.append(jobs.worker(committed).drain()))
    thread.start()
    thread.join(20)
    assert not thread.is_alive()
    assert done == [4]
    job = row(committed, later)
    assert job.status == "pending"
    assert (job.run_at - job.updated_at).days > 50 * 365  # bounded to 100 years
    assert [row(committed, i).status for i in bad] == ["failed", "failed"]
    assert "bad byte \\x00 in input" in row(committed, bad[0]).last_error
    assert row(committed, good).status == "done"
