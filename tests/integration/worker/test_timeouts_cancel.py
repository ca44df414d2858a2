"""Timeouts and cancellation of running attempts, with in-process workers.

The worker-process versions of the main cases are in test_scheduling_workers.py;
here: transactional rollback, the heartbeat fallback, shutdown, abandoned reports.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.helpers import running, wait_for
from tests.support.models import Effect, Job

FAST = Backoff(base=0.1, factor=1, cap=0.1, jitter=0)


def notes(engine, job_id):
    with Session(engine) as s:
        return list(s.scalars(select(Effect.note).where(Effect.job_id == job_id)))


def row(engine, job_id):
    with Session(engine) as s:
        job = s.get_one(Job, job_id)
        s.expunge(job)
        return job


def enqueue(engine, jobs, kind, payload=None):
    with Session(engine) as s, s.begin():
        return jobs.enqueue(s, kind, payload).id


def effect(engine, ctx: JobContext, note: str) -> None:
    with Session(engine) as s, s.begin():
        s.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))


def test_a_timed_out_transactional_attempt_is_rolled_back(committed):
    jobs = JobQueue(Job)
    release = threading.Event()

    @jobs.task("slow_tx", transactional=True, timeout=0.5, max_attempts=1)
    def slow_tx(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="written in the attempt"))
        ctx.session.flush()
        effect(committed, ctx, "started")
        release.wait(20)  # ignores ctx.cancelled on purpose, then returns "successfully"
        effect(committed, ctx, f"returned, cancelled={ctx.cancelled}")

    with running(jobs, committed, shutdown_timeout=5) as worker:
        job_id = enqueue(committed, jobs, "slow_tx")
        wait_for(lambda: row(committed, job_id).status == "failed", what="timed out, dead letter")
        assert "timeout of 0.5s" in row(committed, job_id).last_error
        release.set()
        wait_for(lambda: len(notes(committed, job_id)) == 2, what="the late handler returned")
    assert notes(committed, job_id) == ["started", "returned, cancelled=True"]
    # Its own writes, and its fenced done, were rolled back: the job stays failed.
    assert row(committed, job_id).status == "failed"
    assert worker.pool.abandoned == 1


def test_cancel_reaches_the_handler_through_the_heartbeat_without_notifications(committed):
    jobs = JobQueue(Job)

    @jobs.task("loop", lease=1.5)
    def loop(ctx: JobContext) -> None:
        effect(committed, ctx, "started")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not ctx.cancelled:
            time.sleep(0.02)
        effect(committed, ctx, f"stopped, cancelled={ctx.cancelled}")

    with running(jobs, committed, listen=False, concurrency=1) as worker:
        # Counted in heartbeats, not seconds (a loaded machine delays them all): how many
        # heartbeat statements began after the cancel committed, when one found it.
        driver = worker.driver
        since_cancel: list[int] = []  # [heartbeats begun since the cancel committed]
        found_after: list[int] = []  # that count, each time a heartbeat found the cancel
        heartbeat, cancelled_of = driver.job_heartbeat, driver.jobs_cancelled

        def counted_heartbeat(conn, claimed, owner):
            if since_cancel:
                since_cancel[0] += 1
            return heartbeat(conn, claimed, owner)

        def found_cancelled(conn, claimed):
            keys = cancelled_of(conn, claimed)
            if since_cancel and any(job_id == key[0] for key in keys):
                found_after.append(since_cancel[0])
            return keys

        driver.job_heartbeat, driver.jobs_cancelled = counted_heartbeat, found_cancelled
        job_id = enqueue(committed, jobs, "loop")
        wait_for(lambda: "started" in notes(committed, job_id), what="the handler started")
        with Session(committed) as s, s.begin():
            assert jobs.cancel(s, [job_id]).was_running == [job_id]
        since_cancel.append(0)
        wait_for(lambda: len(notes(committed, job_id)) == 2, what="the handler saw it")
        # The first heartbeat after the cancel found it (one that began before the commit
        # may have), well within the lease: its every third told the handler.
        assert found_after[:1] in ([0], [1]), found_after
        nxt = enqueue(committed, jobs, "loop")
        wait_for(lambda: "started" in notes(committed, nxt), what="the slot is free")
        with Session(committed) as s, s.begin():
            jobs.cancel(s, [nxt])
        wait_for(lambda: len(notes(committed, nxt)) == 2, what="the second one stopped")
    assert notes(committed, job_id)[1] == "stopped, cancelled=True"
    assert row(committed, job_id).status == "cancelled"


def test_shutdown_sets_ctx_cancelled_and_a_cooperative_handler_finishes_its_job(committed):
    jobs = JobQueue(Job)

    @jobs.task("long")
    def long(ctx: JobContext) -> None:
        effect(committed, ctx, "started")
        while not ctx.cancelled:
            time.sleep(0.02)
        effect(committed, ctx, "told to stop")

    with running(jobs, committed, shutdown_timeout=10) as worker:
        job_id = enqueue(committed, jobs, "long")
        wait_for(lambda: "started" in notes(committed, job_id), what="the handler started")
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5
    assert notes(committed, job_id) == ["started", "told to stop"]
    assert row(committed, job_id).status == "done"  # it returned: its work is done
    assert worker.pool.abandoned == 0


def test_a_cancel_of_a_job_this_worker_does_not_run_changes_nothing_here(committed):
    jobs = JobQueue(Job)

    @jobs.task("quick", backoff=FAST)
    def quick(ctx: JobContext) -> None:
        effect(committed, ctx, "ran")

    with running(jobs, committed) as worker:
        worker.interrupts.control("cancel 12345")  # not running here
        worker.interrupts.control("nonsense")
        job_id = enqueue(committed, jobs, "quick")
        wait_for(lambda: row(committed, job_id).status == "done", what="a job still runs")
    assert worker.pool.abandoned == 0
