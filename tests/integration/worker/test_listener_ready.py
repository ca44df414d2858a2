"""A cancel sent right after a worker's first claim is heard, however slowly LISTEN starts."""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.worker.listener import Listener
from tests.support.helpers import wait_for
from tests.support.models import Job


def test_a_cancel_right_after_the_first_claim_reaches_a_worker_whose_listen_was_slow(
    committed, monkeypatch
):
    connect = Listener._connect

    def slow_connect(self: Listener) -> Any:
        time.sleep(1.0)  # as on a loaded machine: the claim loop would be first
        return connect(self)

    monkeypatch.setattr(Listener, "_connect", slow_connect)
    jobs = JobQueue(Job)
    started = threading.Event()

    @jobs.task("long")  # a five-minute lease: a heartbeat would come 100 s later
    def long(ctx: JobContext) -> None:
        started.set()
        deadline = time.monotonic() + 60
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)

    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "long").id
    worker = jobs.worker(committed, poll_interval=0.2)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        assert started.wait(30), "the job never started"
        with Session(committed) as s, s.begin():
            jobs.cancel(s, [job_id])
        cancelled_at = time.monotonic()
        wait_for(lambda: worker.processed >= 1, timeout=30, what="the cancel to be recorded")
        assert time.monotonic() - cancelled_at < 30
    finally:
        worker.stop()
        runner.join(30)
    with Session(committed) as s:
        assert s.get_one(Job, job_id).status == "cancelled"
