"""The statements of a worker's schedules round: the due read, registering, taking a tick.

Run by `PostgresSchedules` (`sa_jobqueue.driver.postgres.schedules`) for
`sa_jobqueue.periodic.ticks`: read the due rows (`due_schedules`), register the code
schedules (`read_schedules`, `insert_schedules`, `respec_schedule`), take a tick with
the conditional UPDATE that makes it run once (`advance_schedule`). See docs/periodic.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Select,
    Table,
    Text,
    Update,
    bindparam,
    cast,
    func,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.state_tables import schedules_table_for

__all__ = [
    "advance_schedule",
    "due_schedules",
    "insert_schedules",
    "read_schedules",
    "record_schedule_job",
    "respec_schedule",
    "schedules_of",
    "text_array",
]


def schedules_of(model: type[JobMixin]) -> Table:
    """The schedules table beside `model`'s jobs table."""
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return schedules_table_for(table)


def read_schedules(model: type[JobMixin]) -> Select[Any]:
    """The schedules named in ``:names``, with ``now()``: a primary-key lookup per name.

    Columns: ``name``, ``kind``, ``spec``, ``next_run_at``, ``definition`` (NULL for a
    schedule declared in code), ``paused_at``, ``now``.
    """
    schedules = schedules_of(model)
    return select(
        schedules.c.name,
        schedules.c.kind,
        schedules.c.spec,
        schedules.c.next_run_at,
        schedules.c.definition,
        schedules.c.paused_at,
        func.now().label("now"),
    ).where(schedules.c.name == func.any(bindparam("names", type_=ARRAY(Text))))


def due_schedules(model: type[JobMixin]) -> Select[Any]:
    """Up to ``:limit`` due schedules a worker can take: locked, oldest tick first, with ``now()``.

    Due means ``next_run_at <= now()`` and not paused; a worker takes the runtime
    schedules and those it declares in code (``:names``), never a row it could not
    enqueue for (another application's, or one left behind by code that is gone).
    Reads only what is due, through the partial index on ``next_run_at`` (revision
    ``sajq_0009``), so the round costs the same beside 10 schedules or 10,000.
    ``FOR UPDATE SKIP LOCKED``: workers share the due rows instead of queueing on
    each other's locks; the conditional UPDATE (`advance_schedule`) still decides.
    ``:names`` is the array's text form (`text_array`), made once by the worker: one
    declaring 10,000 schedules does not adapt each name at every round.

    Columns: ``name``, ``kind``, ``spec``, ``next_run_at``, ``definition``, ``now``.
    """
    schedules = schedules_of(model)
    return (
        select(
            schedules.c.name,
            schedules.c.kind,
            schedules.c.spec,
            schedules.c.next_run_at,
            schedules.c.definition,
            func.now().label("now"),
        )
        .where(schedules.c.next_run_at <= func.now(), schedules.c.paused_at.is_(None))
        .where(
            or_(
                schedules.c.definition.is_not(None),
                # A hashed subplan: the planner does not estimate each name, as it would
                # for ``name = ANY(array)`` (100 ms planning with 10,000 names).
                schedules.c.name.in_(
                    select(func.unnest(cast(bindparam("names", type_=Text), ARRAY(Text))))
                ),
            )
        )
        .order_by(schedules.c.next_run_at)
        .limit(bindparam("limit", type_=BigInteger))
        .with_for_update(skip_locked=True)
    )


def text_array(values: Sequence[str]) -> str:
    r"""The text form of a PostgreSQL ``text[]`` holding `values`, for a ``CAST(... AS text[])``.

    >>> text_array(["nightly", 'a"b'])
    '{"nightly","a\\"b"}'
    """
    quoted = (value.replace("\\", "\\\\").replace('"', '\\"') for value in values)
    return "{" + ",".join(f'"{value}"' for value in quoted) + "}"


def insert_schedules(model: type[JobMixin]) -> PgInsert:
    """Add schedules not known yet: arrays ``:names``, ``:kinds``, ``:specs``, ``:next_run_ats``.

    A schedule another worker added first is left alone.
    """
    schedules = schedules_of(model)
    rows = (
        func.unnest(
            bindparam("names", type_=ARRAY(Text)),
            bindparam("kinds", type_=ARRAY(Text)),
            bindparam("specs", type_=ARRAY(Text)),
            bindparam("next_run_ats", type_=ARRAY(TIMESTAMP(timezone=True))),
        )
        .table_valued("name", "kind", "spec", "next_run_at")
        .render_derived(name="known")
    )
    return (
        pg_insert(schedules)
        .from_select(
            ["name", "kind", "spec", "next_run_at"],
            select(rows.c.name, rows.c.kind, rows.c.spec, rows.c.next_run_at),
        )
        .on_conflict_do_nothing(index_elements=[schedules.c.name])
    )


def _definition_param() -> Any:
    return bindparam("schedule_definition", type_=JSONB(none_as_null=True))


def advance_schedule(model: type[JobMixin]) -> Update:
    """Take the tick ``:due`` of schedule ``:schedule_name``: move it to ``:following``.

    This is what makes a tick run once: the UPDATE matches only while the row still
    holds ``:due`` and the tick is due by the database clock. A second worker racing
    for the same tick waits on the row lock, then finds ``next_run_at`` moved and
    updates nothing. Returns the name when this caller won. A schedule paused, or a
    runtime schedule replaced (``:schedule_definition`` is the one read; NULL for code) since
    the caller read it, is not taken either.

    The winner's definition (``:schedule_spec``, ``:schedule_kind``) is stored with
    the tick it takes, whichever definition the row held: during a rolling deploy, a
    due tick is taken by either definition's workers, never skipped.
    """
    schedules = schedules_of(model)
    return (
        update(schedules)
        .where(schedules.c.name == bindparam("schedule_name", type_=Text))
        .where(schedules.c.next_run_at == bindparam("due", type_=TIMESTAMP(timezone=True)))
        .where(schedules.c.next_run_at <= func.now())
        .where(schedules.c.paused_at.is_(None))
        .where(schedules.c.definition.is_not_distinct_from(_definition_param()))
        .values(
            spec=bindparam("schedule_spec", type_=Text),
            kind=bindparam("schedule_kind", type_=Text),
            next_run_at=bindparam("following", type_=TIMESTAMP(timezone=True)),
            last_run_at=func.now(),
            updated_at=func.now(),
        )
        .returning(schedules.c.name)
    )


def record_schedule_job(model: type[JobMixin]) -> Update:
    """Remember ``:job_id`` as the job of schedule ``:schedule_name``'s latest tick."""
    schedules = schedules_of(model)
    return (
        update(schedules)
        .where(schedules.c.name == bindparam("schedule_name", type_=Text))
        .values(last_job_id=bindparam("job_id", type_=BigInteger))
    )


def respec_schedule(model: type[JobMixin]) -> Update:
    """A schedule whose definition changed: store ``:schedule_spec`` and ``:schedule_kind``.

    ``:following`` is the new definition's next tick; the row keeps the earlier of it
    and the tick it holds, so a rewrite never moves a tick later. (Two definitions
    rewriting each other during a deploy could otherwise push the tick forward for
    ever: the tick that is due first fires, by either definition.)

    Matches only while the row holds another spec, or a runtime definition (a schedule
    declared in code wins over a runtime one of its name: the definition is cleared),
    so workers that agree do nothing.
    """
    schedules = schedules_of(model)
    return (
        update(schedules)
        .where(schedules.c.name == bindparam("schedule_name", type_=Text))
        .where(
            or_(
                schedules.c.spec != bindparam("schedule_spec", type_=Text),
                schedules.c.definition.is_not(None),
            )
        )
        .values(
            spec=bindparam("schedule_spec", type_=Text),
            definition=null(),
            kind=bindparam("schedule_kind", type_=Text),
            next_run_at=func.least(
                schedules.c.next_run_at, bindparam("following", type_=TIMESTAMP(timezone=True))
            ),
            updated_at=func.now(),
        )
        .returning(schedules.c.name)
    )
