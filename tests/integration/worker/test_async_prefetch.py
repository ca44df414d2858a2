"""``async def`` handlers are claimed ahead too: the event loop and the threads share slots.

A job claimed ahead of a free slot waits in its pool, sync or async, until one of the
worker's `concurrency` slots is free (`worker.run.slots.Slots`); together the two pools
never run more than `concurrency` attempts, and a stop gives the waiting jobs back.
"""

from __future__ import annotations

import asyncio
import threading
import time

from sa_jobqueue import JobContext, JobQueue
from tests.integration.worker.test_prefetch import enqueue, running_rows, statuses
from tests.support.helpers import wait_for
from tests.support.models import Job


def test_short_async_jobs_are_claimed_ahead_and_never_run_past_the_slots(committed):
    jobs = JobQueue(Job)
    claimed_at_start: list[int] = []
    now_running = 0
    most_running = 0

    @jobs.task("quick")
    async def quick(ctx: JobContext) -> None:
        nonlocal now_running, most_running
        now_running += 1  # one event loop: no lock needed
        most_running = max(most_running, now_running)
        claimed_at_start.append(running_rows(committed))
        await asyncio.sleep(0)
        now_running -= 1

    ids = enqueue(committed, jobs, "quick", 60)
    assert jobs.worker(committed, concurrency=1, listen=False).drain() == 60
    assert set(statuses(committed, ids).values()) == {"done"}
    assert max(claimed_at_start) > 1  # more than the one slot was claimed: ahead
    assert most_running == 1


def test_sync_and_async_handlers_together_run_at_most_concurrency_attempts(committed):
    jobs = JobQueue(Job)
    lock = threading.Lock()
    counts = {"now": 0, "most": 0}

    def enter() -> None:
        with lock:
            counts["now"] += 1
            counts["most"] = max(counts["most"], counts["now"])

    def leave() -> None:
        with lock:
            counts["now"] -= 1

    @jobs.task("sync_job")
    def sync_job(ctx: JobContext) -> None:
        enter()
        time.sleep(0.002)
        leave()

    @jobs.task("async_job")
    async def async_job(ctx: JobContext) -> None:
        enter()
        await asyncio.sleep(0.002)
        leave()

    ids = enqueue(committed, jobs, "sync_job", 40) + enqueue(committed, jobs, "async_job", 40)
    assert jobs.worker(committed, concurrency=3, listen=False).drain() == 80
    assert set(statuses(committed, ids).values()) == {"done"}
    assert 1 <= counts["most"] <= 3


def test_a_stop_gives_async_jobs_claimed_ahead_back_at_once(committed):
    jobs = JobQueue(Job)
    gate = threading.Event()
    entered = threading.Event()

    @jobs.task("quick")
    async def quick(ctx: JobContext) -> None:
        entered.set()
        # Every job holds its slot until the gate opens: whichever of the batch gets the
        # one slot first (not always the lowest id on a loaded machine) keeps running.
        while not gate.is_set():
            await asyncio.sleep(0.01)

    worker = jobs.worker(committed, concurrency=1, shutdown_timeout=30)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        warm = enqueue(committed, jobs, "quick", 1)
        gate.set()
        wait_for(lambda: statuses(committed, warm) == {warm[0]: "done"}, what="the first job")
        gate.clear()
        entered.clear()
        ids = enqueue(committed, jobs, "quick", 5)
        wait_for(lambda: running_rows(committed) == 5, what="the batch claimed, ahead")
        # A stop before the first handler starts gives all five back, rightly: wait for
        # one to run, so four wait for its slot.
        assert entered.wait(30), "no job of the batch started"
        worker.stop()
        # The four waiting for the slot go back to pending while the first still runs.
        wait_for(
            lambda: sorted(statuses(committed, ids).values()) == ["pending"] * 4 + ["running"],
            what="the async jobs claimed ahead released",
        )
    finally:
        gate.set()
        thread.join(30)
    assert not thread.is_alive()
    assert sorted(statuses(committed, ids).values()) == ["done"] + ["pending"] * 4
