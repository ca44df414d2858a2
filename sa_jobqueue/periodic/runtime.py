"""Runtime schedules: create, replace, remove, pause, resume and run schedules from a session.

Each function runs in the caller's transaction and never commits: a schedule made
with `create` exists for the workers once the caller commits, and never if it rolls
back. Workers read runtime schedules from the schedules table at every round
(`sa_jobqueue.periodic.ticks.enqueue_due`), so nothing is deployed or restarted.
Pause, resume and run-now work on code-declared schedules too. Which wins on a name
clash, and the other policies: docs/periodic.md ("Schedules at runtime").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.driver.protocol.schedules import ScheduleDefine, ScheduleNew, ScheduleRow
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.periodic.definitions import (
    Schedule,
    from_definition,
    from_spec,
    job_spec,
    make_schedule,
)
from sa_jobqueue.schema.model import JobMixin, JobT
from sa_jobqueue.tasks import Registry

__all__ = ["StoredSchedule", "create", "pause", "remove", "resume", "run_now", "stored"]


@dataclass(frozen=True)
class StoredSchedule:
    """A schedule as the schedules table holds it (what ``sa-jobqueue schedules list`` prints).

    Attributes:
        name: the schedule's name.
        kind: the kind of job each tick enqueues.
        source: ``"runtime"`` (made with `JobQueue.schedule`) or ``"code"``
            (`JobQueue.periodic`, registered by a worker).
        spec: its ticks as one line (``every 30s``, ``cron 0 3 * * * UTC``).
        next_run_at: its next tick.
        last_run_at: when it last enqueued a job (a tick or a run-now), if ever.
        last_job_id: that job's id.
        paused_at: when it was paused, or None while it runs.
        definition: a runtime schedule's definition (cron or every, payload,
            queue, timezone, jitter); None for a code-declared one.
    """

    name: str
    kind: str
    source: str
    spec: str
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: int | None
    paused_at: datetime | None
    definition: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (times in ISO 8601)."""
        data = dict(self.__dict__)
        for key in ("next_run_at", "last_run_at", "paused_at"):
            value = data[key]
            data[key] = value.isoformat() if value is not None else None
        return data


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > 128 or name != name.strip():
        raise ValidationError("name", name, "must be a non-empty str of at most 128 characters")
    return name


def _missing(name: str) -> ValidationError:
    return ValidationError(
        "name", name, "no schedule of that name (`sa-jobqueue schedules list` shows them)"
    )


def _row_or_declared(
    session: Session, driver: Driver, declared: Mapping[str, Schedule], name: str
) -> ScheduleRow:
    """The locked row of `name`; a schedule declared in code gets its row first if need be."""
    conn = session.connection()
    row = driver.schedule_lock(conn, name)
    if row is None and name in declared:
        schedule = declared[name]
        moment = driver.clock_now(conn)
        new = ScheduleNew(name, schedule.kind, schedule.spec, schedule.next_after(moment))
        driver.schedules_insert(conn, [new])
        row = driver.schedule_lock(conn, name)
    if row is None:
        raise _missing(name)
    return row


def _schedule_of(row: ScheduleRow, declared: Mapping[str, Schedule]) -> Schedule:
    if row.definition is not None:
        return from_definition(row.name, row.kind, row.definition)
    if row.name in declared:
        return declared[row.name]
    return from_spec(row.name, row.kind, row.spec)


def create(
    session: Session,
    model: type[JobMixin],
    registry: Registry,
    declared: Mapping[str, Schedule],
    name: object,
    kind: object,
    *,
    max_payload_bytes: int,
    **definition: Any,
) -> Schedule:
    """Create or replace the runtime schedule `name`; see `JobQueue.schedule`."""
    name = _check_name(name)
    schedule = make_schedule(
        registry,
        kind,
        name=name,
        max_payload_bytes=max_payload_bytes,
        label="schedule",
        **definition,
    )
    if name in declared:
        raise ConfigurationError(
            f"schedule {name!r} is declared in code (jobs.periodic), which wins over a "
            "runtime schedule of the same name: give the runtime schedule another name"
        )
    task = registry.get(schedule.kind)
    if schedule.queue is None and task is not None:
        # Stored resolved: a worker without this task still enqueues into its queue.
        schedule = Schedule(**{**schedule.__dict__, "queue": task.queue})
    driver, conn = driver_for(session, model), session.connection()
    row = driver.schedule_lock(conn, name)
    if row is not None and row.definition is None:
        raise _declared_elsewhere(name)
    moment = row.now if row is not None else driver.clock_now(conn)
    define = ScheduleDefine(
        name, schedule.kind, schedule.spec, schedule.to_definition(), schedule.next_after(moment)
    )
    if not driver.schedule_upsert(conn, define):
        raise _declared_elsewhere(name)  # a worker registered it meanwhile
    return schedule


def _declared_elsewhere(name: str) -> ConfigurationError:
    return ConfigurationError(
        f"schedule {name!r} is declared in code (a worker registered it with jobs.periodic); "
        "code wins on a name clash: give the runtime schedule another name (or, if that "
        "code is gone, `sa-jobqueue schedules remove` its row first)"
    )


def remove(
    session: Session, model: type[JobMixin], declared: Mapping[str, Schedule], name: object
) -> None:
    """Delete schedule `name`'s row; see `JobQueue.unschedule`."""
    name = _check_name(name)
    if name in declared:
        raise ConfigurationError(
            f"schedule {name!r} is declared in code (jobs.periodic): a worker would add it "
            "back; remove the jobs.periodic call, or pause it (jobs.pause_schedule)"
        )
    if driver_for(session, model).schedule_delete(session.connection(), name):
        return
    raise _missing(name)


def pause(
    session: Session, model: type[JobMixin], declared: Mapping[str, Schedule], name: object
) -> bool:
    """Pause schedule `name`; True if it was running. See `JobQueue.pause_schedule`."""
    name = _check_name(name)
    driver = driver_for(session, model)
    _row_or_declared(session, driver, declared, name)
    return driver.schedule_pause(session.connection(), name)


def resume(
    session: Session, model: type[JobMixin], declared: Mapping[str, Schedule], name: object
) -> bool:
    """Resume schedule `name`; True if it was paused. See `JobQueue.resume_schedule`."""
    name = _check_name(name)
    driver = driver_for(session, model)
    row = _row_or_declared(session, driver, declared, name)
    if row.paused_at is None:
        return False
    following = row.next_run_at
    if following <= row.now:  # ticks passed while it was paused: skipped, not caught up
        following = _schedule_of(row, declared).next_after(row.now)
    return driver.schedule_resume(session.connection(), name, following)


def run_now(
    session: Session,
    model: type[JobT],
    registry: Registry,
    declared: Mapping[str, Schedule],
    inserter: Inserter[JobT],
    name: object,
) -> JobT:
    """Enqueue one job of schedule `name` now; see `JobQueue.run_schedule_now`."""
    name = _check_name(name)
    driver = driver_for(session, model)
    row = _row_or_declared(session, driver, declared, name)
    if row.definition is None and name not in declared:
        raise ConfigurationError(
            f"schedule {name!r} is declared in code that this JobQueue does not declare: "
            "its payload is not known here (run it from the application's JobQueue, "
            "e.g. sa-jobqueue schedules run --app myapp.jobs:jobs)"
        )
    schedule = _schedule_of(row, declared)
    # The run's own key: a second run-now in the same transaction returns this job.
    key = f"periodic:{name}:now:{row.now.isoformat()}"
    job: JobT = inserter.insert(session, [job_spec(schedule, registry, idempotency_key=key)])[0]
    driver.schedule_run_record(session.connection(), name, job.id)
    return job


def stored(session: Session, model: type[JobMixin]) -> list[StoredSchedule]:
    """Every schedule the schedules table holds, by name."""
    rows = driver_for(session, model).schedules_list(session.connection())
    return [
        StoredSchedule(
            name=row.name,
            kind=row.kind,
            source="code" if row.definition is None else "runtime",
            spec=row.spec,
            next_run_at=row.next_run_at,
            last_run_at=row.last_run_at,
            last_job_id=row.last_job_id,
            paused_at=row.paused_at,
            definition=row.definition,
        )
        for row in rows
    ]
