"""The runtime-schedule half of `JobQueue`: schedule, unschedule, pause, resume, run now.

`JobQueue` inherits these methods; each is thin over `sa_jobqueue.periodic.runtime`
(which the command line and the dashboard call too), bound to the queue's model and
to the schedules its code declares. See docs/periodic.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Generic

from sqlalchemy.orm import Session

from sa_jobqueue.core.aio import check_sync_session
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.periodic import runtime
from sa_jobqueue.periodic.definitions import Schedule
from sa_jobqueue.schema.model import JobT
from sa_jobqueue.tasks import Registry

__all__ = ["ScheduleAPI"]


class ScheduleAPI(Generic[JobT]):
    """Schedules managed at runtime, for the jobs model `model` (mixed into `JobQueue`)."""

    model: type[JobT]
    registry: Registry
    schedules: dict[str, Schedule]
    max_payload_bytes: int
    _inserter: Inserter[JobT]

    def schedule(
        self,
        session: Session,
        name: str,
        kind: str,
        *,
        cron: str | None = None,
        every: timedelta | float | None = None,
        payload: Any = None,
        queue: str | None = None,
        timezone: str | None = None,
        jitter: timedelta | float | None = None,
    ) -> Schedule:
        """Create or replace the runtime schedule `name` in `session`'s transaction.

        Example:
            >>> with Session(engine) as session, session.begin():      # doctest: +SKIP
            ...     jobs.schedule(session, "nightly", "report", cron="0 3 * * *",
            ...                   timezone="Europe/Paris")

        Workers pick it up within about a second of the commit (no deploy, no
        restart) and enqueue each tick once across all of them, as for
        `JobQueue.periodic`. Never commits; a rollback leaves no schedule.
        Replacing a schedule with the same ticks keeps its next tick; with other
        ticks, it goes on from the new definition's next tick after now. A paused
        schedule stays paused when replaced.

        Args:
            session: the caller's session.
            name: names the schedule (a name declared in code is refused: code wins).
            kind: a task registered on this `JobQueue`.
            cron: a cron expression (5 fields, or 6 with seconds first).
            every: or: an interval (a timedelta or seconds, at least 1 s).
            payload: each job's JSON payload (default ``{}``).
            queue: each job's queue (default: the task's, stored as it is now).
            timezone: the IANA zone `cron` is read in (default UTC).
            jitter: each tick's job is due up to this long after the tick (a fixed
                spread per tick, the same on every worker).

        Raises:
            ConfigurationError: naming the problem (kind not registered, bad cron,
                unknown zone, both or neither of cron/every, or a name declared in
                code).
        """
        check_sync_session(session, "schedule")
        return runtime.create(
            session,
            self.model,
            self.registry,
            self.schedules,
            name,
            kind,
            max_payload_bytes=self.max_payload_bytes,
            cron=cron,
            every=every,
            payload=payload,
            queue=queue,
            timezone=timezone,
            jitter=jitter,
        )

    def unschedule(self, session: Session, name: str) -> None:
        """Delete the runtime schedule `name` when `session` commits; never commits.

        Jobs it enqueued already are left alone. A schedule declared in this
        queue's code is refused (a worker would add it back: pause it instead).

        Raises:
            ValidationError: there is no schedule `name`.
            ConfigurationError: `name` is declared in code.
        """
        check_sync_session(session, "unschedule")
        runtime.remove(session, self.model, self.schedules, name)

    def pause_schedule(self, session: Session, name: str) -> bool:
        """Pause schedule `name` (runtime or code-declared) when `session` commits.

        No worker takes one of its ticks while it is paused, even one due at the
        moment of the commit. Returns False if it was paused already.

        Raises:
            ValidationError: there is no schedule `name`.
        """
        check_sync_session(session, "pause_schedule")
        return runtime.pause(session, self.model, self.schedules, name)

    def resume_schedule(self, session: Session, name: str) -> bool:
        """Resume the paused schedule `name` when `session` commits.

        Ticks that passed while it was paused are skipped (no catch-up job); it goes
        on from its next tick. Returns False if it was not paused.

        Raises:
            ValidationError: there is no schedule `name`.
        """
        check_sync_session(session, "resume_schedule")
        return runtime.resume(session, self.model, self.schedules, name)

    def run_schedule_now(self, session: Session, name: str) -> JobT:
        """Enqueue one job of schedule `name` now, in `session`'s transaction.

        The job is the schedule's (kind, payload, queue), with the idempotency key
        ``periodic:<name>:now:<time>``; the schedule's own ticks are unchanged. Works
        on a paused schedule too (an operator's explicit run).

        Raises:
            ValidationError: there is no schedule `name`.
            ConfigurationError: `name` is declared in code this `JobQueue` does not
                declare (its payload is not known here).
        """
        check_sync_session(session, "run_schedule_now")
        return runtime.run_now(
            session, self.model, self.registry, self.schedules, self._inserter, name
        )

    def stored_schedules(self, session: Session) -> list[runtime.StoredSchedule]:
        """Every schedule the schedules table holds (code-declared and runtime), by name."""
        check_sync_session(session, "stored_schedules")
        return runtime.stored(session, self.model)
