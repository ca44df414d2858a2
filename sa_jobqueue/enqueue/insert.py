"""The INSERTs of enqueue: one job as one short statement, many as one batched statement.

`Inserter` runs them for one model in the caller's session, never commits, and returns the
jobs as mapped instances; keys already taken return the job that holds them.
See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import JSON, Insert, Row, inspect, select
from sqlalchemy.orm import Mapper, Session, make_transient_to_detached, scoped_session
from sqlalchemy.orm.attributes import instance_dict
from sqlalchemy.sql.dml import ReturningInsert
from sqlalchemy.sql.selectable import ExecutableReturnsRows

from sa_jobqueue import statements
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import JobQueueError, ValidationError
from sa_jobqueue.schema.columns import dumps
from sa_jobqueue.schema.model import JobMixin, Status

__all__ = ["Inserter"]

JobT = TypeVar("JobT", bound=JobMixin)


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


#: The columns a new job leaves NULL: one enqueue knows them without asking.
_NULL_COLUMNS = (
    "locked_until",
    "locked_by",
    "last_error",
    "finished_at",
    "result",
    "trace_context",
    "waiting_for",
    "after_failure",
    "has_dependents",
    "debounce_key",
    "throttle_key",
)
#: The columns one enqueue sets from its `JobSpec` (and the constants beside them).
_SET_COLUMNS = (
    "kind",
    "queue",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "idempotency_key",
    "unique_key",
    "concurrency_key",
)


@dataclass(frozen=True)
class _One:
    """The INSERT of one job with a given set of extra columns, and what it returns."""

    statement: ReturningInsert[Any]
    #: The attribute each RETURNING column fills, in order.
    returned: tuple[str, ...]


def _plain_session(session: Session) -> bool:
    """Whether `session` may take a built row: nothing listening would tell it from a load.

    Inside a flush (a mapper event enqueueing "when an order is inserted"),
    ``Session.add()`` is not supported, while a load is: the ORM loads it there.
    """
    return not (
        session._flushing
        or session.dispatch.do_orm_execute
        or session.dispatch.loaded_as_persistent
    )


class Inserter(Generic[JobT]):
    """Runs the batched INSERT for one model; statements are built once."""

    #: How often a unique key is retried when its active job finished between the
    #: INSERT that conflicted with it and the SELECT that looked for it.
    UNIQUE_RETRIES = 3

    def __init__(self, model: type[JobT]) -> None:
        self.model = model
        # One statement per set of extra columns given (and workflow or not), built on first use.
        self._loads: dict[tuple[tuple[str, ...], bool], ExecutableReturnsRows] = {}
        # One single-job statement per shape: (timing, keys given, extra columns).
        self._ones: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _One] = {}
        # Whether one job's row can be attached without the ORM's loading: decided
        # on first use, once the application's mappers can be configured.
        self._plain: bool | None = None
        self._by_keys = statements.by_keys(model)
        self._by_unique_keys = statements.by_unique_keys(model)

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
    ) -> list[JobT]:
        """Insert `specs` in `session`'s transaction; return one row per spec, in order.

        A spec whose idempotency key already exists (committed, or inserted by a
        concurrent transaction that then commits) gets the existing row back,
        unchanged; so does a spec whose unique key an active (``pending`` or
        ``running``) job holds. A conflict never raises: the caller's transaction
        stays usable. One round trip, plus one more when some keys were taken.
        Every new row gets `trace_context` (the enqueue span's W3C context), if any.
        The ids of the rows this call inserted (not those found by a key) are added to
        `fresh`, when given: a workflow adds edges for those only.
        """
        if not specs:
            return []
        self._extra_params(specs, trace_context)  # a bad mix of columns fails before any SQL
        # Insert keyed rows in key order (in the keyed rows' own slots, so rows without
        # a key keep their place): ON CONFLICT waits on a concurrent transaction's
        # uncommitted key, and two batches taking the same keys in different orders
        # would otherwise deadlock, aborting one caller's transaction.
        order = _lock_order(specs)

        def insert_once(session: Session, batch: Sequence[JobSpec]) -> list[Any]:
            return self._insert_once(session, batch, trace_context, fresh)

        if order != sorted(order):
            rows = self._insert_in_order(session, [specs[i] for i in order], insert_once)
            result: list[JobT | None] = [None] * len(specs)
            for position, index in enumerate(order):
                result[index] = rows[position]
            return [job for job in result if job is not None]
        return self._insert_in_order(session, specs, insert_once)

    def insert_one(
        self,
        session: Session,
        spec: JobSpec,
        *,
        trace_context: Mapping[str, str] | None = None,
    ) -> JobT:
        """`insert` for one job, at the cost of one ``INSERT ... VALUES ... RETURNING``.

        Same guarantees as `insert`. The row is built from what was inserted and
        from the columns the database fills (``id``, the timestamps, ``payload`` as
        stored, the application's own columns), then added to `session` as a
        persistent object, as if loaded: no flush, no second statement. When
        something could tell the difference from an ORM load (a ``load`` event or
        ``@reconstructor`` on the model, an inheritance hierarchy, a session with
        ``do_orm_execute`` or ``loaded_as_persistent`` listeners, a session in the
        middle of a flush), the row is loaded through the ORM as `insert` does.
        """
        real = session() if isinstance(session, scoped_session) else session
        mapper = self._mapper()
        loaded = mapper.class_manager.dispatch.load  # a @reconstructor is one too
        if loaded or spec.workflow or not (self._plain_model() and _plain_session(real)):
            job: JobT = self.insert(session, [spec], trace_context=trace_context)[0]
            return job
        one = self._one(spec, trace_context)
        params: dict[str, Any] = {
            "new_kind": spec.kind,
            "new_queue": spec.queue,
            "new_payload": spec.payload,
            "new_priority": spec.priority,
            "new_max_attempts": spec.max_attempts,
        }
        if spec.run_at is not None:
            params["new_run_at"] = spec.run_at
        elif spec.delay:
            params["new_delay"] = spec.delay
        if spec.idempotency_key is not None:
            params["new_idempotency_key"] = spec.idempotency_key
        if spec.unique_key is not None:
            params["new_unique_key"] = spec.unique_key
        if spec.concurrency_key is not None:
            params["new_concurrency_key"] = spec.concurrency_key
        table = self.model.__table__
        for name, value in spec.columns:
            json_column = isinstance(table.c[name].type, JSON) and value is not None
            params[f"new_{name}"] = dumps(value) if json_column else value
        if trace_context:
            params["new_trace_context"] = dumps(dict(trace_context))

        def insert_once(session: Session, specs: Sequence[JobSpec]) -> list[Any]:
            # As the ORM would before running a statement: the caller's pending
            # objects (the order a job's foreign key points to) go first.
            session._autoflush()
            bind = {"mapper": mapper, "clause": one.statement}
            row = session.connection(bind_arguments=bind).execute(one.statement, params).first()
            if row is None:  # a key was taken: find the job that holds it
                return self._match(session, specs, [])
            return [self._attach(session, mapper, spec, one, row, trace_context)]

        found: JobT = self._insert_in_order(real, [spec], insert_once)[0]
        return found

    def _mapper(self) -> Mapper[Any]:
        """The model's mapper, configured: as the ORM makes sure before each statement.

        The application's mappers may have changed since (a relationship to the
        jobs model declared later); configuring is a flag check once done.
        """
        mapper: Mapper[Any] = inspect(self.model)
        mapper._check_configure()
        return mapper

    def _plain_model(self) -> bool:
        """Whether a job of this model may be attached as built (see `insert_one`)."""
        if self._plain is None:
            mapper = self._mapper()
            table = self.model.__table__
            own_keys = all(
                mapper.get_property_by_column(table.c[name]).key == name
                for name in (*_SET_COLUMNS, *_NULL_COLUMNS, "id", "payload")
            )
            self._plain = (
                own_keys
                and mapper.inherits is None
                and mapper.polymorphic_on is None
                and not mapper._inheriting_mappers
                and tuple(mapper.primary_key) == (table.c.id,)
            )
        return self._plain

    def _one(self, spec: JobSpec, trace_context: Mapping[str, str] | None) -> _One:
        """The statement for a job like `spec`: which columns it sets decides which."""
        timing = "at" if spec.run_at is not None else "after" if spec.delay else "now"
        keys = tuple(
            name
            for name, value in (
                ("idempotency_key", spec.idempotency_key),
                ("unique_key", spec.unique_key),
                ("concurrency_key", spec.concurrency_key),
            )
            if value is not None
        )
        extra = tuple(name for name, _ in spec.columns)
        if trace_context:
            extra += ("trace_context",)
        shape = (timing, keys, extra)
        one = self._ones.get(shape)
        if one is None:
            mapper = self._mapper()
            known = set(_SET_COLUMNS) | (set(_NULL_COLUMNS) - set(extra))
            mapped = set(mapper.columns.values())
            columns = [c for c in self.model.__table__.c if c.name not in known and c in mapped]
            statement = statements.enqueue_one(
                self.model,
                timing=timing,
                keys=keys,
                extra=extra,
                returning=[c.name for c in columns],
            )
            returned = tuple(mapper.get_property_by_column(c).key for c in columns)
            one = self._ones[shape] = _One(statement, returned)
        return one

    def _attach(
        self,
        session: Session,
        mapper: Mapper[Any],
        spec: JobSpec,
        one: _One,
        row: Row[Any],
        trace_context: Mapping[str, str] | None,
    ) -> Any:
        """The persistent object for the row just inserted, in `session`'s identity map."""
        values: dict[str, Any] = dict.fromkeys(_NULL_COLUMNS)
        values.update(
            kind=spec.kind,
            queue=spec.queue,
            status=Status.PENDING.value,
            priority=spec.priority,
            attempts=0,
            max_attempts=spec.max_attempts,
            idempotency_key=spec.idempotency_key,
            unique_key=spec.unique_key,
            concurrency_key=spec.concurrency_key,
        )
        values.update(zip(one.returned, row, strict=True))
        existing = session.identity_map.get(mapper.identity_key_from_primary_key((values["id"],)))
        if existing is not None:
            return existing  # as an ORM load would: the session's object wins
        job = mapper.class_manager.new_instance()
        instance_dict(job).update(values)
        make_transient_to_detached(job)  # history clear, identity key set: as loaded
        session.add(job)
        return job

    def _extra_params(
        self, specs: Sequence[JobSpec], trace_context: Mapping[str, str] | None
    ) -> dict[str, list[Any]]:
        """One array per extra column (the app's own columns, ``trace_context``), by name.

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
        if trace_context:
            arrays["trace_context"] = [dumps(dict(trace_context))] * len(specs)
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
    ) -> list[Any]:
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
        workflow = any(s.workflow for s in specs)
        if workflow:
            params.update(
                statuses=[s.status for s in specs],
                waiting_fors=[s.waiting_for for s in specs],
                after_failures=[s.after_failure if s.after else None for s in specs],
                has_dependents_list=[s.has_dependents for s in specs],
                last_errors=[s.last_error for s in specs],
            )
        extra = self._extra_params(specs, trace_context)
        for name, values in extra.items():
            params[f"{name}_values"] = values
        load = self._load(tuple(extra), workflow)
        inserted = sorted(session.scalars(load, params).all(), key=lambda job: job.id)
        if fresh is not None:
            fresh.update(job.id for job in inserted)
        if len(inserted) == len(specs):
            return inserted
        return self._match(session, specs, inserted)

    def _match(self, session: Session, specs: Sequence[JobSpec], inserted: list[Any]) -> list[Any]:
        """One row per spec: the row it inserted, or the row whose key it conflicted with.

        None for a spec whose unique key conflicted with a job that has finished
        since (the caller inserts it again).
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
            for job in session.scalars(self._by_keys, {"keys": wanted}):
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
            for job in session.scalars(self._by_unique_keys, {"unique_keys": wanted_unique}):
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
