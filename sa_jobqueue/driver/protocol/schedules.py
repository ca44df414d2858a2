"""`ScheduleOps`: the driver's operations for schedules: the due read, ticks, changes.

A schedule is a row of the schedules table beside the jobs table (its next tick in
``next_run_at``); which worker enqueues a tick is decided by `ScheduleOps.schedule_tick`,
never by a leader or a worker's clock. The values they take and return are here:
`ScheduleRow`, `ScheduleNew`, `ScheduleSpec`, `ScheduleTick`, `ScheduleDefine`. See
sa_jobqueue/driver/base.py for what every operation shares (the caller's transaction,
never committing) and docs/periodic.md for the policies these operations serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection

__all__ = [
    "ScheduleDefine",
    "ScheduleNew",
    "ScheduleOps",
    "ScheduleRow",
    "ScheduleSpec",
    "ScheduleTick",
]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule's row as read, with the database clock's ``now`` of that read.

    `definition` is a runtime schedule's (`JobQueue.schedule`), None for one declared
    in code. A read that does not return a column leaves it None (the due read: a due
    schedule is never paused).
    """

    name: str
    kind: str
    spec: str
    next_run_at: datetime
    definition: dict[str, Any] | None
    now: datetime
    paused_at: datetime | None = None
    last_run_at: datetime | None = None
    last_job_id: int | None = None


@dataclass(frozen=True, slots=True)
class ScheduleNew:
    """A schedule declared in code, to store when its row is missing: its first tick."""

    name: str
    kind: str
    spec: str
    next_run_at: datetime


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A code-declared definition of schedule `name`: its ticks (`spec`), `kind`, next tick.

    `following` is this definition's next tick after the database's now.
    """

    name: str
    kind: str
    spec: str
    following: datetime


@dataclass(frozen=True, slots=True)
class ScheduleTick:
    """Take the tick `due` of schedule `name`, as read with `definition`; next, `following`.

    `spec` and `kind` are the taker's definition, stored with the tick; `definition`
    is the runtime definition the due read returned (None for a code schedule).
    """

    name: str
    kind: str
    spec: str
    due: datetime
    following: datetime
    definition: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ScheduleDefine:
    """A runtime schedule to create or replace: its ticks, kind, definition, next tick."""

    name: str
    kind: str
    spec: str
    definition: dict[str, Any]
    following: datetime


class ScheduleOps(Protocol):
    """The schedules' operations: a worker's round (read, register, tick) and runtime changes."""

    # -- a worker's round ----------------------------------------------------------

    def schedules_due(
        self, conn: Connection, names: Sequence[str], limit: int
    ) -> list[ScheduleRow]:
        """Up to `limit` due schedules this worker may take, locked to COMMIT, oldest tick first.

        Due means ``next_run_at`` is not after the database's now and the schedule is
        not paused; the worker takes every runtime schedule and the code schedules it
        declares (`names`), never another application's row. Never waits on a row
        another transaction locks (skips it: workers share the due rows), and reads
        only the due rows (the round's cost does not grow with the number of
        schedules). Pass the same `names` every round: a driver may keep what it
        makes of them.
        """
        ...

    def schedules_read(self, conn: Connection, names: Sequence[str]) -> list[ScheduleRow]:
        """The rows of the schedules named in `names` that exist (no lock), in no order.

        Each row's ``now`` is the database clock; `paused_at` is read too.
        """
        ...

    def schedules_insert(self, conn: Connection, schedules: Sequence[ScheduleNew]) -> None:
        """Store the rows of `schedules`; a row that exists already is left as it is.

        Two workers registering the same schedules never fail nor overwrite each other.
        """
        ...

    def schedule_respec(self, conn: Connection, spec: ScheduleSpec) -> bool:
        """Store a code definition that differs from the row's; True if the row changed.

        Changes the row only while it holds another ``spec`` or a runtime definition
        (code wins: the definition is cleared), so workers that agree write nothing.
        The row keeps the earlier of its tick and ``spec.following``: a rewrite never
        moves a tick later (two definitions rewriting each other during a deploy
        cannot push it back for ever).
        """
        ...

    def schedule_tick(self, conn: Connection, tick: ScheduleTick) -> bool:
        """Take the tick ``tick.due``: move the row to ``tick.following``; True if taken.

        One tick per due time across every worker: it changes the row only while it
        still holds ``tick.due``, that tick is due by the database clock, the schedule
        is not paused and its definition is still ``tick.definition``; a racing
        worker waits for the row, then finds it moved and takes nothing. The taker's
        ``spec`` and ``kind`` are stored, and ``last_run_at`` is now. Insert the
        tick's job in the same transaction, so both commit or neither.
        """
        ...

    def schedule_tick_record(self, conn: Connection, name: str, job_id: int) -> None:
        """Remember `job_id` as the job of schedule `name`'s latest tick (``last_job_id``)."""
        ...

    # -- runtime changes (JobQueue.schedule and co.) ------------------------------

    def schedule_lock(self, conn: Connection, name: str) -> ScheduleRow | None:
        """Schedule `name`'s row, locked until COMMIT (waits for another holder); None if none."""
        ...

    def schedule_upsert(self, conn: Connection, define: ScheduleDefine) -> bool:
        """Create runtime schedule ``define.name``, or replace the runtime one of that name.

        False, changing nothing, when the row is a code schedule's (code wins). A
        replacement with the same ``spec`` keeps the row's next tick (no tick skipped
        or repeated); another takes ``define.following``. A pause is kept.
        """
        ...

    def schedule_delete(self, conn: Connection, name: str) -> bool:
        """Delete schedule `name`'s row; False if there was none."""
        ...

    def schedule_pause(self, conn: Connection, name: str) -> bool:
        """Pause schedule `name` (no tick of it is taken while paused); True if it ran before."""
        ...

    def schedule_resume(self, conn: Connection, name: str, following: datetime) -> bool:
        """Resume paused schedule `name` with its next tick `following`; True if it was paused.

        The caller passes the row's tick when it is still ahead, else the next one after
        now: ticks that passed while paused are skipped, not caught up.
        """
        ...

    def schedule_run_record(self, conn: Connection, name: str, job_id: int) -> None:
        """Schedule `name` ran now, outside its ticks (run now): job `job_id`, ``last_run_at``."""
        ...

    def schedules_list(self, conn: Connection) -> list[ScheduleRow]:
        """Every schedule's row, every column, by name, with the database clock's ``now``."""
        ...
