"""`PostgresEnqueue`: the enqueue family (`EnqueueOps`) on PostgreSQL.

`PostgresDriver` holds one and forwards to it. Every operation runs in the caller's
`Session`, never commits, and flushes the session's pending objects first (as the ORM
does before a statement). Statements are built on first use, once per shape: making
a driver builds none. One job's INSERT goes to psycopg's cursor where nothing could
tell (`direct.Direct`). See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, inspect, select
from sqlalchemy.orm import Mapper, Session

from sa_jobqueue.core import sqlalchemy_private
from sa_jobqueue.driver.postgres import edges, inserts, keyed
from sa_jobqueue.driver.postgres.direct import Direct
from sa_jobqueue.driver.postgres.enqueue_params import array_params, json_rows, one_params
from sa_jobqueue.driver.protocol.enqueue import DebouncedJob, InsertShape, JobsInsert, NewJob
from sa_jobqueue.schema.columns import dumps
from sa_jobqueue.schema.model import JobMixin

__all__ = ["PostgresEnqueue"]

#: What a debounced job sets of its own: no run_at, delay or key (refused with debounce=).
_DEBOUNCED = InsertShape()

#: What `jobs_insert_ids` and `jobs_by_keys` with ``ids_only`` return of each job.
_ID_COLUMNS = ("id", "idempotency_key", "unique_key")


_raw_decode = json.JSONDecoder().raw_decode


def _decode_json(text: str) -> Any:
    """JSON text to a value, as ``json.loads`` (psycopg's loader) does.

    Without its checks for leading and trailing whitespace, which the server's JSON
    output never has.
    """
    return _raw_decode(text)[0]


class PostgresEnqueue:
    """`EnqueueOps` for one jobs model on PostgreSQL; its statements are built on first use.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model
        self._table: Any = model.__table__
        self._mapped: Mapper[Any] | None = None
        # Per shape, built on first use: one job's INSERT (and its cursor path); the
        # batched INSERTs, by form; the keyed lookups; the debounced upserts.
        self._ones: dict[InsertShape, tuple[Direct, int | None]] = {}
        self._manys: dict[tuple[tuple[str, ...], bool, tuple[str, ...]], Executable] = {}
        self._gathered: dict[tuple[bool, tuple[str, ...]], Executable] = {}
        self._loads: dict[tuple[tuple[str, ...], bool], Executable] = {}
        self._ids: dict[tuple[tuple[str, ...], bool], Executable] = {}
        self._id_jsons: dict[tuple[bool, bool], Executable] = {}
        self._lookups: dict[tuple[bool, bool], Executable] = {}
        self._debounces: dict[tuple[str, ...], Executable] = {}
        self._simple: dict[str, Executable] = {}

    def _mapper(self) -> Mapper[Any]:
        mapper = self._mapped
        if mapper is None:
            mapper = self._mapped = inspect(self.model)
        return mapper

    def _statement(self, name: str) -> Any:
        """One of the statements that have a single shape, built on first use."""
        statement = self._simple.get(name)
        if statement is None:
            builders = {
                "throttle_lock": keyed.throttle_lock,
                "throttled": keyed.throttled,
                "lock_upstream": edges.lock_upstream,
                "insert_edges": edges.insert_edges,
                "add_to_batch": edges.add_to_batch,
                "batch_members_among": edges.batch_members_among,
            }
            statement = self._simple[name] = builders[name](self.model)
        return statement

    def _execute(self, session: Session, statement: Any, params: Mapping[str, Any]) -> Any:
        """`statement` through `Session.execute` (flush first, execution events see it)."""
        return session.execute(statement, params, bind_arguments={"mapper": self._mapper()})

    # -- inserts -------------------------------------------------------------------

    def job_insert(
        self,
        session: Session,
        job: NewJob,
        shape: InsertShape,
        trace_context: Mapping[str, str] | None = None,
    ) -> Sequence[Any] | None:
        """`inserts.enqueue_one` of `shape`, on psycopg's cursor where nothing could tell.

        ``payload`` comes back as its text, decoded here by one call (the dialect's
        ``json_deserializer``): that costs less than psycopg's JSON loader.
        """
        one = self._ones.get(shape)
        if one is None:
            statement = inserts.enqueue_one(
                self.model,
                timing=shape.timing,
                keys=shape.keys,
                extra=shape.extra,
                returning=shape.returning,
                as_text=("payload",),
            )
            at = shape.returning.index("payload") if "payload" in shape.returning else None
            one = self._ones[shape] = (Direct(statement), at)
        direct, payload_at = one
        params = one_params(self._table, job, shape, trace_context)
        # As the ORM would before running a statement: the caller's pending objects
        # (the order a job's foreign key points to) go first.
        sqlalchemy_private.autoflush(session)
        bind = {"mapper": self._mapped or self._mapper(), "clause": direct.statement}
        connection = session.connection(bind_arguments=bind)
        row = direct.first(connection, params)
        if row is None or payload_at is None:
            return row  # type: ignore[no-any-return]
        decode = sqlalchemy_private.json_deserializer(connection.dialect) or _decode_json
        values = list(row)
        values[payload_at] = decode(values[payload_at])
        return values

    def jobs_insert(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> list[Sequence[Any]]:
        """`inserts.enqueue` (an array per column) returning `returning`, sorted by id."""
        extra, params = array_params(batch)
        key = (extra, batch.workflow, tuple(returning))
        statement = self._manys.get(key)
        if statement is None:
            columns = [self._table.c[name] for name in returning]
            insert = inserts.enqueue(self.model, extra=extra, workflow=batch.workflow)
            statement = self._manys[key] = insert.returning(*columns)
        sqlalchemy_private.autoflush(session)
        bind = {"mapper": self._mapper(), "clause": statement}
        connection = session.connection(bind_arguments=bind)
        id_at = list(returning).index("id")
        return sorted(connection.execute(statement, params), key=lambda row: row[id_at])

    def jobs_insert_gathered(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> tuple[list[Sequence[Any]], Any]:
        """`inserts.enqueue_json_arrays`: one JSON parameter in, one row of arrays out."""
        traced = bool(batch.trace_context)
        key = (traced, tuple(returning))
        statement = self._gathered.get(key)
        if statement is None:
            statement = inserts.enqueue_json_arrays(self.model, traced=traced, returning=returning)
            self._gathered[key] = statement
        params = {"rows": json_rows(batch.jobs)}
        if traced:
            params["trace_context"] = dumps(dict(batch.trace_context or {}))
        sqlalchemy_private.autoflush(session)
        bind = {"mapper": self._mapper(), "clause": statement}
        connection = session.connection(bind_arguments=bind)
        *arrays, now = connection.execute(statement, params).one()
        if arrays[0] is None:  # no job inserted: every key was taken
            return [], now
        # Column by column, each in one comprehension: no list per row, no second walk
        # over the rows (the rows are the arrays' tuples, as zip makes them).
        decode = sqlalchemy_private.json_deserializer(connection.dialect) or _decode_json
        if "payload" in returning:
            at = list(returning).index("payload")
            arrays[at] = [decode(text) for text in arrays[at]]
        if "run_at" in returning:
            at = list(returning).index("run_at")
            arrays[at] = [now if run_at is None else run_at for run_at in arrays[at]]
        return list(zip(*arrays, strict=True)), now

    def jobs_insert_loaded(self, session: Session, batch: JobsInsert) -> list[JobMixin]:
        """`inserts.enqueue` ``RETURNING`` the model, loaded by the ORM; sorted by id."""
        extra, params = array_params(batch)
        key = (extra, batch.workflow)
        load = self._loads.get(key)
        if load is None:
            insert = inserts.enqueue(self.model, extra=extra, workflow=batch.workflow)
            load = select(self.model).from_statement(insert.returning(self.model))
            self._loads[key] = load
        return sorted(session.scalars(load, params).all(), key=lambda job: job.id)

    def jobs_insert_ids(
        self, session: Session, batch: JobsInsert, *, keys: bool = True
    ) -> list[tuple[int, str | None, str | None]]:
        """`inserts.enqueue_json_ids` (or `enqueue` over arrays, with columns or workflow).

        Through `Session.execute`, so the session flushes first and its execution
        events see the statement, as an ORM load's would.
        """
        if not batch.columns and not batch.workflow:
            traced = bool(batch.trace_context)
            statement = self._id_jsons.get((traced, keys))
            if statement is None:
                statement = self._id_jsons[traced, keys] = inserts.enqueue_json_ids(
                    self.model, traced=traced, keys=keys
                )
            params: dict[str, Any] = {"rows": json_rows(batch.jobs)}
            if traced:
                params["trace_context"] = dumps(dict(batch.trace_context or {}))
            arrays = self._execute(session, statement, params).one()
            ids: list[int] | None = arrays[0]
            if ids is None:  # no job inserted: every key was taken
                return []
            # The arrays share one order, not the id order: sort here (they come
            # nearly sorted, which Python's sort does in one pass).
            if not keys:
                ids.sort()
                return [(id_, None, None) for id_ in ids]
            return sorted(zip(*arrays, strict=True))
        extra, params = array_params(batch)
        statement = self._ids.get((extra, batch.workflow))
        if statement is None:
            inserted = inserts.enqueue(self.model, extra=extra, workflow=batch.workflow)
            returned = inserted.returning(*(self._table.c[name] for name in _ID_COLUMNS))
            # Selected from, as a CTE: a Core statement the session runs as it is (an
            # ORM-enabled INSERT with parameters would be taken for a bulk insert).
            cte = returned.cte("inserted")
            statement = select(*(cte.c[name] for name in _ID_COLUMNS))
            self._ids[extra, batch.workflow] = statement
        return sorted(tuple(row) for row in self._execute(session, statement, params))

    def jobs_by_keys(
        self, session: Session, keys: Sequence[str], *, unique: bool = False, ids_only: bool = False
    ) -> Sequence[Any]:
        """`inserts.by_keys` or `inserts.by_unique_keys`: the model, or its id and keys."""
        lookup = self._lookups.get((unique, ids_only))
        if lookup is None:
            lookup = inserts.by_unique_keys(self.model) if unique else inserts.by_keys(self.model)
            if ids_only:
                lookup = lookup.with_only_columns(*(self._table.c[n] for n in _ID_COLUMNS))
            self._lookups[unique, ids_only] = lookup
        params = {"unique_keys" if unique else "keys": list(keys)}
        if ids_only:
            return [tuple(row) for row in self._execute(session, lookup, params)]
        return session.scalars(lookup, params).all()

    # -- debounce and throttle -----------------------------------------------------

    def job_debounce(self, session: Session, debounced: DebouncedJob) -> JobMixin | None:
        """`keyed.debounce`, loaded by the ORM with ``populate_existing`` (the folded job)."""
        job = debounced.job
        extra: dict[str, Any] = dict(job.columns)
        if debounced.trace_context:
            extra["trace_context"] = dict(debounced.trace_context)
        shape = tuple(sorted(extra))
        statement = self._debounces.get(shape)
        if statement is None:
            upsert = keyed.debounce(self.model, extra=shape)
            statement = self._debounces[shape] = select(self.model).from_statement(upsert)
        params = one_params(self._table, job, _DEBOUNCED, None)
        params["new_window"] = debounced.window
        params["new_debounce_key"] = debounced.key
        params["new_concurrency_key"] = job.concurrency_key
        if debounced.trace_context:
            params["new_trace_context"] = dumps(dict(debounced.trace_context))
        options = {"populate_existing": True}  # the folded job's new payload and run_at
        found: JobMixin | None = session.scalars(
            statement, params, execution_options=options
        ).one_or_none()
        return found

    def job_throttle(self, session: Session, key: str, window: float) -> JobMixin | None:
        """`keyed.throttle_lock`, then `keyed.throttled`: the key's job in the window."""
        self._execute(session, self._statement("throttle_lock"), {"throttle_key": key})
        params = {"throttle_key": key, "window": window}
        found: JobMixin | None = session.scalars(self._statement("throttled"), params).first()
        return found

    # -- workflows and batches -----------------------------------------------------

    def upstream_lock(self, session: Session, ids: Sequence[int]) -> dict[int, str]:
        """`edges.lock_upstream`: ``(id, status)`` of each job locked."""
        rows = self._execute(session, self._statement("lock_upstream"), {"upstream_ids": ids})
        return {int(row.id): str(row.status) for row in rows}

    def edges_insert(
        self, session: Session, job_ids: Sequence[int], upstream_ids: Sequence[int]
    ) -> None:
        """`edges.insert_edges` (nothing to send when there are none)."""
        if job_ids:
            params = {"job_ids": list(job_ids), "edge_upstream_ids": list(upstream_ids)}
            self._execute(session, self._statement("insert_edges"), params)

    def batch_add(self, session: Session, batch_id: int, added: int) -> bool:
        """`edges.add_to_batch`: whether the callback matched (had not started)."""
        params = {"batch_id": batch_id, "added": added}
        return self._execute(session, self._statement("add_to_batch"), params).first() is not None

    def batch_members(self, session: Session, batch_id: int, ids: Sequence[int]) -> set[int]:
        """`edges.batch_members_among`: those of `ids` already members of `batch_id`."""
        params = {"batch_id": batch_id, "member_ids": sorted(ids)}
        statement = self._statement("batch_members_among")
        return set(self._execute(session, statement, params).scalars())
