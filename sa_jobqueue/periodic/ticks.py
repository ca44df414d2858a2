"""Enqueueing each tick once: the schedules table's conditional UPDATE, every worker racing.

Which worker enqueues a tick is decided by the database: the schedules table holds
each schedule's next tick, and a worker enqueues it only if its conditional UPDATE
moves that row forward, in the same transaction as the job's INSERT (`enqueue_due`).
No leader, no worker clock: ``now()`` says what is due. A worker runs the schedules
of its own code and every runtime schedule stored in the table (docs/periodic.md),
reading only the rows that are due, so a round costs the same whatever their number.

Policies (docs/periodic.md):

* Catch-up: ticks missed while no worker ran are not back-filled. The first worker
  to come back enqueues one job for them (the oldest missed tick's), then the
  schedule goes on from the next tick after now.
* A schedule seen for the first time starts at its next tick after now.
* A changed definition never moves a stored tick later; a due tick is taken by
  either definition's workers during a rolling deploy.
* A paused schedule fires nothing; a code-declared schedule wins over a runtime
  one of the same name.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.driver.protocol.schedules import (
    ScheduleNew,
    ScheduleRow,
    ScheduleSpec,
    ScheduleTick,
)
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.periodic.definitions import Schedule, from_definition, job_spec
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.tasks import Registry

__all__ = [
    "BATCH",
    "BATCHES",
    "REGISTER_EVERY",
    "PeriodicEnqueuer",
    "Tick",
    "enqueue_due",
    "next_runs",
]

log = logging.getLogger("sa_jobqueue.periodic")


@dataclass(frozen=True)
class Tick:
    """A tick this worker enqueued: the schedule, the tick, and the job."""

    schedule: str
    due: datetime
    job_id: int
    missed: int


#: Ticks taken per transaction, at most; a round takes up to `BATCHES` such batches.
BATCH = 200
#: Batches per round: a round takes up to ``BATCH * BATCHES`` ticks, the rest the next.
BATCHES = 10
#: How often (seconds) a worker registers its code-declared schedules again: at its
#: first round, then this often (a row an operator removed comes back, a changed
#: definition another version stored is rewritten). Rounds in between read the due rows only.
REGISTER_EVERY = 60.0


def enqueue_due(
    connection: Connection,
    model: type[JobMixin],
    registry: Registry,
    schedules: Mapping[str, Schedule],
    *,
    register: bool = True,
    driver: Driver | None = None,
) -> list[Tick]:
    """Enqueue the due tick of each schedule that this caller wins; commit; return them.

    `schedules` are the ones declared in code; every runtime schedule stored in the
    table runs too (a code-declared one of the same name wins). Every worker may
    call it every round: a tick goes to the one whose conditional UPDATE of the
    schedules row succeeds, and its job is inserted in the same transaction, so a
    crash in between leaves neither. Uses (and commits) its own transactions on
    `connection`, one per batch of up to `BATCH` due ticks.

    Only due rows are read (`Driver.schedules_due`), so the cost is that of the
    ticks due, whatever the number of schedules. With `register` (the default), the
    rows of `schedules` are read by name first: those not stored yet are inserted
    (from their next tick after now), and a changed definition is stored (never
    moving the stored tick later). A worker registers at its first round and every
    `REGISTER_EVERY` seconds (`PeriodicEnqueuer`). `driver` runs the schedules'
    operations (default: `driver_for` `connection`).
    """
    enqueued: list[Tick] = []
    driver = driver or driver_for(connection, model)
    inserter = Inserter(model)
    names = tuple(schedules)
    for batch in range(BATCHES):
        taken: list[Tick] = []
        with Session(bind=connection) as session, session.begin():
            conn = session.connection()
            if register and batch == 0 and schedules:
                _register(conn, driver, schedules)
            rows = driver.schedules_due(conn, names, BATCH)
            for row in rows:
                tick = _take(session, driver, registry, schedules, inserter, row)
                if tick is not None:
                    taken.append(tick)
        _log_ticks(taken)  # committed: a later batch's failure does not undo them
        enqueued += taken
        if len(rows) < BATCH:
            break
    return enqueued


def _log_ticks(ticks: list[Tick]) -> None:
    for tick in ticks:
        extra = f" (and {tick.missed} more missed tick(s) skipped)" if tick.missed else ""
        log.info(
            "periodic %s: enqueued job %s for the tick at %s%s",
            tick.schedule,
            tick.job_id,
            tick.due.isoformat(),
            extra,
        )


def _register(conn: Connection, driver: Driver, schedules: Mapping[str, Schedule]) -> None:
    """Insert the code-declared schedules' missing rows; store a changed definition.

    A row that holds another spec (an earlier deploy's), or a runtime definition (code
    wins), gets this worker's spec and the earlier of its stored tick and this
    definition's next one: a rewrite never moves a tick later (docs/periodic.md).
    """
    rows = driver.schedules_read(conn, list(schedules))
    now = rows[0].now if rows else driver.clock_now(conn)
    known = {row.name: row for row in rows}
    new = [
        ScheduleNew(s.name, s.kind, s.spec, s.next_after(now))
        for name, s in schedules.items()
        if name not in known
    ]
    driver.schedules_insert(conn, new)
    for name, row in sorted(known.items()):  # by name: workers lock rows in one order
        schedule = schedules[name]
        if row.spec == schedule.spec and row.definition is None:
            continue  # the usual case: nothing to compute
        spec = ScheduleSpec(name, schedule.kind, schedule.spec, schedule.next_after(now))
        if driver.schedule_respec(conn, spec):
            _log_respec(name, schedule, row)


def _take(
    session: Session,
    driver: Driver,
    registry: Registry,
    schedules: Mapping[str, Schedule],
    inserter: Inserter[Any],
    row: ScheduleRow,
) -> Tick | None:
    """Take the due tick of `row` (locked by the due read): move it on, insert its job."""
    name, due, now = row.name, row.next_run_at, row.now
    schedule = schedules.get(name) or _runtime(row)
    if schedule is None:
        return None  # a stored definition this worker cannot read (logged once)
    conn = session.connection()
    following = schedule.next_after(now)
    if name in schedules and row.definition is not None:
        # Code wins over a runtime schedule of its name: clear the stored definition.
        driver.schedule_respec(conn, ScheduleSpec(name, schedule.kind, schedule.spec, following))
        _log_respec(name, schedule, row)
    # A due tick is taken whichever definition the row holds: during a deploy either
    # definition's workers fire it, once, and the winner stores its own.
    definition = None if name in schedules else row.definition
    tick = ScheduleTick(name, schedule.kind, schedule.spec, due, following, definition)
    if not driver.schedule_tick(conn, tick):
        return None  # the fence: taken, paused or replaced meanwhile
    spec = job_spec(
        schedule,
        registry,
        # Names the tick: a second line of defence (until pruned) behind the
        # schedules row, and a key the handler can hand to downstream systems.
        idempotency_key=f"periodic:{name}:{due.isoformat()}",
        delay=schedule.delay_of(due),
    )
    job = inserter.insert(session, [spec])[0]
    driver.schedule_tick_record(conn, name, job.id)
    return Tick(name, due, job.id, _missed(schedule, due, now))


def _log_respec(name: str, schedule: Schedule, row: ScheduleRow) -> None:
    if row.definition is not None:
        log.warning(
            "schedule %s is declared in code (jobs.periodic) and replaces the runtime "
            "schedule of that name; it now runs as %s",
            name,
            schedule.spec,
        )
    else:
        log.info("schedule %s now runs as %s", name, schedule.spec)


_RUNTIME: dict[tuple[str, str, str], Schedule | None] = {}


def _runtime(row: ScheduleRow) -> Schedule | None:
    """The runtime schedule a row holds (None for a code row this worker does not declare)."""
    if row.definition is None:
        return None  # declared in another application's code, or left behind
    key = (row.name, row.kind, json.dumps(row.definition, sort_keys=True))
    if key not in _RUNTIME:
        try:
            _RUNTIME[key] = from_definition(row.name, row.kind, row.definition)
        except ConfigurationError as error:
            log.warning("runtime schedule %s is left alone: %s", row.name, error)
            _RUNTIME[key] = None
        if len(_RUNTIME) > 10_000:  # definitions replaced many times: start afresh
            _RUNTIME.clear()
    return _RUNTIME.get(key)


class PeriodicEnqueuer:
    """The maintenance loop's part in periodic jobs: `enqueue_due` about every `interval`.

    Every worker runs one; the database gives each tick to one of them. Ticks are
    looked for at most every `interval` seconds (default 1), so a tick is enqueued
    within about a second of its time, at the cost of one indexed read of the due
    rows of the schedules table per worker per second (runtime schedules can appear
    at any time, so a worker with none in its code reads it too). The code-declared
    schedules are registered at the first round and every `register_every` seconds.
    Any error is logged and retried next time (registering again). `driver` runs the
    schedules' operations (default: `driver_for` the first connection it is given).
    """

    def __init__(
        self,
        model: type[JobMixin],
        registry: Registry,
        schedules: Mapping[str, Schedule],
        *,
        interval: float = 1.0,
        register_every: float = REGISTER_EVERY,
        clock: Any = None,
        driver: Driver | None = None,
    ) -> None:
        self.model = model
        self.driver = driver
        self.registry = registry
        self.schedules = dict(schedules)
        self.interval = interval
        self.register_every = register_every
        self._clock = clock or time.monotonic
        self._next = 0.0
        self._register_at = 0.0

    def maybe_run(self, connection: Connection) -> list[Tick]:
        """Run `enqueue_due` if `interval` has passed since the last run."""
        now = self._clock()
        if now < self._next:
            return []
        self._next = now + self.interval
        register = now >= self._register_at
        try:
            if self.driver is None:
                self.driver = driver_for(connection, self.model)
            ticks = enqueue_due(
                connection,
                self.model,
                self.registry,
                self.schedules,
                register=register,
                driver=self.driver,
            )
        except Exception as error:  # noqa: BLE001 - a schedule must never stop maintenance
            log.warning("periodic enqueue failed (%s); retrying", error)
            if connection.in_transaction():
                connection.rollback()
            self._register_at = 0.0  # the registration may not have committed
            return []
        if register:
            self._register_at = now + self.register_every
        return ticks


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
    driver = driver_for(connection, model)
    rows = driver.schedules_read(connection, [s.name for s in listed])
    now = rows[0].now if rows else driver.clock_now(connection)
    known = {row.name: row for row in rows}
    result: dict[str, tuple[datetime, str]] = {}
    for schedule in listed:
        row = known.get(schedule.name)
        if row is not None and row.spec == schedule.spec:
            result[schedule.name] = (row.next_run_at, "table")
        else:
            result[schedule.name] = (schedule.next_after(now), "computed")
    return result
