"""Periodic schedules: their definitions, their ticks, and enqueueing each tick once.

A `Schedule` is made by `JobQueue.periodic` (declared in code) or `JobQueue.schedule`
(at runtime, stored in the schedules table) and validated there
(`sa_jobqueue.periodic.definitions`). Its ticks are pure functions of its definition
(`Schedule.next_after`), so every worker computes the same ones. Which worker
enqueues a tick is decided by the database (`sa_jobqueue.periodic.ticks`); the
operations on stored schedules are in `sa_jobqueue.periodic.runtime`, and the
`JobQueue` methods over them in `sa_jobqueue.periodic.api`. Policies, DST included:
docs/periodic.md.
"""

from __future__ import annotations

from sa_jobqueue.periodic.definitions import Schedule, make_schedule
from sa_jobqueue.periodic.runtime import StoredSchedule
from sa_jobqueue.periodic.ticks import PeriodicEnqueuer, Tick, enqueue_due, next_runs

__all__ = [
    "PeriodicEnqueuer",
    "Schedule",
    "StoredSchedule",
    "Tick",
    "enqueue_due",
    "make_schedule",
    "next_runs",
]
