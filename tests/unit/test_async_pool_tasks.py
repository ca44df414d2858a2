"""The async pool's own tasks start eagerly where Python has it (3.12 and later).

`make pythons` runs this file on Python 3.13 too, where the eager branch is the one taken.
"""

from __future__ import annotations

import asyncio
import sys

from sa_jobqueue.worker.run.async_pool import _task


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
