"""The batched INSERT of enqueue: many jobs as one statement, one round trip.

`ManyInserter` runs it for one model in the caller's session, never commits, inserts keyed
jobs in key order, and returns the job that holds a key already taken; `Inserter` adds the
one-row statement on top of it, and sends a batch without the application's own columns
as one JSON parameter (`json_rows`). See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timezone
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy import JSON, Insert, inspect, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.selectable import ExecutableReturnsRows

from sa_jobqueue import statements
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import JobQueueError, ValidationError
from sa_jobqueue.schema.columns import dumps
from sa_jobqueue.schema.model import JobMixin

__all__ = ["Inserted", "ManyInserter"]

JobT = TypeVar("JobT", bound=JobMixin)

#: A str as JSON text (keys are checked valid Unicode without NUL, see `validation`).
_dumps_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class Inserted(NamedTuple):
    """What ``ids_only`` inserts return for one job: its id and its keys, no mapped object."""

    id: int
    idempotency_key: str | None
    unique_key: str | None


def _lock_order(specs: Sequence[JobSpec]) -> list[int]:
    """Positions of `specs` in insertion order: keyed specs sorted by key, in their slots."""
    keyed = [i for i, spec in enumerate(specs) if _keys(spec) != ("", "")]
    order = list(range(len(specs)))
    # A stable sort: of two specs with one key, the first given is inserted.
    by_key = sorted(keyed, key=lambda i: _keys(specs[i]))
    for slot, index in zip(keyed, by_key, strict=True):
        order[slot] = index
    return order


def _keys(spec: JobSpec) -> tuple[str, str]:
    return (spec.idempotency_key or "", spec.unique_key or "")


def json_rows(specs: Sequence[JobSpec]) -> str:
    """The ``:rows`` parameter of `statements.enqueue_json` for `specs`: a JSON array.

    Each job's payload is already JSON text (`prepare`), so it is written in as it
    is; kinds and queues are encoded once per distinct value; fields a job leaves at
    their default (no run_at, no delay, no key) are left out (NULL in the statement).
    ``run_at`` goes in UTC with its offset, so the server reads the same instant
    whatever the session's time zone.

    >>> from sa_jobqueue.enqueue.prepare import JobSpec
    >>> json_rows([JobSpec("noop", "default", '{"n":1}', 0, 20, None, 0.0, None)])
    '[{"kind":"noop","queue":"default","payload":{"n":1},"priority":0,"max_attempts":20}]'
    """
    names: dict[str, str] = {}
    rows = []
    for spec in specs:
        kind = names.get(spec.kind)
        if kind is None:
            kind = names[spec.kind] = _dumps_text(spec.kind)
        queue = names.get(spec.queue)
        if queue is None:
            queue = names[spec.queue] = _dumps_text(spec.queue)
        row = (
            f'{{"kind":{kind},"queue":{queue},"payload":{spec.payload},'
            f'"priority":{spec.priority},"max_attempts":{spec.max_attempts}'
        )
        if spec.run_at is not None:
            row += f',"run_at":"{spec.run_at.astimezone(timezone.utc).isoformat()}"'
        elif spec.delay:
            row += f',"delay":{spec.delay!r}'
        if spec.idempotency_key is not None:
            row += f',"idempotency_key":{_dumps_text(spec.idempotency_key)}'
        if spec.unique_key is not None:
            row += f',"unique_key":{_dumps_text(spec.unique_key)}'
        if spec.concurrency_key is not None:
            row += f',"concurrency_key":{_dumps_text(spec.concurrency_key)}'
        rows.append(row + "}")
    return f"[{','.join(rows)}]"


class ManyInserter(Generic[JobT]):
    """Runs the batched INSERT for one model; statements are built once."""

    #: How often a unique key is retried when its active job finished between the
    #: INSERT that conflicted with it and the SELECT that looked for it.
    UNIQUE_RETRIES = 3

    def __init__(self, model: type[JobT]) -> None:
        self.model = model
        # One statement per set of extra columns given (and workflow or not), built on first use.
        self._loads: dict[tuple[tuple[str, ...], bool], ExecutableReturnsRows] = {}
        self._by_keys = statements.by_keys(model)
        self._by_unique_keys = statements.by_unique_keys(model)
        # The same lookups for ``ids_only``: the id and keys, not the mapped row.
        keys_only = (model.id, model.idempotency_key, model.unique_key)
        self._ids_by_keys = self._by_keys.with_only_columns(*keys_only)
        self._ids_by_unique_keys = self._by_unique_keys.with_only_columns(*keys_only)
        # The statements of ``ids_only`` inserts: per extra columns and workflow or not;
        # over one JSON parameter, traced or not.
        self._id_loads: dict[tuple[tuple[str, ...], bool], Any] = {}
        self._id_jsons: dict[bool, Any] = {}

    def _load(self, extra: tuple[str, ...], workflow: bool = False) -> ExecutableReturnsRows:
        load = self._loads.get((extra, workflow))
        if load is None:
            insert: Insert = statements.enqueue(
                self.model, extra=extra, workflow=workflow
            ).returning(self.model)
            load = select(self.model).from_statement(insert)
            self._loads[extra, workflow] = load
        return load

    def insert(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        *,
        trace_context: Mapping[str, str] | None = None,
        fresh: set[int] | None = None,
        ids_only: bool = False,
    ) -> list[Any]:
        """Insert `specs` in `session`'s transaction; return one row per spec, in order.

        A spec whose idempotency key already exists (committed, or inserted by a
        concurrent transaction that then commits) gets the existing row back,
        unchanged; so does a spec whose unique key an active (``pending`` or
        ``running``) job holds. A conflict never raises: the caller's transaction
        stays usable. One round trip, plus one more when some keys were taken.
        Every new row gets `trace_context` (the enqueue span's W3C context), if any.
        The ids of the rows this call inserted (not those found by a key) are added to
        `fresh`, when given: a workflow adds edges for those only. With `ids_only`, each
        row is an `Inserted` (id and keys) and nothing is added to `session`'s identity
        map: no mapped object is built, which is most of a large batch's Python cost.
        """
        if not specs:
            return []
        self._own_columns(specs)  # a bad mix of columns fails before any SQL
        # Insert keyed rows in key order (in the keyed rows' own slots, so rows without
        # a key keep their place): ON CONFLICT waits on a concurrent transaction's
        # uncommitted key, and two batches taking the same keys in different orders
        # would otherwise deadlock, aborting one caller's transaction.
        order = _lock_order(specs)

        def insert_once(session: Session, batch: Sequence[JobSpec]) -> list[Any]:
            return self._insert_once(session, batch, trace_context, fresh, ids_only)

        if order != sorted(order):
            rows = self._insert_in_order(session, [specs[i] for i in order], insert_once)
            result: list[Any] = [None] * len(specs)
            for position, index in enumerate(order):
                result[index] = rows[position]
            return result
        return self._insert_in_order(session, specs, insert_once)

    def _own_columns(self, specs: Sequence[JobSpec]) -> dict[str, list[Any]]:
        """One array per column of the application's own that some spec sets, by name.

        A column given for some jobs of a batch only is NULL for the others, which
        needs it nullable and without a default (else one job would silently miss
        the default): otherwise it is a `ValidationError`, before any SQL.
        """
        table = self.model.__table__
        names = sorted({name for spec in specs for name, _ in spec.columns})
        given = [dict(spec.columns) for spec in specs]
        arrays: dict[str, list[Any]] = {}
        for name in names:
            column = table.c[name]
            values: list[Any] = []
            for index, columns in enumerate(given):
                if name not in columns:
                    if not column.nullable or column.default or column.server_default:
                        raise ValidationError(
                            f"items[{index}]",
                            "columns",
                            f"sets no {name!r}, which other items set; the column has a "
                            "default or is NOT NULL: give it in every item or in none",
                        )
                    values.append(None)
                else:
                    value = columns[name]
                    json_column = isinstance(column.type, JSON) and value is not None
                    values.append(dumps(value) if json_column else value)
            arrays[name] = values
        return arrays

    def _insert_in_order(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        insert_once: Callable[[Session, Sequence[JobSpec]], list[Any]],
    ) -> list[Any]:
        """Run `insert_once` until every spec has its row (a finished unique job: again)."""
        result: list[Any] = [None] * len(specs)
        todo = list(range(len(specs)))
        for _ in range(1 + self.UNIQUE_RETRIES):
            batch = [specs[i] for i in todo]
            found = insert_once(session, batch)
            retry = []
            for index, job in zip(todo, found, strict=True):
                if job is None:
                    retry.append(index)
                else:
                    result[index] = job
            if not retry:
                return result
            todo = retry
        key = specs[todo[0]].unique_key
        raise JobQueueError(
            f"unique key {key!r} conflicted {1 + self.UNIQUE_RETRIES} times, but its active "
            "job finished each time before it could be read; enqueue again"
        )

    def _insert_once(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        trace_context: Mapping[str, str] | None,
        fresh: set[int] | None = None,
        ids_only: bool = False,
    ) -> list[Any]:
        workflow = any(s.workflow for s in specs)
        columns = self._own_columns(specs)
        if ids_only:
            inserted = self._id_rows(session, specs, columns, workflow, trace_context)
        else:
            inserted = self._rows(session, specs, columns, workflow, trace_context)
        if fresh is not None:
            fresh.update(job.id for job in inserted)
        if len(inserted) == len(specs):
            return inserted
        return self._match(session, specs, inserted, ids_only)

    def _array_params(
        self,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """`statements.enqueue`'s extra columns and its parameters: one array per column."""
        params: dict[str, Any] = {
            "kinds": [s.kind for s in specs],
            "queues": [s.queue for s in specs],
            "payloads": [s.payload for s in specs],
            "priorities": [s.priority for s in specs],
            "max_attempts_list": [s.max_attempts for s in specs],
            "run_ats": [s.run_at for s in specs],
            "delays": [s.delay for s in specs],
            "keys": [s.idempotency_key for s in specs],
            "unique_keys": [s.unique_key for s in specs],
            "concurrency_keys": [s.concurrency_key for s in specs],
        }
        if workflow:
            params.update(
                statuses=[s.status for s in specs],
                waiting_fors=[s.waiting_for for s in specs],
                after_failures=[s.after_failure if s.after else None for s in specs],
                has_dependents_list=[s.has_dependents for s in specs],
                last_errors=[s.last_error for s in specs],
            )
        extra = tuple(columns)
        for name, values in columns.items():
            params[f"{name}_values"] = values
        if trace_context:
            extra += ("trace_context",)
            params["trace_context_values"] = [dumps(dict(trace_context))] * len(specs)
        return extra, params

    def _rows(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> list[Any]:
        """Run the batched INSERT; the rows it inserted, loaded, in id order.

        `columns` are the application's own columns some spec sets (`_own_columns`).
        """
        extra, params = self._array_params(specs, columns, workflow, trace_context)
        load = self._load(extra, workflow)
        return sorted(session.scalars(load, params).all(), key=lambda job: job.id)

    def _id_rows(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> list[Inserted]:
        """`_rows` for ``ids_only``: the id and keys of each row inserted, in id order.

        Without the application's own columns or workflow columns, the batch travels
        as one JSON parameter and comes back as one row of arrays; otherwise as
        `statements.enqueue`'s arrays, a row per job. Through `Session.execute`, so the
        session flushes first and its execution events see the statement, as an ORM
        load's would.
        """
        bind = {"mapper": inspect(self.model)}
        if not columns and not workflow:
            traced = bool(trace_context)
            statement = self._id_jsons.get(traced)
            if statement is None:
                statement = self._id_jsons[traced] = statements.enqueue_json_arrays(
                    self.model, traced=traced, returning=Inserted._fields
                )
            params: dict[str, Any] = {"rows": json_rows(specs)}
            if traced:
                params["trace_context"] = dumps(dict(trace_context or {}))
            ids, keys, unique_keys, _now = session.execute(
                statement, params, bind_arguments=bind
            ).one()
            if ids is None:  # no job inserted: every key was taken
                return []
            return [Inserted(*row) for row in zip(ids, keys, unique_keys, strict=True)]
        extra, params = self._array_params(specs, columns, workflow, trace_context)
        statement = self._id_loads.get((extra, workflow))
        if statement is None:
            table = self.model.__table__
            inserted = statements.enqueue(self.model, extra=extra, workflow=workflow).returning(
                *(table.c[name] for name in Inserted._fields)
            )
            # Selected from, as a CTE: a Core statement the session runs as it is (an
            # ORM-enabled INSERT with parameters would be taken for a bulk insert).
            cte = inserted.cte("inserted")
            statement = select(*(cte.c[name] for name in Inserted._fields))
            self._id_loads[extra, workflow] = statement
        rows = session.execute(statement, params, bind_arguments=bind)
        return sorted((Inserted(*row) for row in rows), key=lambda row: row.id)

    def _match(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        inserted: list[Any],
        ids_only: bool = False,
    ) -> list[Any]:
        """One row per spec: the row it inserted, or the row whose key it conflicted with.

        None for a spec whose unique key conflicted with a job that has finished
        since (the caller inserts it again). With `ids_only`, the rows found by a key
        are `Inserted` too.
        """
        # Rows come back in id order, which is the batch's order. A spec conflicts
        # with a row inserted before (or earlier in this batch), and then so would
        # any later spec with the same keys: so the next inserted row belongs to
        # the next spec whose keys it carries.
        rows = list(inserted)
        position = 0
        own: list[Any] = []
        for spec in specs:
            row = rows[position] if position < len(rows) else None
            if row is not None and (row.idempotency_key, row.unique_key) == (
                spec.idempotency_key,
                spec.unique_key,
            ):
                own.append(row)
                position += 1
            else:
                own.append(None)
        by_key: dict[str, Any] = {}
        by_unique: dict[str, Any] = {}
        for row in inserted:
            if row.idempotency_key is not None:
                by_key[row.idempotency_key] = row
            if row.unique_key is not None:
                by_unique[row.unique_key] = row
        wanted = sorted(
            {
                s.idempotency_key
                for s, o in zip(specs, own, strict=True)
                if o is None and s.idempotency_key is not None
            }
            - set(by_key)
        )
        if wanted:
            for job in self._found(session, self._by_keys, self._ids_by_keys, ids_only, wanted):
                by_key[job.idempotency_key] = job
        wanted_unique = sorted(
            {
                s.unique_key
                for s, o in zip(specs, own, strict=True)
                if o is None and s.unique_key is not None
            }
            - set(by_unique)
        )
        if wanted_unique:
            lookups = self._by_unique_keys, self._ids_by_unique_keys
            for job in self._found(session, *lookups, ids_only, wanted_unique, "unique_keys"):
                by_unique[job.unique_key] = job
        result: list[Any] = []
        for spec, row in zip(specs, own, strict=True):
            if row is None and spec.idempotency_key is not None:
                row = by_key.get(spec.idempotency_key)
            if row is None and spec.unique_key is not None:
                row = by_unique.get(spec.unique_key)
                if row is None:
                    result.append(None)  # its active job finished meanwhile: insert again
                    continue
            if row is None:
                # The row that held the key was deleted between our INSERT and SELECT.
                raise JobQueueError(
                    f"idempotency key {spec.idempotency_key!r} conflicted, but its row "
                    "vanished; enqueue again"
                )
            result.append(row)
        return result

    @staticmethod
    def _found(
        session: Session,
        rows: Any,
        ids: Any,
        ids_only: bool,
        keys: list[str],
        name: str = "keys",
    ) -> Sequence[Any]:
        """The jobs holding `keys`: mapped rows, or `Inserted` for ``ids_only``."""
        if ids_only:
            return [Inserted(*row) for row in session.execute(ids, {name: keys})]
        return session.scalars(rows, {name: keys}).all()
