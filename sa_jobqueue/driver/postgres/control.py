"""`PostgresControl`: the control family of `PostgresDriver`, and the statements it runs.

The worker registry's writes (`register_worker` also heartbeats, `live_worker_elsewhere`,
`deregister_worker`, `expire_workers`), pausing (`pause`, `resume`, `paused_queues`),
pruning (`sa_jobqueue.statements.prune`, which the operators' dry run shares) and the
clock. The registry's operator reads stay in `sa_jobqueue.statements.registry`, and
`is_paused`, which every claim filters on, in `sa_jobqueue.statements.control`. See
docs/workers-registry.md and docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Delete,
    Float,
    Integer,
    Select,
    Table,
    Text,
    bindparam,
    delete,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql.dml import Insert
from sqlalchemy.sql.dml import ReturningDelete, ReturningInsert

from sa_jobqueue import statements
from sa_jobqueue.driver.protocol.control import WorkerElsewhere, WorkerInfo
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.registry_tables import workers_table_for
from sa_jobqueue.schema.state_tables import paused_table_for
from sa_jobqueue.statements.common import seconds

__all__ = [
    "PostgresControl",
    "deregister_worker",
    "expire_workers",
    "live_worker_elsewhere",
    "pause",
    "paused_queues",
    "register_worker",
    "resume",
]


def _table(model: type[JobMixin]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return table


def workers_of(model: type[JobMixin]) -> Table:
    """The worker registry's table beside `model`'s jobs table."""
    return workers_table_for(_table(model))


def paused_of(model: type[JobMixin]) -> Table:
    """The paused-queues table beside `model`'s jobs table."""
    return paused_table_for(_table(model))


# -- the worker registry --


def register_worker(model: type[JobMixin]) -> Insert:
    """Insert or heartbeat the row of ``:worker_id``; live until ``now() + :gone_after`` s.

    Parameters: ``worker_id``, ``host``, ``pid``, ``version``, ``queues``, ``kinds``
    (lists of names), ``concurrency``, ``gone_after`` (seconds). An existing row keeps
    its ``started_at`` and takes the rest.
    """
    workers = workers_of(model)
    expires = func.now() + seconds(bindparam("gone_after", type_=Float))
    row = insert(workers).values(
        id=bindparam("worker_id", type_=Text),
        host=bindparam("host", type_=Text),
        pid=bindparam("pid", type_=Integer),
        version=bindparam("version", type_=Text),
        queues=bindparam("queues", type_=ARRAY(Text)),
        kinds=bindparam("kinds", type_=ARRAY(Text)),
        concurrency=bindparam("concurrency", type_=Integer),
        expires_at=expires,
    )
    fresh = row.excluded
    return row.on_conflict_do_update(
        index_elements=[workers.c.id],
        set_={
            "host": fresh.host,
            "pid": fresh.pid,
            "version": fresh.version,
            "queues": fresh.queues,
            "kinds": fresh.kinds,
            "concurrency": fresh.concurrency,
            "heartbeat_at": func.now(),
            "expires_at": fresh.expires_at,
        },
    )


def live_worker_elsewhere(model: type[JobMixin]) -> Select[Any]:
    """The live row of ``:worker_id`` if another process holds it: ``host, pid, age``.

    Another process is another ``(host, pid)`` than ``:host``, ``:pid``; ``age`` is
    the seconds since its heartbeat. Read once when a worker starts (`Registration`).
    """
    workers = workers_of(model)
    since = func.extract("epoch", func.now() - workers.c.heartbeat_at)
    return select(workers.c.host, workers.c.pid, since.cast(Float).label("age")).where(
        workers.c.id == bindparam("worker_id", type_=Text),
        workers.c.expires_at >= func.now(),
        (workers.c.host != bindparam("host", type_=Text))
        | (workers.c.pid != bindparam("pid", type_=Integer)),
    )


def deregister_worker(model: type[JobMixin]) -> Delete:
    """Delete the row of ``:worker_id`` (a clean stop)."""
    workers = workers_of(model)
    return delete(workers).where(workers.c.id == bindparam("worker_id", type_=Text))


def expire_workers(model: type[JobMixin]) -> ReturningDelete[Any]:
    """Delete the rows whose ``expires_at`` passed; returns each one's ``id``.

    Only the rows: the jobs such a worker holds keep their leases (the sweeper
    recovers them once the lease ends; docs/workers-registry.md says why).
    """
    workers = workers_of(model)
    return delete(workers).where(workers.c.expires_at < func.now()).returning(workers.c.id)


# -- paused queues --


def pause(model: type[JobMixin]) -> ReturningInsert[Any]:
    """Pause the queues in ``:queues`` (an array); return those not paused before."""
    paused = paused_of(model)
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
    paused = paused_of(model)
    return (
        paused.delete()
        .where(paused.c.queue == func.any(bindparam("queues", type_=ARRAY(Text))))
        .returning(paused.c.queue)
    )


def paused_queues(model: type[JobMixin]) -> Select[Any]:
    """``(queue, paused_at)`` of every paused queue, by name."""
    paused = paused_of(model)
    return select(paused.c.queue, paused.c.paused_at).order_by(paused.c.queue)


class PostgresControl:
    """`ControlOps` on PostgreSQL for `model`'s tables; its statements built once.

    Stateless between calls, like `PostgresDriver`, which holds one and forwards to it.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model
        self._register = register_worker(model)
        self._elsewhere = live_worker_elsewhere(model)
        self._deregister = deregister_worker(model)
        self._expire = expire_workers(model)
        self._pause = pause(model)
        self._resume = resume(model)
        self._paused = paused_queues(model)
        self._now = statements.db_now()
        self._prune: dict[str, ReturningDelete[Any]] = {}

    def worker_register(self, conn: Connection, worker: WorkerInfo) -> None:
        """`register_worker`: one INSERT ... ON CONFLICT DO UPDATE."""
        conn.execute(self._register, _worker_params(worker))

    def worker_elsewhere(self, conn: Connection, worker: WorkerInfo) -> WorkerElsewhere | None:
        """`live_worker_elsewhere`."""
        params = {"worker_id": worker.worker_id, "host": worker.host, "pid": worker.pid}
        row = conn.execute(self._elsewhere, params).first()
        return None if row is None else WorkerElsewhere(row.host, row.pid, row.age)

    def worker_deregister(self, conn: Connection, worker_id: str) -> None:
        """`deregister_worker`."""
        conn.execute(self._deregister, {"worker_id": worker_id})

    def workers_expire(self, conn: Connection) -> list[str]:
        """`expire_workers`: one DELETE ... RETURNING."""
        return [str(worker_id) for worker_id in conn.scalars(self._expire)]

    def queue_pause(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """`pause`: one INSERT ... ON CONFLICT DO NOTHING ... RETURNING."""
        if not queues:
            return []
        return sorted(conn.scalars(self._pause, {"queues": list(queues)}))

    def queue_resume(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """`resume`: one DELETE ... RETURNING."""
        if not queues:
            return []
        return sorted(conn.scalars(self._resume, {"queues": list(queues)}))

    def queues_paused(self, conn: Connection) -> dict[str, datetime]:
        """`paused_queues`."""
        return {row.queue: row.paused_at for row in conn.execute(self._paused)}

    def jobs_prune(self, conn: Connection, status: str, before: datetime, limit: int) -> int:
        """`statements.prune` for `status` (built once per status): DELETE ... RETURNING."""
        delete_ = self._prune.get(status)
        if delete_ is None:
            delete_ = self._prune[status] = statements.prune(self.model, statuses=[status])
        return len(conn.execute(delete_, {"before": before, "limit": limit}).all())

    def clock_now(self, conn: Connection) -> datetime:
        """`statements.db_now`: ``SELECT now()``."""
        now: datetime = conn.execute(self._now).scalar_one()
        return now


def _worker_params(worker: WorkerInfo) -> dict[str, Any]:
    return {
        "worker_id": worker.worker_id,
        "host": worker.host,
        "pid": worker.pid,
        "version": worker.version,
        "queues": list(worker.queues),
        "kinds": list(worker.kinds),
        "concurrency": worker.concurrency,
        "gone_after": worker.gone_after,
    }
