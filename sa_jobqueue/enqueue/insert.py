"""The one-row INSERT of enqueue: one job as one short statement, attached as if loaded.

`Inserter` runs the INSERTs of enqueue for one model in the caller's session, never
commits, and returns the jobs as mapped instances; keys already taken return the job
that holds them. Many jobs go through the batched statement of `ManyInserter`
(`sa_jobqueue.enqueue.insert_many`). See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import JSON, Text, cast, inspect
from sqlalchemy.orm import Mapper, Session, make_transient_to_detached, scoped_session
from sqlalchemy.orm.attributes import instance_dict, instance_state
from sqlalchemy.sql.dml import ReturningInsert

from sa_jobqueue import statements
from sa_jobqueue.enqueue.direct import Direct
from sa_jobqueue.enqueue.insert_many import ManyInserter, json_rows
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.schema.columns import dumps
from sa_jobqueue.schema.model import JobMixin, Status

__all__ = ["Inserter"]

JobT = TypeVar("JobT", bound=JobMixin)

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


_NULLS = dict.fromkeys(_NULL_COLUMNS)
_PENDING = Status.PENDING.value


@dataclass(frozen=True)
class _One:
    """The INSERT of one job with a given set of extra columns, and what it returns."""

    statement: ReturningInsert[Any]
    #: The attribute each RETURNING column fills, in order.
    returned: tuple[str, ...]
    #: `statement`, sent on the driver's cursor where nothing could tell.
    direct: Direct
    #: The model's attributes a row leaves unloaded (its relationships): expired.
    unloaded: frozenset[str]


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


class Inserter(ManyInserter[JobT]):
    """Runs the INSERTs of enqueue for one model: `insert` (batched) and `insert_one`.

    Statements are built once.
    """

    def __init__(self, model: type[JobT]) -> None:
        super().__init__(model)
        # One single-job statement per shape: (timing, keys given, extra columns).
        self._ones: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _One] = {}
        # Whether one job's row can be attached without the ORM's loading: decided
        # on first use, once the application's mappers can be configured.
        self._plain: bool | None = None
        # The batched statements returning what `_attach` needs: over arrays, per
        # extra columns; over one JSON parameter, traced or not.
        self._manys: dict[tuple[str, ...], _One] = {}
        self._jsons: dict[bool, _One] = {}

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
            row = one.direct.first(session.connection(bind_arguments=bind), params)
            if row is None:  # a key was taken: find the job that holds it
                return self._match(session, specs, [])
            return [self._attach(session, mapper, spec, one, row, trace_context)]

        if spec.unique_key is None:  # nothing to retry: see `_insert_in_order`
            job = insert_once(real, [spec])[0]
            return job
        found: JobT = self._insert_in_order(real, [spec], insert_once)[0]
        return found

    def _rows(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> list[Any]:
        """`ManyInserter._rows`, built as `insert_one` builds its row where nothing could tell.

        The INSERT returns only what the database filled (and the keys, to pair each
        row with its spec: rows come back in the batch's order, less the specs whose
        key was taken), and each row is attached as `insert_one` attaches its own.
        Without the application's own columns, the batch travels as one JSON
        parameter (`statements.enqueue_json`), and ``payload`` comes back as text,
        decoded here as the driver would (the dialect's ``json_deserializer``).
        """
        mapper = self._mapper()
        loaded = mapper.class_manager.dispatch.load
        if workflow or loaded or not (self._plain_model() and _plain_session(session)):
            return super()._rows(session, specs, columns, workflow, trace_context)
        session._autoflush()  # as the ORM would before its statement
        if columns:
            extra, params = self._array_params(specs, columns, workflow, trace_context)
            many = self._many(extra)
        else:
            many = self._json(bool(trace_context))
            params = {"rows": json_rows(specs)}
            if trace_context:
                params["trace_context"] = dumps(dict(trace_context))
        bind = {"mapper": mapper, "clause": many.statement}
        connection = session.connection(bind_arguments=bind)
        result = many.direct.all(connection, params)
        id_at = many.returned.index("id")
        keys_at = many.returned.index("idempotency_key"), many.returned.index("unique_key")
        rows = sorted(result, key=lambda row: row[id_at])
        decode: Any = None
        if not columns:
            decode = connection.dialect._json_deserializer or json.loads
            payload_at = many.returned.index("payload")
        inserted: list[Any] = []
        for spec in specs:  # the next row belongs to the next spec with its keys
            if len(inserted) == len(rows):
                break
            row = rows[len(inserted)]
            if (row[keys_at[0]], row[keys_at[1]]) != (spec.idempotency_key, spec.unique_key):
                continue
            if decode is not None:
                row = list(row)
                row[payload_at] = decode(row[payload_at])
            # A trace context is in `extra`: returned with the row, not left NULL.
            inserted.append(self._attach(session, mapper, spec, many, row, None))
        return inserted

    def _returned(self, extra: tuple[str, ...]) -> list[Any]:
        """The columns a batched INSERT returns: those the database fills, and the keys."""
        mapper = self._mapper()
        known = set(_SET_COLUMNS) - {"idempotency_key", "unique_key"}
        known |= set(_NULL_COLUMNS) - set(extra)
        mapped = set(mapper.columns.values())
        return [c for c in self.model.__table__.c if c.name not in known and c in mapped]

    def _many(self, extra: tuple[str, ...]) -> _One:
        """`statements.enqueue` (an array per column) returning what `_attach` needs."""
        many = self._manys.get(extra)
        if many is None:
            columns = self._returned(extra)
            statement = statements.enqueue(self.model, extra=extra).returning(*columns)
            many = self._manys[extra] = self._shape(statement, self._keys_of(columns))
        return many

    def _json(self, traced: bool) -> _One:
        """`statements.enqueue_json` (one JSON parameter) returning what `_attach` needs.

        ``payload`` is returned as its text: decoding it here costs a third of what
        the driver's JSON loader does per row (bench/enqueue-results.md).
        """
        many = self._jsons.get(traced)
        if many is None:
            columns = self._returned(("trace_context",) if traced else ())
            returning = [cast(c, Text).label(c.name) if c.name == "payload" else c for c in columns]
            statement = statements.enqueue_json(self.model, traced=traced).returning(*returning)
            many = self._jsons[traced] = self._shape(statement, self._keys_of(columns))
        return many

    def _keys_of(self, columns: Sequence[Any]) -> tuple[str, ...]:
        """The attribute each of `columns` fills."""
        mapper = self._mapper()
        return tuple(mapper.get_property_by_column(c).key for c in columns)

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
            one = self._ones[shape] = self._shape(statement, returned)
        return one

    def _shape(self, statement: ReturningInsert[Any], returned: tuple[str, ...]) -> _One:
        filled = {*_NULL_COLUMNS, *_SET_COLUMNS, *returned}
        unloaded = frozenset(self._mapper().class_manager) - filled
        return _One(statement, returned, Direct(statement), unloaded)

    def _attach(
        self,
        session: Session,
        mapper: Mapper[Any],
        spec: JobSpec,
        one: _One,
        row: Sequence[Any],
        trace_context: Mapping[str, str] | None,
    ) -> Any:
        """The persistent object for the row just inserted, in `session`'s identity map."""
        values: dict[str, Any] = {
            **_NULLS,
            "kind": spec.kind,
            "queue": spec.queue,
            "status": _PENDING,
            "priority": spec.priority,
            "attempts": 0,
            "max_attempts": spec.max_attempts,
            "idempotency_key": spec.idempotency_key,
            "unique_key": spec.unique_key,
            "concurrency_key": spec.concurrency_key,
        }
        values.update(zip(one.returned, row, strict=True))
        key = mapper.identity_key_from_primary_key((values["id"],))
        existing = session.identity_map.get(key)
        if existing is not None:
            return existing  # as an ORM load would: the session's object wins
        job = mapper.class_manager.new_instance()
        instance_dict(job).update(values)
        events = session.dispatch
        if events.before_attach or events.after_attach or events.detached_to_persistent:
            make_transient_to_detached(job)  # history clear, identity key set: as loaded
            session.add(job)  # which tells those listeners
            return job
        # What make_transient_to_detached and then an ORM load do, without
        # Session.add's cascades and events (a load fires none of them). Its
        # _commit_all has nothing to clear: the dict was filled around the
        # attribute events, so the new instance has no history.
        state = instance_state(job)
        state.key = key
        state.identity_token = None
        if one.unloaded:  # a relationship of the application's: loads on first use
            state._expire_attributes(state.dict, one.unloaded)
        state.session_id = session.hash_key
        session.identity_map._add_unpresent(state, key)
        return job
