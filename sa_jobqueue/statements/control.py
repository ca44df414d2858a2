"""Statements on the tables beside the jobs table: paused queues and periodic schedules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Text,
    Update,
    bindparam,
    cast,
    exists,
    func,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningDelete, ReturningInsert

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.state_tables import paused_table_for, schedules_table_for
from sa_jobqueue.statements.common import FENCE_ARRAYS, unnest_rows

__all__ = [
    "advance_schedule",
    "cancelled_attempts",
    "due_schedules",
    "insert_schedules",
    "is_paused",
    "pause",
    "paused_queues",
    "read_schedules",
    "record_schedule_job",
    "respec_schedule",
    "resume",
    "text_array",
]


def _table(model: type[JobMixin]) -> Any:
    return model.__table__


# -- paused queues --


def pause(model: type[JobMixin]) -> ReturningInsert[Any]:
    """Pause the queues in ``:queues`` (an array); return those not paused before."""
    paused = paused_table_for(_table(model))
    queues = (
        func.unnest(bindparam("queues", type_=ARRAY(Text)))
        .table_valued("queue")
        .render_derived(name="asked")
    )
    return (
        pg_insert(paused)
        .from_select(["queue"], select(queues.c.queue))
        .on_conflict_do_nothing(index_elements=[paused.c.queue])
        .returning(paused.c.queue)
    )


def resume(model: type[JobMixin]) -> ReturningDelete[Any]:
    """Resume the queues in ``:queues``; return those that were paused."""
    paused = paused_table_for(_table(model))
    return (
        paused.delete()
        .where(paused.c.queue == func.any(bindparam("queues", type_=ARRAY(Text))))
        .returning(paused.c.queue)
    )


def paused_queues(model: type[JobMixin]) -> Select[Any]:
    """``(queue, paused_at)`` of every paused queue, by name."""
    paused = paused_table_for(_table(model))
    return select(paused.c.queue, paused.c.paused_at).order_by(paused.c.queue)


def is_paused(model: type[JobMixin], queue: ColumnElement[Any]) -> ColumnElement[bool]:
    """True when `queue` (a column or parameter) is paused; the claim filters on its negation.

    A primary-key lookup in a table of a few rows: it costs the claim next to nothing.
    """
    paused = paused_table_for(_table(model))
    return exists().where(paused.c.queue == queue)


def cancelled_attempts(model: type[JobMixin]) -> Select[int, int]:
    """``(id, attempts)`` of the attempts in ``:ids``/``:attempt_numbers`` whose job is cancelled.

    A plain read: the heartbeat asks it about leases it found lost, to tell a
    cancelled job (stop its handler) from a lease that expired.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    return select(model.id, model.attempts).where(
        model.id == batch.c.id,
        model.attempts == batch.c.attempts,
        model.status == Status.CANCELLED.value,
    )


# -- periodic schedules --


def read_schedules(model: type[JobMixin]) -> Select[Any]:
    """The schedules named in ``:names``, with ``now()``: a primary-key lookup per name.

    Columns: ``name``, ``kind``, ``spec``, ``next_run_at``, ``definition`` (NULL for a
    schedule declared in code), ``paused_at``, ``now``.
    """
    schedules = schedules_table_for(_table(model))
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
    schedules = schedules_table_for(_table(model))
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
    schedules = schedules_table_for(_table(model))
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
    schedules = schedules_table_for(_table(model))
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
    schedules = schedules_table_for(_table(model))
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
    schedules = schedules_table_for(_table(model))
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
