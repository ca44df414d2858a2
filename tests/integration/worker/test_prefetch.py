"""Claiming ahead of free slots (`prefetch`): what waits, what never waits, and what stops it.

A worker of short jobs claims a few more than it has slots for, so claims and
acknowledgements come in batches; these tests pin down the edges: a long job is
never claimed ahead, a job claimed ahead and cancelled before its start does not
run, and a stop gives jobs claimed ahead back at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.helpers import running, wait_for
from tests.support.models import Job


def running_rows(engine: Engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).where(Job.status == "running")) or 0


def statuses(engine: Engine, ids: list[int]) -> dict[int, str]:
    with Session(engine) as s:
        return {i: st for i, st in s.execute(select(Job.id, Job.status).where(Job.id.in_(ids)))}


def enqueue(
    engine: Engine, jobs: JobQueue[Job], kind: str, count: int, **options: Any
) -> list[int]:
    with Session(engine) as s, s.begin():
        return [jobs.enqueue(s, kind, {"n": n}, **options).id for n in range(count)]


def test_short_jobs_are_claimed_ahead_and_long_ones_are_not(committed):
    jobs = JobQueue(Job)
    seen: dict[str, list[int]] = {"quick": [], "slow": []}

    @jobs.task("quick")
    def quick(ctx: JobContext) -> None:
        seen["quick"].append(running_rows(committed))

    @jobs.task("slow")
    def slow(ctx: JobContext) -> None:
        seen["slow"].append(running_rows(committed))
        time.sleep(0.05)  # ten times what the worker claims ahead for

    quick_ids = enqueue(committed, jobs, "quick", 60)
    assert jobs.worker(committed, concurrency=1, listen=False).drain() == 60
    assert set(statuses(committed, quick_ids).values()) == {"done"}
    # With one slot, more than one job was `running` at once: claimed ahead.
    assert max(seen["quick"]) > 1

    slow_ids = enqueue(committed, jobs, "slow", 6)
    assert jobs.worker(committed, concurrency=1, listen=False).drain() == 6
    assert set(statuses(committed, slow_ids).values()) == {"done"}
    assert seen["slow"] == [1] * 6  # a 50 ms job waits for nobody's slot


def test_prefetch_0_claims_only_free_slots(committed):
    jobs = JobQueue(Job)
    seen: list[int] = []

    @jobs.task("quick")
    def quick(ctx: JobContext) -> None:
        seen.append(running_rows(committed))

    enqueue(committed, jobs, "quick", 30)
    assert jobs.worker(committed, concurrency=1, listen=False, prefetch=0).drain() == 30
    assert seen == [1] * 30


def test_a_job_cancelled_while_claimed_ahead_never_starts(committed):
    jobs = JobQueue(Job)
    gate = threading.Event()
    started: list[int] = []

    @jobs.task("quick")
    def quick(ctx: JobContext) -> None:
        started.append(ctx.payload["n"])
        if ctx.payload["n"] == 0:
            gate.wait(20)  # holds the only slot while the rest wait, claimed ahead

    with running(jobs, committed, concurrency=1) as worker:
        warm = enqueue(committed, jobs, "quick", 1, queue="default")
        gate.set()  # a first short job teaches the worker its handlers are short
        wait_for(lambda: statuses(committed, warm) == {warm[0]: "done"}, what="the first job")
        gate.clear()
        started.clear()
        ids = enqueue(committed, jobs, "quick", 5)
        wait_for(lambda: running_rows(committed) == 5, what="the batch claimed, ahead")
        # The claim commits before the first handler starts: wait for it, not assume it.
        wait_for(lambda: started == [0], what="the first job of the batch to start")
        with Session(committed) as s, s.begin():
            assert jobs.cancel(s, [ids[2]]).was_running == [ids[2]]
        wait_for(lambda: worker.attempts._cancelled_early, what="the cancel to reach the worker")
        gate.set()
        wait_for(lambda: running_rows(committed) == 0, what="the rest to finish")
    assert sorted(started) == [0, 1, 3, 4]  # n=2 never ran
    assert statuses(committed, ids)[ids[2]] == "cancelled"
    assert [statuses(committed, ids)[i] for i in ids if i != ids[2]] == ["done"] * 4


def test_a_stop_gives_jobs_claimed_ahead_back_at_once(committed):
    jobs = JobQueue(Job)
    gate = threading.Event()
    entered = threading.Event()

    @jobs.task("quick")
    def quick(ctx: JobContext) -> None:
        if ctx.payload["n"] == 0:
            entered.set()
            gate.wait(20)

    worker = jobs.worker(committed, concurrency=1, shutdown_timeout=30)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        warm = enqueue(committed, jobs, "quick", 1, queue="default")
        gate.set()
        wait_for(lambda: statuses(committed, warm) == {warm[0]: "done"}, what="the first job")
        gate.clear()
        entered.clear()
        ids = enqueue(committed, jobs, "quick", 5)
        wait_for(lambda: running_rows(committed) == 5, what="the batch claimed, ahead")
        # A stop before the first job's handler starts gives all five back, rightly:
        # wait for the handler, so one runs while four wait for its slot.
        assert entered.wait(30), "the first job of the batch never started"
        worker.stop()
        # The four waiting for the slot go back to pending while the first still runs.
        wait_for(
            lambda: sorted(statuses(committed, ids).values()) == ["pending"] * 4 + ["running"],
            what="the jobs claimed ahead released",
        )
    finally:
        gate.set()
        thread.join(30)
    assert not thread.is_alive()
    assert sorted(statuses(committed, ids).values()) == ["done"] + ["pending"] * 4


def test_prefetch_must_be_a_count(committed):
    import pytest

    from sa_jobqueue.errors import ConfigurationError

    for bad in (-1, 1.5, "8", True, None):
        with pytest.raises(ConfigurationError, match="prefetch must be an int >= 0"):
            JobQueue(Job).worker(committed, prefetch=bad)  # type: ignore[arg-type]


def test_a_kind_with_a_roomy_max_running_is_claimed_ahead_and_a_tight_one_is_not(committed):
    jobs = JobQueue(Job)
    seen: dict[str, list[int]] = {"roomy": [], "tight": []}

    # One worker at concurrency 1 holds at most 1 + 128: 1,000 is over four times that.
    @jobs.task("roomy", max_running=1000)
    def roomy(ctx: JobContext) -> None:
        seen["roomy"].append(running_rows(committed))

    @jobs.task("tight", max_running=100)
    def tight(ctx: JobContext) -> None:
        seen["tight"].append(running_rows(committed))

    enqueue(committed, jobs, "roomy", 60)
    assert jobs.worker(committed, concurrency=1, listen=False).drain() == 60
    assert max(seen["roomy"]) > 1
    enqueue(committed, jobs, "tight", 30)
    assert jobs.worker(committed, concurrency=1, listen=False).drain() == 30
    assert seen["tight"] == [1] * 30  # its slots count jobs that run, not jobs that wait
