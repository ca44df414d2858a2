"""`Worker.drain` with limited kinds: it waits for what a limit holds back, and
unlimited kinds still run first when the limited one is saturated."""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.support.models import Job, new_queue


def test_drain_runs_rate_limited_jobs_to_the_end(committed):
    jobs = new_queue()
    started: list[float] = []
    jobs.task("rated", rate_limit=(4, timedelta(seconds=0.5)))(
        lambda ctx: started.append(time.monotonic())
    )
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("rated", {"i": i}) for i in range(10)])
    worker = jobs.worker(committed, concurrency=4, listen=False)
    assert worker.drain() == 10  # not 4: the drain waited for the window to move on
    assert len(started) == 10
    assert started[-1] - started[0] >= 0.9  # three windows of 0.5 s: at least two passed
    with Session(committed) as session:
        assert session.scalar(select(func.count()).where(Job.status == "done")) == 10


def test_drain_with_max_running_1_runs_them_one_at_a_time(committed):
    jobs = new_queue()
    running = [0]
    most = [0]

    def handler(ctx):
        running[0] += 1
        most[0] = max(most[0], running[0])
        time.sleep(0.05)
        running[0] -= 1

    jobs.task("serial", max_running=1)(handler)
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("serial", {"i": i}) for i in range(6)])
    assert jobs.worker(committed, concurrency=4, listen=False).drain() == 6
    assert most[0] == 1


def test_drain_ends_while_a_paused_queue_holds_limited_jobs(committed):
    jobs = new_queue()
    ran: list[int] = []
    jobs.task("serial", max_running=1, queue="held")(lambda ctx: ran.append(ctx.id))
    jobs.task("plain")(lambda ctx: ran.append(ctx.id))
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("serial", {}), ("plain", {})])
        jobs.pause(session, "held")
    worker = jobs.worker(committed, concurrency=2, listen=False)
    assert worker.drain() == 1  # the plain job; the paused queue's job waits for resume
    with Session(committed) as session:
        pending = session.scalars(select(Job.kind).where(Job.status == "pending")).all()
    assert pending == ["serial"]
