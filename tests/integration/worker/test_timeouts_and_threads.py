"""Timed-out handlers that ignore ``ctx.cancelled``: claims ahead and handler threads.

Issue 24, items 8 and 9: a timed-out attempt counted as a duration of 0 in the mean
that sizes claims ahead, so a worker of timing-out jobs claimed far ahead; and each
timeout left a thread behind with a replacement started, without bound.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.retry import Backoff
from tests.support.helpers import running, wait_for
from tests.support.models import Job

SLOW = Backoff(base=60, factor=1, cap=60, jitter=0)  # a timed-out job stays out of the way


def _count(engine, *where):
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(Job).where(*where))


def _timed_out(engine):
    return _count(engine, Job.last_error.like("timed out%"))


def _stubborn_queue(release: threading.Event, timeout: float) -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("stubborn", timeout=timeout, backoff=SLOW)
    def stubborn(ctx: JobContext) -> None:
        release.wait(60)  # ignores ctx.cancelled on purpose

    return jobs


def _enqueue(engine, jobs, n):
    with Session(engine) as s, s.begin():
        jobs.enqueue_many(s, [("stubborn", {"i": i}) for i in range(n)])


def test_timed_out_attempts_do_not_make_the_worker_claim_ahead(committed):
    release = threading.Event()
    jobs = _stubborn_queue(release, timeout=0.3)
    try:
        with running(jobs, committed, concurrency=2, shutdown_timeout=1):
            _enqueue(committed, jobs, 30)
            wait_for(lambda: _timed_out(committed) >= 2, what="two timeouts")
            # The round that recorded them claimed too: only for the free slots, since
            # a timed-out attempt ran for its whole timeout (the fault: 0 s, so the
            # mean said "short jobs" and the worker claimed all 28 ahead).
            running_now = _count(committed, Job.status == "running")
            assert running_now <= 2, f"{running_now} jobs running at concurrency 2"
    finally:
        release.set()


def _value(registry, name):
    return registry.get_sample_value(name)


def test_stuck_handler_threads_are_capped_and_counted(committed):
    release = threading.Event()
    jobs = _stubborn_queue(release, timeout=0.2)
    registry = CollectorRegistry()
    metrics = Metrics(registry)

    earlier = set(threading.enumerate())  # other tests' threads may still be exiting

    def handler_threads():
        return [
            t
            for t in threading.enumerate()
            if t.name.startswith("sa_jobqueue-handler") and t not in earlier
        ]

    with running(jobs, committed, concurrency=1, shutdown_timeout=5, metrics=metrics):
        _enqueue(committed, jobs, 8)
        # At concurrency 1 the cap is one stuck thread beyond the slot: the second
        # timeout leaves the worker without a free thread, so it stops claiming.
        wait_for(
            lambda: _value(registry, "sa_jobqueue_handlers_stuck") == 2, what="two stuck threads"
        )
        wait_for(lambda: _timed_out(committed) == 2, what="two timeouts recorded")
        assert len(handler_threads()) == 2  # both stuck; no third thread was started
        assert _count(committed, Job.status == "running") == 0  # nothing claimed meanwhile
        assert _count(committed, Job.status == "pending", Job.attempts == 0) == 6
        # The stuck handlers return: the slot comes back and the worker claims again.
        release.set()
        wait_for(lambda: _value(registry, "sa_jobqueue_handlers_stuck") == 0, what="unstuck")
        wait_for(lambda: _count(committed, Job.status == "done") == 6, what="the other six run")
    # The pool's threads exit once stopped (none is left stuck); not joined, so wait.
    wait_for(lambda: handler_threads() == [], what="every handler thread gone")
