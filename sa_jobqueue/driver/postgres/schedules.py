"""`PostgresSchedules`: the schedules family of `PostgresDriver`, and its runtime statements.

The runtime changes (`JobQueue.schedule`, ``unschedule``, ``pause_schedule``...) run
the statements here (`lock_schedule`, `upsert_schedule`, `delete_schedule`...); a
worker's round runs those of `sa_jobqueue.driver.postgres.ticks`. Each on the caller's
connection and transaction, never committing. See docs/periodic.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Row,
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

from sa_jobqueue.driver.postgres import ticks
from sa_jobqueue.driver.postgres.ticks import schedules_of
from sa_jobqueue.driver.protocol.schedules import (
    ScheduleDefine,
    ScheduleNew,
    ScheduleRow,
    ScheduleSpec,
    ScheduleTick,
)
from sa_jobqueue.schema.model import JobMixin

__all__ = [
    "PostgresSchedules",
    "delete_schedule",
    "list_schedules",
    "lock_schedule",
    "pause_schedule",
    "record_schedule_run",
    "resume_schedule",
    "upsert_schedule",
]


def _named(table: Table) -> Any:
    return table.c.name == bindparam("schedule_name", type_=Text)


def lock_schedule(model: type[JobMixin]) -> Select[Any]:
    """Schedule ``:schedule_name``'s row, locked ``FOR UPDATE`` until the caller commits.

    Columns: every column of the schedules table, and ``now``.
    """
    table = schedules_of(model)
    return select(*table.c, func.now().label("now")).where(_named(table)).with_for_update()


def list_schedules(model: type[JobMixin]) -> Select[Any]:
    """Every schedule's row, by name, with ``now``."""
    table = schedules_of(model)
    return select(*table.c, func.now().label("now")).order_by(table.c.name)


def upsert_schedule(model: type[JobMixin]) -> ReturningInsert[Any]:
    """Create runtime schedule ``:schedule_name``, or replace the runtime one of that name.

    Binds ``:schedule_kind``, ``:schedule_spec``, ``:schedule_definition`` (JSONB) and
    ``:following`` (its next tick). A replacement with the same ticks (``spec``) keeps
    the row's ``next_run_at``, so no tick is skipped or repeated; with other ticks it
    takes ``:following``. ``paused_at`` is kept. A row declared in code (``definition``
    NULL) is not replaced: nothing is returned then.
    """
    table = schedules_of(model)
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
    table = schedules_of(model)
    return delete(table).where(_named(table)).returning(table.c.name)


def pause_schedule(model: type[JobMixin]) -> Update:
    """Pause schedule ``:schedule_name``: workers take none of its ticks while it is paused.

    Returns the name when it was running (not paused already).
    """
    table = schedules_of(model)
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
    table = schedules_of(model)
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
    table = schedules_of(model)
    return (
        update(table)
        .where(_named(table))
        .values(
            last_run_at=func.now(),
            last_job_id=bindparam("job_id", type_=BigInteger),
            updated_at=func.now(),
        )
    )


@functools.lru_cache(maxsize=16)
def _names_text(names: tuple[str, ...]) -> str:
    """The due read's ``:names``: made once per set of schedules, not at every round."""
    return ticks.text_array(names)


def _stored(row: Row[Any]) -> ScheduleRow:
    """`row` (of any of the schedules' reads) as a `ScheduleRow`; a column not read is None."""
    columns = row._mapping
    return ScheduleRow(
        name=columns["name"],
        kind=columns["kind"],
        spec=columns["spec"],
        next_run_at=columns["next_run_at"],
        definition=columns["definition"],
        now=columns["now"],
        paused_at=columns.get("paused_at"),
        last_run_at=columns.get("last_run_at"),
        last_job_id=columns.get("last_job_id"),
    )


class PostgresSchedules:
    """`ScheduleOps` on PostgreSQL for `model`'s schedules table; its statements built once.

    Stateless between calls, like `PostgresDriver`, which holds one and forwards to it.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self._due = ticks.due_schedules(model)
        self._read = ticks.read_schedules(model)
        self._insert = ticks.insert_schedules(model)
        self._respec = ticks.respec_schedule(model)
        self._advance = ticks.advance_schedule(model)
        self._record_job = ticks.record_schedule_job(model)
        self._lock = lock_schedule(model)
        self._upsert = upsert_schedule(model)
        self._delete = delete_schedule(model)
        self._pause = pause_schedule(model)
        self._resume = resume_schedule(model)
        self._record_run = record_schedule_run(model)
        self._list = list_schedules(model)

    def schedules_due(
        self, conn: Connection, names: Sequence[str], limit: int
    ) -> list[ScheduleRow]:
        """`ticks.due_schedules`: ``FOR UPDATE SKIP LOCKED``, through the partial due index."""
        params = {"names": _names_text(tuple(names)), "limit": limit}
        # Its columns are `ScheduleRow`'s first six, in order.
        return [ScheduleRow(*row) for row in conn.execute(self._due, params)]

    def schedules_read(self, conn: Connection, names: Sequence[str]) -> list[ScheduleRow]:
        """`ticks.read_schedules`: a primary-key lookup per name."""
        return [_stored(row) for row in conn.execute(self._read, {"names": list(names)})]

    def schedules_insert(self, conn: Connection, schedules: Sequence[ScheduleNew]) -> None:
        """`ticks.insert_schedules`: one INSERT ... ON CONFLICT DO NOTHING of them all."""
        if schedules:
            params = {
                "names": [s.name for s in schedules],
                "kinds": [s.kind for s in schedules],
                "specs": [s.spec for s in schedules],
                "next_run_ats": [s.next_run_at for s in schedules],
            }
            conn.execute(self._insert, params)

    def schedule_respec(self, conn: Connection, spec: ScheduleSpec) -> bool:
        """`ticks.respec_schedule`: the conditional UPDATE; True when it matched."""
        return conn.execute(self._respec, _spec_params(spec)).first() is not None

    def schedule_tick(self, conn: Connection, tick: ScheduleTick) -> bool:
        """`ticks.advance_schedule`: the conditional UPDATE that decides; True when won."""
        params = {
            "schedule_name": tick.name,
            "schedule_spec": tick.spec,
            "schedule_kind": tick.kind,
            "following": tick.following,
            "due": tick.due,
            "schedule_definition": tick.definition,
        }
        return conn.execute(self._advance, params).first() is not None

    def schedule_tick_record(self, conn: Connection, name: str, job_id: int) -> None:
        """`ticks.record_schedule_job`."""
        conn.execute(self._record_job, {"schedule_name": name, "job_id": job_id})

    def schedule_lock(self, conn: Connection, name: str) -> ScheduleRow | None:
        """`lock_schedule`: ``SELECT ... FOR UPDATE`` of the row."""
        row = conn.execute(self._lock, {"schedule_name": name}).first()
        return None if row is None else _stored(row)

    def schedule_upsert(self, conn: Connection, define: ScheduleDefine) -> bool:
        """`upsert_schedule`: INSERT ... ON CONFLICT DO UPDATE unless the row is code's."""
        params = {
            "schedule_name": define.name,
            "schedule_kind": define.kind,
            "schedule_spec": define.spec,
            "schedule_definition": define.definition,
            "following": define.following,
        }
        return conn.execute(self._upsert, params).first() is not None

    def schedule_delete(self, conn: Connection, name: str) -> bool:
        """`delete_schedule`."""
        return conn.execute(self._delete, {"schedule_name": name}).first() is not None

    def schedule_pause(self, conn: Connection, name: str) -> bool:
        """`pause_schedule`: sets ``paused_at`` while it is NULL."""
        return conn.execute(self._pause, {"schedule_name": name}).first() is not None

    def schedule_resume(self, conn: Connection, name: str, following: datetime) -> bool:
        """`resume_schedule`: clears ``paused_at`` while it is set."""
        params = {"schedule_name": name, "following": following}
        return conn.execute(self._resume, params).first() is not None

    def schedule_run_record(self, conn: Connection, name: str, job_id: int) -> None:
        """`record_schedule_run`."""
        conn.execute(self._record_run, {"schedule_name": name, "job_id": job_id})

    def schedules_list(self, conn: Connection) -> list[ScheduleRow]:
        """`list_schedules`."""
        return [_stored(row) for row in conn.execute(self._list)]


def _spec_params(spec: ScheduleSpec) -> dict[str, Any]:
    return {
        "schedule_name": spec.name,
        "schedule_spec": spec.spec,
        "schedule_kind": spec.kind,
        "following": spec.following,
    }
