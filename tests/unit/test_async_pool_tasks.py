"""The async pool's own tasks start eagerly where Python has it (3.12 and later).

`make pythons` runs this file on Python 3.13 too, where the eager branch is the one taken.
And how the pool hands its outcomes over: the jobs a batch's freed slots start are
reported with it while none awaits, and at once once one does.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence

from sa_jobqueue.worker.attempt import Claimed, Outcome, Result
from sa_jobqueue.worker.run.async_pool import AsyncPool, _task
from sa_jobqueue.worker.run.slots import Slots


async def _no_io(ran: list[str]) -> None:
    ran.append("ran")


async def _suspends(ran: list[str]) -> None:
    await asyncio.sleep(0)
    ran.append("ran")


def test_a_job_that_never_awaits_io_runs_inside_the_call_on_312_and_later():
    async def main() -> tuple[list[str], bool]:
        ran: list[str] = []
        task = _task(_no_io(ran), asyncio.get_running_loop())
        started = list(ran)
        await task
        return started, task.done()

    started, done = asyncio.run(main())
    assert started == (["ran"] if sys.version_info >= (3, 12) else [])
    assert done


def test_a_job_that_suspends_finishes_on_the_loop_either_way():
    async def main() -> list[str]:
        ran: list[str] = []
        task = _task(_suspends(ran), asyncio.get_running_loop())
        assert ran == []
        await task
        return ran

    assert asyncio.run(main()) == ["ran"]


def test_the_loops_task_factory_stays_as_it_was():
    # A handler's own create_task keeps the loop's semantics: not started in the call.
    async def main() -> list[str]:
        ran: list[str] = []
        loop = asyncio.get_running_loop()
        await _task(_no_io([]), loop)
        task = loop.create_task(_no_io(ran))
        started = list(ran)
        await task
        return started

    assert asyncio.run(main()) == []


def _claimed(job_id: int) -> Claimed:
    return Claimed(job_id, "k", "default", {}, 1, 3, None, 30.0)


class _Reports:
    """The pool's report callback: each hand-over's job ids, and an event per job."""

    def __init__(self) -> None:
        self.handovers: list[list[int]] = []
        self._lock = threading.Lock()
        self._seen: dict[int, threading.Event] = {}

    def __call__(self, outcomes: Sequence[Outcome]) -> None:
        with self._lock:
            self.handovers.append([o.job.id for o in outcomes])
            for o in outcomes:
                assert o.result is Result.DONE
                self._event(o.job.id).set()

    def _event(self, job_id: int) -> threading.Event:
        return self._seen.setdefault(job_id, threading.Event())

    def wait_for(self, job_id: int) -> None:
        with self._lock:
            event = self._event(job_id)
        assert event.wait(10), f"job {job_id} was never reported: {self.handovers}"


def _pool(
    attempt: Callable[[Claimed], Awaitable[Outcome]], reports: _Reports, slots: int
) -> AsyncPool:
    pool = AsyncPool(attempt, reports, lambda: False, slots=Slots(slots))
    pool.start()
    return pool


def test_jobs_that_never_await_are_handed_over_once_for_all_the_slots_they_freed():
    # 2 slots, 8 jobs: the slots each batch frees start the next ones on the loop; as no
    # job awaits, the claim loop is handed all 8 once, not 2 per pass of the loop.
    reports = _Reports()

    async def attempt(job: Claimed) -> Outcome:
        return Outcome(job, Result.DONE)

    pool = _pool(attempt, reports, slots=2)
    try:
        pool.submit([_claimed(i) for i in range(1, 9)])
        reports.wait_for(8)
    finally:
        pool.close()
    assert reports.handovers == [[1, 2, 3, 4, 5, 6, 7, 8]]


def test_what_ended_is_handed_over_at_once_when_a_job_it_started_awaits():
    # Job 3 awaits (until the test has seen 1 and 2 reported): what ended before it must
    # not wait for it, nor for the jobs behind it.
    reports = _Reports()
    release = threading.Event()

    async def attempt(job: Claimed) -> Outcome:
        if job.id == 3:
            while not release.is_set():
                await asyncio.sleep(0.001)
        return Outcome(job, Result.DONE)

    pool = _pool(attempt, reports, slots=2)
    try:
        pool.submit([_claimed(i) for i in range(1, 6)])
        reports.wait_for(1)
        reports.wait_for(2)
        reports.wait_for(4)  # 3 holds one slot; 4 and 5 pass through the other
        reports.wait_for(5)
        assert not any(3 in ids for ids in reports.handovers)
        release.set()
        reports.wait_for(3)
    finally:
        pool.close()
    assert sorted(i for ids in reports.handovers for i in ids) == [1, 2, 3, 4, 5]
