"""Periodic schedules: their definitions, their ticks, and enqueueing each tick once.

A `Schedule` is made by `JobQueue.periodic` and validated there. Its ticks are pure
functions of its definition (`Schedule.next_after`), so every worker computes the
same ones. Which worker enqueues a tick is decided by the database: the schedules
table holds each schedule's next tick, and a worker enqueues it only if its
conditional UPDATE moves that row forward, in the same transaction as the job's
INSERT (`enqueue_due`). No leader, no worker clock: ``now()`` says what is due.

Policies (docs/periodic.md):

* Catch-up: ticks missed while no worker ran are not back-filled. The first worker
  to come back enqueues one job for them (the oldest missed tick's), then the
  schedule goes on from the next tick after now.
* A schedule seen for the first time starts at its next tick after now.
* DST (cron in a time zone), as Debian's cron and `cronsim` do: a time that a
  spring-forward gap skips runs once, at the first instant after the gap, for a
  schedule at a fixed hour and minute; a schedule whose hour or minute is a
  wildcard or a step simply has no ticks inside the gap. In an autumn overlap a
  fixed-time schedule runs once, in the first pass; a wildcard-hour one runs in
  both passes (they are different instants).
* ``every`` ticks are multiples of the interval since the Unix epoch, in UTC, so
  they never move with DST.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.validation import check_delay, check_name, dump_payload
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.schema.model import DEFAULT_MAX_ATTEMPTS, JobMixin
from sa_jobqueue.statements import control
from sa_jobqueue.tasks import Registry

__all__ = ["PeriodicEnqueuer", "Schedule", "Tick", "enqueue_due", "make_schedule", "next_runs"]

log = logging.getLogger("sa_jobqueue.periodic")

UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Longer than any DST shift anywhere (two hours at most), so a cron search that
# starts this far back never starts inside an overlap it should have seen whole.
_CRON_LOOKBACK = timedelta(hours=3)


@dataclass(frozen=True)
class Schedule:
    """A periodic schedule: enqueue a job of `kind` at each tick.

    Attributes:
        name: identifies the schedule in the schedules table (default: the kind).
        kind: the task whose job each tick enqueues.
        cron: a 5-field (or 6-field, with seconds first) cron expression, or None.
        timezone: the IANA zone `cron` is read in (``"UTC"`` by default).
        every: the interval in seconds, or None.
        payload: the JSON payload of each job, as text.
        queue: the queue of each job (None: the task's queue).
    """

    name: str
    kind: str
    cron: str | None
    timezone: str
    every: float | None
    payload: str
    queue: str | None

    @property
    def spec(self) -> str:
        """The definition as one line, stored beside the schedule's next tick."""
        if self.cron is not None:
            return f"cron {self.cron} {self.timezone}"
        return f"every {self.every:g}s"

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after `moment` (aware), in UTC.

        >>> every = make_schedule(Registry(), "ping", every=30, check_kind=False)
        >>> every.next_after(datetime(2026, 12, 1, 9, 0, 10, tzinfo=UTC)).isoformat()
        '2026-12-01T09:00:30+00:00'
        >>> cron = make_schedule(Registry(), "report", cron="0 3 * * *",
        ...                      timezone="Europe/Paris", check_kind=False)
        >>> cron.next_after(datetime(2026, 12, 1, 9, tzinfo=UTC)).isoformat()
        '2026-12-02T02:00:00+00:00'
        """
        moment = moment.astimezone(UTC)
        if self.every is not None:
            step = round(self.every * 1_000_000)
            elapsed = (moment - _EPOCH) // timedelta(microseconds=1)
            return _EPOCH + timedelta(microseconds=(elapsed // step + 1) * step)
        assert self.cron is not None  # noqa: S101 - make_schedule gives one or the other
        zone = ZoneInfo(self.timezone)
        # Start before `moment` and keep the first tick after it: cronsim reads a
        # start inside an autumn overlap as its first pass, and could repeat a tick.
        start = (moment - _CRON_LOOKBACK).astimezone(zone).replace(fold=0)
        for tick in CronSim(self.cron, start):
            at = tick.astimezone(UTC)
            if at > moment:
                return at
        raise ConfigurationError(f"schedule {self.name!r}: cron {self.cron!r} has no next tick")

    def upcoming(self, moment: datetime, count: int) -> list[datetime]:
        """The next `count` ticks after `moment`, in UTC."""
        ticks = []
        for _ in range(count):
            moment = self.next_after(moment)
            ticks.append(moment)
        return ticks

    def to_dict(self) -> dict[str, Any]:
        """The definition as JSON-ready data."""
        return {
            "name": self.name,
            "kind": self.kind,
            "cron": self.cron,
            "timezone": self.timezone if self.cron is not None else None,
            "every": self.every,
            "queue": self.queue,
            "payload": json.loads(self.payload),
        }


def make_schedule(
    registry: Registry,
    kind: object,
    *,
    cron: object = None,
    timezone: object = None,
    every: object = None,
    payload: Any = None,
    queue: object = None,
    name: object = None,
    max_payload_bytes: int = 1 << 20,
    check_kind: bool = True,
) -> Schedule:
    """Validate a schedule's definition; every problem is a `ConfigurationError` naming it."""
    label = name if name is not None else kind
    try:
        kind = check_name("kind", kind)
        name = kind if name is None else check_name("name", name)
        queue = None if queue is None else check_name("queue", queue)
        body = dump_payload({} if payload is None else payload, max_payload_bytes)
    except ValidationError as exc:
        raise ConfigurationError(f"periodic {label!r}: {exc}") from None
    where = f"periodic {name!r}"
    if check_kind and registry.get(kind) is None:
        raise ConfigurationError(
            f"{where}: kind {kind!r} is not registered; register it with @jobs.task({kind!r}) "
            "before jobs.periodic"
        )
    if (cron is None) == (every is None):
        raise ConfigurationError(f"{where}: give exactly one of cron= or every=")
    if every is not None:
        if timezone is not None:
            raise ConfigurationError(
                f"{where}: timezone= applies to cron= only (every= ticks are UTC intervals)"
            )
        try:
            seconds = check_delay("every", every)
        except ValidationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
        if seconds < 1:
            raise ConfigurationError(f"{where}: every= must be at least 1 second, not {seconds:g}s")
        return Schedule(name, kind, None, "UTC", seconds, body, queue)
    if not isinstance(cron, str):
        raise ConfigurationError(f"{where}: cron= must be a str, not {type(cron).__name__}")
    zone_name = "UTC" if timezone is None else timezone
    if not isinstance(zone_name, str):
        raise ConfigurationError(
            f"{where}: timezone= must be an IANA zone name such as 'Europe/Paris', "
            f"not {type(zone_name).__name__}"
        )
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"{where}: unknown time zone {zone_name!r} (an IANA name such as 'Europe/Paris')"
        ) from None
    expression = " ".join(cron.split())
    try:
        next(iter(CronSim(expression, datetime.now(zone))))
    except CronSimError as exc:
        raise ConfigurationError(f"{where}: bad cron expression {cron!r}: {exc}") from None
    except StopIteration:
        raise ConfigurationError(f"{where}: cron expression {cron!r} never matches") from None
    return Schedule(name, kind, expression, zone_name, None, body, queue)


@dataclass(frozen=True)
class Tick:
    """A tick this worker enqueued: the schedule, the tick, and the job."""

    schedule: str
    due: datetime
    job_id: int
    missed: int


def _spec_for(schedule: Schedule, registry: Registry, due: datetime) -> JobSpec:
    task = registry.get(schedule.kind)
    return JobSpec(
        kind=schedule.kind,
        queue=schedule.queue or (task.queue if task else "default"),
        payload=schedule.payload,
        priority=0,
        max_attempts=(task.max_attempts if task and task.max_attempts else DEFAULT_MAX_ATTEMPTS),
        run_at=None,
        delay=0.0,
        # Names the tick: a second line of defence (until pruned) behind the schedules
        # row, and a key the handler can hand to downstream systems.
        idempotency_key=f"periodic:{schedule.name}:{due.isoformat()}",
        unique_key=None,
    )


def enqueue_due(
    connection: Connection,
    model: type[JobMixin],
    registry: Registry,
    schedules: Mapping[str, Schedule],
) -> list[Tick]:
    """Enqueue the due tick of each schedule that this caller wins; commit; return them.

    Every worker may call it every round: a tick goes to the one whose conditional
    UPDATE of the schedules row succeeds, and its job is inserted in the same
    transaction, so a crash in between leaves neither. Uses (and commits) its own
    transaction on `connection`.
    """
    if not schedules:
        return []
    enqueued: list[Tick] = []
    inserter = Inserter(model)
    with Session(bind=connection) as session, session.begin():
        rows = session.execute(control.read_schedules(model), {"names": list(schedules)}).all()
        now = rows[0].now if rows else session.execute(statements.db_now()).scalar_one()
        known = {row.name: row for row in rows}
        new = [s for name, s in schedules.items() if name not in known]
        if new:
            session.execute(
                control.insert_schedules(model),
                {
                    "names": [s.name for s in new],
                    "kinds": [s.kind for s in new],
                    "specs": [s.spec for s in new],
                    "next_run_ats": [s.next_after(now) for s in new],
                },
            )
        for name, row in sorted(known.items()):
            schedule = schedules[name]
            params = {
                "schedule_name": name,
                "schedule_spec": schedule.spec,
                "schedule_kind": schedule.kind,
            }
            if row.next_run_at > now:
                if row.spec != schedule.spec:
                    # Never later than the tick the row holds (docs/periodic.md, deploys).
                    params["following"] = schedule.next_after(now)
                    session.execute(control.respec_schedule(model), params)
                    log.info("schedule %s now runs as %s", name, schedule.spec)
                continue
            # A due tick is taken whichever definition the row holds: during a deploy
            # either definition's workers fire it, once.
            following = schedule.next_after(now)
            won = session.execute(
                control.advance_schedule(model),
                {**params, "due": row.next_run_at, "following": following},
            ).first()
            if won is None:
                continue  # another worker took this tick
            job = inserter.insert(session, [_spec_for(schedule, registry, row.next_run_at)])[0]
            session.execute(
                control.record_schedule_job(model), {"schedule_name": name, "job_id": job.id}
            )
            missed = _missed(schedule, row.next_run_at, now)
            enqueued.append(Tick(name, row.next_run_at, job.id, missed))
    for tick in enqueued:
        extra = f" (and {tick.missed} more missed tick(s) skipped)" if tick.missed else ""
        log.info(
            "periodic %s: enqueued job %s for the tick at %s%s",
            tick.schedule,
            tick.job_id,
            tick.due.isoformat(),
            extra,
        )
    return enqueued


class PeriodicEnqueuer:
    """The maintenance loop's part in periodic jobs: `enqueue_due` about every `interval`.

    Every worker runs one; the database gives each tick to one of them. Ticks are
    looked for at most every `interval` seconds (default 1), so a tick is enqueued
    within about a second of its time, at the cost of one small read per worker
    per second while schedules exist. Any error is logged and retried next time.
    """

    def __init__(
        self,
        model: type[JobMixin],
        registry: Registry,
        schedules: Mapping[str, Schedule],
        *,
        interval: float = 1.0,
        clock: Any = None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.schedules = dict(schedules)
        self.interval = interval
        self._clock = clock or time.monotonic
        self._next = 0.0

    def maybe_run(self, connection: Connection) -> list[Tick]:
        """Run `enqueue_due` if `interval` has passed since the last run."""
        if not self.schedules or self._clock() < self._next:
            return []
        self._next = self._clock() + self.interval
        try:
            return enqueue_due(connection, self.model, self.registry, self.schedules)
        except Exception as error:  # noqa: BLE001 - a schedule must never stop maintenance
            log.warning("periodic enqueue failed (%s); retrying", error)
            if connection.in_transaction():
                connection.rollback()
            return []


def _missed(schedule: Schedule, due: datetime, now: datetime, limit: int = 1000) -> int:
    """How many ticks after `due` had passed by `now` too (counted up to `limit`)."""
    count, moment = 0, due
    while count < limit:
        moment = schedule.next_after(moment)
        if moment > now:
            break
        count += 1
    return count


def next_runs(
    connection: Connection, model: type[JobMixin], schedules: Iterable[Schedule]
) -> dict[str, tuple[datetime, str]]:
    """Each schedule's next run time: ``{name: (when, source)}``.

    The source is ``"table"`` when the schedules table holds the schedule with the
    same definition, else ``"computed"`` (from the database clock).
    """
    listed = list(schedules)
    rows = connection.execute(
        control.read_schedules(model), {"names": [s.name for s in listed]}
    ).all()
    now = rows[0].now if rows else connection.execute(statements.db_now()).scalar_one()
    known = {row.name: row for row in rows}
    result: dict[str, tuple[datetime, str]] = {}
    for schedule in listed:
        row = known.get(schedule.name)
        if row is not None and row.spec == schedule.spec:
            result[schedule.name] = (row.next_run_at, "table")
        else:
            result[schedule.name] = (schedule.next_after(now), "computed")
    return result
