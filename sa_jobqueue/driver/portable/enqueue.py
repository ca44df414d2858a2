"""`PortableEnqueue`: the driver protocol's enqueue operations in portable statements.

Each runs in the caller's `Session` (its connection, its transaction), flushes the
session's pending objects first, as the ORM does before a statement, and never
commits. Jobs go in through `enqueue_rows.RowInserter` (multi-row INSERTs; a taken
key leaves its job out, the transaction usable); debounce and throttle are in
`enqueue_keyed`, the workflow side (upstream locks, edges, batches) in
`enqueue_edges`. See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, inspect, select
from sqlalchemy.orm import Mapper, Session

from sa_jobqueue.core import sqlalchemy_private
from sa_jobqueue.driver.portable import enqueue_edges, enqueue_keyed
from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.enqueue_rows import (
    RowInserter,
    batch_params,
    job_params,
    job_values,
    own_json,
)
from sa_jobqueue.driver.protocol.enqueue import DebouncedJob, InsertShape, JobsInsert, NewJob
from sa_jobqueue.schema.columns import dumps
from sa_jobqueue.schema.model import JobMixin

__all__ = ["PortableEnqueue"]

#: What `jobs_insert_ids` and `jobs_by_keys` with ``ids_only`` return of each job.
_ID_COLUMNS = ("id", "idempotency_key", "unique_key")


class PortableEnqueue(PortableBase):
    """EnqueueOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    _enqueue_rows: RowInserter | None = None

    # -- the session's connection ----------------------------------------------------

    def _enqueue_mapper(self) -> Mapper[Any]:
        mapper: Mapper[Any] = inspect(self.model)
        return mapper

    def _enqueue_connection(self, session: Session) -> Connection:
        """`session`'s connection for the jobs model, its pending objects flushed first."""
        sqlalchemy_private.autoflush(session)
        return session.connection(bind_arguments={"mapper": self._enqueue_mapper()})

    def _inserter(self) -> RowInserter:
        inserter = self._enqueue_rows
        if inserter is None:
            inserter = self._enqueue_rows = RowInserter(self.model.__table__, self.sql)
        return inserter

    def _insert_batch(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> tuple[list[Sequence[Any]], Any]:
        """Insert `batch`; the new rows of `returning` by id (taken keys missing), and now."""
        table = self.model.__table__
        jobs, columns = batch.jobs, batch.columns
        trace = dumps(dict(batch.trace_context)) if batch.trace_context else None

        def rows_of(now: Any, start: int, stop: int) -> list[dict[str, Any]]:
            rows = []
            for index in range(start, stop):
                own = {name: values[index] for name, values in columns.items()}
                if trace is not None:
                    own["trace_context"] = trace
                rows.append(
                    job_values(
                        table, self.sql, jobs[index], now, columns=own, workflow=batch.workflow
                    )
                )
            return rows

        conn = self._enqueue_connection(session)
        params = batch_params(table, batch) if conn.dialect.insert_returning else None
        return self._inserter().insert(conn, len(jobs), rows_of, returning, params)

    # -- inserts -------------------------------------------------------------------

    def job_insert(
        self,
        session: Session,
        job: NewJob,
        shape: InsertShape,
        trace_context: Mapping[str, str] | None = None,
    ) -> Sequence[Any] | None:
        """Insert `job` (see `EnqueueOps.job_insert`): one INSERT (on MySQL 8 and a SELECT)."""
        table = self.model.__table__
        own = own_json(table, job, trace_context)

        def rows_of(now: Any, start: int, stop: int) -> list[dict[str, Any]]:
            values = job_values(
                table, self.sql, job, now, timing=shape.timing, keys=shape.keys, columns=own
            )
            return [values]

        conn = self._enqueue_connection(session)
        params = None
        if conn.dialect.insert_returning:  # a statement kept per shape, its row returned
            params = [job_params(table, job, shape.timing, shape.keys, own)]
        rows, _ = self._inserter().insert(conn, 1, rows_of, shape.returning, params)
        return rows[0] if rows else None

    def jobs_insert(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> list[Sequence[Any]]:
        """Insert `batch` (see `EnqueueOps.jobs_insert`); the new rows by id."""
        return self._insert_batch(session, batch, returning)[0]

    def jobs_insert_gathered(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> tuple[list[Sequence[Any]], Any]:
        """`jobs_insert`, and the ``now()`` every new row holds (``created_at``...)."""
        return self._insert_batch(session, batch, returning)

    def jobs_insert_loaded(self, session: Session, batch: JobsInsert) -> list[JobMixin]:
        """`jobs_insert`, then the new rows loaded by the ORM, by id."""
        rows, _ = self._insert_batch(session, batch, ["id"])
        if not rows:
            return []
        model = self.model
        query = select(model).where(model.id.in_([row[0] for row in rows])).order_by(model.id)
        return list(session.scalars(query).all())

    def jobs_insert_ids(
        self, session: Session, batch: JobsInsert, *, keys: bool = True
    ) -> list[tuple[int, str | None, str | None]]:
        """`jobs_insert` returning ``(id, idempotency_key, unique_key)`` per new job, by id."""
        rows, _ = self._insert_batch(session, batch, _ID_COLUMNS if keys else ("id",))
        if not keys:
            return [(int(row[0]), None, None) for row in rows]
        return [(int(row[0]), row[1], row[2]) for row in rows]

    def jobs_by_keys(
        self, session: Session, keys: Sequence[str], *, unique: bool = False, ids_only: bool = False
    ) -> Sequence[Any]:
        """The jobs holding `keys` (see `EnqueueOps.jobs_by_keys`), read as last committed.

        A share-locking read (`Dialect.for_share`): under MySQL's REPEATABLE READ a
        plain read sees the transaction's snapshot, which misses the job of a
        concurrent transaction whose committed key just made this one's INSERT fail;
        the duplicate left a share lock on that row already, which an exclusive lock
        of several such callers would deadlock on.
        """
        model = self.model
        table: Any = model.__table__
        if unique:
            held = self.sql.active_key_in(table, "unique_key", list(keys))
        else:
            held = model.idempotency_key.in_(list(keys))
        if ids_only:
            query = self.sql.for_share(select(*(table.c[n] for n in _ID_COLUMNS)).where(held))
            conn = self._enqueue_connection(session)
            return [tuple(row) for row in conn.execute(query)]
        return session.scalars(self.sql.for_share(select(model).where(held))).all()

    # -- debounce and throttle -----------------------------------------------------

    def job_debounce(self, session: Session, debounced: DebouncedJob) -> JobMixin | None:
        """Insert a debounced job or fold it into its key's pending job (`enqueue_keyed`)."""
        conn = self._enqueue_connection(session)
        return enqueue_keyed.debounce(session, conn, self.model, self.sql, debounced)

    def job_throttle(self, session: Session, key: str, window: float) -> JobMixin | None:
        """The latest job of throttle `key` due within `window` s, in turns (`enqueue_keyed`)."""
        conn = self._enqueue_connection(session)
        return enqueue_keyed.throttled(session, conn, self.model, self.sql, key, window)

    # -- workflows and batches -----------------------------------------------------

    def upstream_lock(self, session: Session, ids: Sequence[int]) -> dict[int, str]:
        """Lock the jobs `ids` in id order, mark them ``has_dependents``; their statuses."""
        conn = self._enqueue_connection(session)
        return enqueue_edges.lock_upstream(conn, self.model, self.sql, ids)

    def edges_insert(
        self, session: Session, job_ids: Sequence[int], upstream_ids: Sequence[int]
    ) -> None:
        """Insert the edges ``(job_ids[i] waits for upstream_ids[i])``."""
        if job_ids:
            conn = self._enqueue_connection(session)
            enqueue_edges.insert_edges(conn, self.model, job_ids, upstream_ids)

    def batch_add(self, session: Session, batch_id: int, added: int) -> bool:
        """Make batch callback `batch_id` wait for `added` more jobs; False if it started."""
        conn = self._enqueue_connection(session)
        return enqueue_edges.add_to_batch(conn, self.model, self.sql, batch_id, added)

    def batch_members(self, session: Session, batch_id: int, ids: Sequence[int]) -> set[int]:
        """Of the jobs `ids`, those batch `batch_id` waits for already."""
        conn = self._enqueue_connection(session)
        return enqueue_edges.members_among(conn, self.model, batch_id, ids)
