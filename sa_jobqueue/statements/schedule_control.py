"""Statements of the runtime schedule operations: create or replace, remove, pause, resume, run.

All on the schedules table beside the jobs table (`sa_jobqueue.schema.state_tables`),
run in the caller's transaction by `sa_jobqueue.periodic.runtime`. The workers' side
(reading the rows, taking a tick) is in `sa_jobqueue.statements.control`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Select,
    Table,
    Text,
    Update,
    bindparam,
    case,
    delete,
    func,
    null,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningDelete, ReturningInsert

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.state_tables import schedules_table_for

__all__ = [
    "delete_schedule",
    "list_schedules",
    "lock_schedule",
    "pause_schedule",
    "record_schedule_run",
    "resume_schedule",
    "upsert_schedule",
]


def _schedules(model: type[JobMixin]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return schedules_table_for(table)


def _named(table: Table) -> Any:
    return table.c.name == bindparam("schedule_name", type_=Text)


def lock_schedule(model: type[JobMixin]) -> Select[Any]:
    """Schedule ``:schedule_name``'s row, locked ``FOR UPDATE`` until the caller commits.

    Columns: every column of the schedules table, and ``now``.
    """
    table = _schedules(model)
    return select(*table.c, func.now().label("now")).where(_named(table)).with_for_update()


def list_schedules(model: type[JobMixin]) -> Select[Any]:
    """Every schedule's row, by name, with ``now``."""
    table = _schedules(model)
    return select(*table.c, func.now().label("now")).order_by(table.c.name)


def upsert_schedule(model: type[JobMixin]) -> ReturningInsert[Any]:
    """Create runtime schedule ``:schedule_name``, or replace the runtime one of that name.

    Binds ``:schedule_kind``, ``:schedule_spec``, ``:schedule_definition`` (JSONB) and
    ``:following`` (its next tick). A replacement with the same ticks (``spec``) keeps
    the row's ``next_run_at``, so no tick is skipped or repeated; with other ticks it
    takes ``:following``. ``paused_at`` is kept. A row declared in code (``definition``
    NULL) is not replaced: nothing is returned then.
    """
    table = _schedules(model)
    insert = pg_insert(table).values(
        name=bindparam("schedule_name", type_=Text),
        kind=bindparam("schedule_kind", type_=Text),
        spec=bindparam("schedule_spec", type_=Text),
        next_run_at=bindparam("following", type_=TIMESTAMP(timezone=True)),
        definition=bindparam("schedule_definition", type_=JSONB(none_as_null=True)),
    )
    new = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=[table.c.name],
        set_={
            "kind": new.kind,
            "spec": new.spec,
            "definition": new.definition,
            "next_run_at": case(
                (table.c.spec == new.spec, table.c.next_run_at), else_=new.next_run_at
            ),
            "updated_at": func.now(),
        },
        where=table.c.definition.is_not(None),
    ).returning(table.c.name)


def delete_schedule(model: type[JobMixin]) -> ReturningDelete[Any]:
    """Delete schedule ``:schedule_name``'s row; returns its name if there was one."""
    table = _schedules(model)
    return delete(table).where(_named(table)).returning(table.c.name)


def pause_schedule(model: type[JobMixin]) -> Update:
    """Pause schedule ``:schedule_name``: workers take none of its ticks while it is paused.

    Returns the name when it was running (not paused already).
    """
    table = _schedules(model)
    return (
        update(table)
        .where(_named(table), table.c.paused_at.is_(None))
        .values(paused_at=func.now(), updated_at=func.now())
        .returning(table.c.name)
    )


def resume_schedule(model: type[JobMixin]) -> Update:
    """Resume schedule ``:schedule_name``, its next tick ``:following``; returns its name.

    The caller passes the row's ``next_run_at`` when it is still ahead, else the next
    tick after now: ticks that passed while it was paused are skipped, not caught up.
    """
    table = _schedules(model)
    return (
        update(table)
        .where(_named(table), table.c.paused_at.is_not(None))
        .values(
            paused_at=null(),
            next_run_at=bindparam("following", type_=TIMESTAMP(timezone=True)),
            updated_at=func.now(),
        )
        .returning(table.c.name)
    )


def record_schedule_run(model: type[JobMixin]) -> Update:
    """Schedule ``:schedule_name`` ran now (``run_schedule_now``): job ``:job_id``."""
    table = _schedules(model)
    return (
        update(table)
        .where(_named(table))
        .values(
            last_run_at=func.now(),
            last_job_id=bindparam("job_id", type_=BigInteger),
            updated_at=func.now(),
        )
    )
