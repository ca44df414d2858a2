"""A rate limit holds on handler starts, not on claims (issue 24, item 11).

Two in-process workers share a kind limited to 2 starts per second. Worker X starts
its jobs late (a loaded machine, a savepoint batch: here its handler threads wait
1.5 s before they run what they took); meanwhile worker Y claims and starts the next
two as soon as the window of X's claims has passed. Counted at the claims, the limit
held; at the starts, four handlers started within half a second.

The oracle is the starts log itself, audited by a trigger: each stamp the worker
places as a handler starts (a stamp moved, or logged, at the start) must be one per
handler run, and those stamps must keep the limit. The handlers' own clock readings
are no oracle: on a loaded machine a handler's first line may come any time after its
stamp was placed, so two handlers allowed a window apart can read times close together
(a correct limiter then failed an in-process "no three starts within half a window").
"""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, statements
from tests.support.helpers import most_within, running, start_audit, wait_for
from tests.support.models import Job

COUNT, WINDOW = 2, 1.0


def test_rate_limit_holds_on_handler_starts_when_starts_slip(committed):
    jobs = JobQueue(Job)
    starts: list[int] = []  # the job of each handler run

    @jobs.task("rated", rate_limit=(COUNT, timedelta(seconds=WINDOW)))
    def rated(ctx: JobContext) -> None:
        starts.append(ctx.id)

    with start_audit(committed, statements.starts_of(Job).name) as placed_at_start:
        with running(jobs, committed, concurrency=2) as x:
            original = x.pool.executor.run

            def late_start(job):
                # X's first two: their starts slip past their claims' window (chosen by
                # job, not by when X's threads get to them, which load may delay).
                if job.payload["i"] < 2:
                    time.sleep(1.5)
                return original(job)

            x.pool.executor.run = late_start
            with Session(committed) as s, s.begin():
                jobs.enqueue_many(s, [("rated", {"i": i}) for i in range(2)])
            wait_for(lambda: _running(committed) == 2, what="X claiming two")
            with running(jobs, committed, concurrency=2):
                with Session(committed) as s, s.begin():
                    jobs.enqueue_many(s, [("rated", {"i": i}) for i in range(2, 6)])
                wait_for(lambda: _done(committed) == 6, timeout=60, what="six jobs done")
        placed = placed_at_start()
    assert len(starts) == len(set(starts)) == 6, starts  # each job ran once
    assert len(placed) == len(starts), "every handler start must log its start as it starts"
    most = most_within(placed, timedelta(seconds=WINDOW))
    assert most <= COUNT, placed


def _running(engine):
    with engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM jobs WHERE status = 'running'"))


def _done(engine):
    with engine.connect() as conn:
        return conn.scalar(text("SELECT count(*) FROM jobs WHERE status = 'done'"))
