"""A schedule's definition: validated once (`make_schedule`), its ticks pure functions of it.

The same `Schedule` describes a schedule declared in code (`JobQueue.periodic`) and
one made at runtime (`JobQueue.schedule`, stored as `Schedule.to_definition` in the
schedules table and read back by `from_definition`). Policies: docs/periodic.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import islice, pairwise
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from sa_jobqueue.core.validation import (
    check_delay,
    check_name,
    cron_step_problem,
    dump_payload,
)
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.schema.model import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE
from sa_jobqueue.tasks import Registry

__all__ = ["UTC", "Schedule", "from_definition", "from_spec", "job_spec", "make_schedule"]

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
        jitter: each tick's job is due up to this many seconds after the tick (0: at
            it); the delay is a fixed function of the schedule and the tick.
    """

    name: str
    kind: str
    cron: str | None
    timezone: str
    every: float | None
    payload: str
    queue: str | None
    jitter: float = 0.0

    @property
    def spec(self) -> str:
        """The definition of the ticks as one line, stored beside the schedule's next tick."""
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

    def delay_of(self, tick: datetime) -> float:
        """The jitter of `tick`'s job, in seconds: the same for every worker.

        >>> s = make_schedule(Registry(), "ping", every=60, jitter=10, check_kind=False)
        >>> tick = datetime(2026, 12, 1, 9, tzinfo=UTC)
        >>> 0 <= s.delay_of(tick) < 10 and s.delay_of(tick) == s.delay_of(tick)
        True
        """
        if not self.jitter:
            return 0.0
        digest = hashlib.sha256(f"{self.name}\0{tick.isoformat()}".encode()).digest()
        return self.jitter * int.from_bytes(digest[:8], "big") / 2**64

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
            "jitter": self.jitter,
        }

    def to_definition(self) -> dict[str, Any]:
        """What the schedules table's ``definition`` holds for a runtime schedule."""
        data = self.to_dict()
        del data["name"], data["kind"]  # the row's own columns
        return data


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
    jitter: object = None,
    max_payload_bytes: int = 1 << 20,
    check_kind: bool = True,
    label: str = "periodic",
    new: bool = True,
) -> Schedule:
    """Validate a schedule's definition; every problem is a `ConfigurationError` naming it.

    `label` starts each message (``periodic 'name': ...``; ``schedule`` for runtime ones).
    A `new` one (at the call; not one read back from the table, which an earlier version
    stored) is also refused a jitter longer than the time between its ticks and a cron
    step that reaches past its field (`core.validation.cron_step_problem`).
    """
    shown = name if name is not None else kind
    try:
        kind = check_name("kind", kind)
        name = kind if name is None else check_name("name", name)
        queue = None if queue is None else check_name("queue", queue)
        body = dump_payload({} if payload is None else payload, max_payload_bytes)
        spread = 0.0 if jitter is None else check_delay("jitter", jitter)
    except ValidationError as exc:
        raise ConfigurationError(f"{label} {shown!r}: {exc}") from None
    where = f"{label} {name!r}"
    if check_kind and registry.get(kind) is None:
        raise ConfigurationError(
            f"{where}: kind {kind!r} is not registered; register it with @jobs.task({kind!r}) "
            f"before jobs.{label if label == 'periodic' else 'schedule'}"
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
        if new:
            _check_jitter(where, spread, seconds, f"every={seconds:g}s")
        return Schedule(name, kind, None, "UTC", seconds, body, queue, spread)
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
    if new:
        problem = cron_step_problem(expression)
        if problem is not None:
            raise ConfigurationError(f"{where}: bad cron expression {cron!r}: {problem}")
        if spread:
            ticks = list(islice(CronSim(expression, datetime.now(zone)), 8))
            gap = min(((b - a).total_seconds() for a, b in pairwise(ticks)), default=math.inf)
            _check_jitter(where, spread, gap, f"cron {cron!r}")
    return Schedule(name, kind, expression, zone_name, None, body, queue, spread)


def _check_jitter(where: str, jitter: float, gap: float, ticks: str) -> None:
    """Refuse a jitter longer than the time between two ticks: jobs would pile up."""
    if jitter > gap:
        raise ConfigurationError(
            f"{where}: jitter={jitter:g}s is longer than the {gap:g}s between two ticks of "
            f"{ticks}: a tick's job would be due after the next tick's, and jobs would pile "
            "up; give a jitter at most that long"
        )


def from_definition(name: str, kind: str, definition: object) -> Schedule:
    """The runtime schedule a schedules-table row holds (`Schedule.to_definition`).

    Raises `ConfigurationError` when the stored definition is not a valid one (a row
    edited by hand): the worker logs it and leaves that schedule alone.
    """
    if not isinstance(definition, dict):
        raise ConfigurationError(f"schedule {name!r}: stored definition is not an object")
    known = {"cron", "timezone", "every", "queue", "payload", "jitter"}
    unknown = set(definition) - known
    if unknown:
        raise ConfigurationError(f"schedule {name!r}: stored definition has {sorted(unknown)}")
    return make_schedule(
        Registry(),
        kind,
        name=name,
        check_kind=False,
        label="schedule",
        new=False,
        cron=definition.get("cron"),
        timezone=definition.get("timezone"),
        every=definition.get("every"),
        payload=definition.get("payload"),
        queue=definition.get("queue"),
        jitter=definition.get("jitter"),
    )


def from_spec(name: str, kind: str, spec: str) -> Schedule:
    """The ticks a stored ``spec`` describes (``every 30s``, ``cron 0 3 * * * Europe/Paris``).

    For a code-declared schedule read from the table by code that does not declare
    it (an operator command): its ticks are right; its payload and queue are not known.

    >>> from_spec("beat", "beat", "every 30s").every
    30.0
    >>> from_spec("r", "r", "cron 0 3 * * * Europe/Paris").timezone
    'Europe/Paris'
    """
    head, _, rest = spec.partition(" ")
    if head == "every" and rest.endswith("s"):
        return make_schedule(Registry(), kind, name=name, every=float(rest[:-1]), check_kind=False)
    expression, _, zone = rest.rpartition(" ")
    if head != "cron" or not expression:
        raise ConfigurationError(f"schedule {name!r}: cannot read its stored spec {spec!r}")
    return make_schedule(
        Registry(), kind, name=name, cron=expression, timezone=zone, check_kind=False, new=False
    )


def job_spec(
    schedule: Schedule, registry: Registry, *, idempotency_key: str, delay: float = 0.0
) -> JobSpec:
    """The job one run of `schedule` enqueues: its payload, its queue (else the task's)."""
    task = registry.get(schedule.kind)
    return JobSpec(
        kind=schedule.kind,
        queue=schedule.queue or (task.queue if task else DEFAULT_QUEUE),
        payload=schedule.payload,
        priority=0,
        max_attempts=(task.max_attempts if task and task.max_attempts else DEFAULT_MAX_ATTEMPTS),
        run_at=None,
        delay=delay,
        idempotency_key=idempotency_key,
        unique_key=None,
    )
