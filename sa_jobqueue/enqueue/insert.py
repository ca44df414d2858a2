"""The one-row INSERT of enqueue: one job as one short statement, attached as if loaded.

`Inserter` runs the INSERTs of enqueue for one model in the caller's session, through
its driver (`Driver.job_insert`...), never commits, and returns the jobs as mapped
instances; keys already taken return the job that holds them. Many jobs go through
the batched statement of the `ManyInserter` it holds (`sa_jobqueue.enqueue.insert_many`),
whose rows it builds as it builds one job's where nothing could tell
(`Inserter.attached_rows`). See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import inspect
from sqlalchemy import types as sqltypes
from sqlalchemy.orm import Mapper, Session, scoped_session

from sa_jobqueue.core import local_wakeups, sqlalchemy_private
from sa_jobqueue.driver.protocol.enqueue import InsertShape, JobsInsert
from sa_jobqueue.enqueue.attach import (
    NULL_COLUMNS,
    SET_COLUMNS,
    One,
    attach,
    attach_all,
    defaults_to_now,
)
from sa_jobqueue.enqueue.insert_many import DriverOf, ManyInserter
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.schema.model import JobMixin

__all__ = ["Inserter"]

JobT = TypeVar("JobT", bound=JobMixin)


def _plain_session(session: Session) -> bool:
    """Whether `session` may take a built row: nothing listening would tell it from a load.

    Inside a flush (a mapper event enqueueing "when an order is inserted"),
    ``Session.add()`` is not supported, while a load is: the ORM loads it there. A
    built row's payload comes back as text, decoded as the dialect would: where that
    cannot be known, the ORM loads the row (and the driver decodes it).
    """
    return not (
        sqlalchemy_private.flushing(session)
        or session.dispatch.do_orm_execute
        or session.dispatch.loaded_as_persistent
        or not sqlalchemy_private.KNOWS_JSON_DESERIALIZER
    )


class Inserter(Generic[JobT]):
    """Runs the INSERTs of enqueue for one model: `insert` (batched) and `insert_one`.

    The database is the session's driver's (`sa_jobqueue.driver`); what each shape of
    INSERT returns is decided once.
    """

    def __init__(self, model: type[JobT]) -> None:
        self.model = model
        self.table = str(model.__tablename__)
        #: The batched INSERT, keyed rows in key order, taken keys matched: its rows
        #: are inserted and built by `attached_rows`.
        self.batched: ManyInserter[JobT] = ManyInserter(model, rows=self.attached_rows)
        self.driver_of: DriverOf = self.batched.driver_of
        # One single-job statement per shape: (timing, keys given, extra columns).
        self._ones: dict[tuple[str, tuple[str, ...], tuple[str, ...]], One] = {}
        # Whether one job's row can be attached without the ORM's loading: decided
        # on first use, once the application's mappers can be configured.
        self._plain: bool | None = None
        self._arrays: bool | None = None  # see `_has_arrays`
        # The batched INSERTs returning what `_attach` needs: over arrays, per
        # extra columns; gathered, traced or not.
        self._manys: dict[tuple[str, ...], One] = {}
        self._jsons: dict[bool, tuple[One, tuple[str, ...]]] = {}
        # The model's mapper: a mapped class keeps its mapper.
        self._mapped: Mapper[Any] | None = None

    def insert(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        *,
        trace_context: Mapping[str, str] | None = None,
        fresh: set[int] | None = None,
        ids_only: bool = False,
    ) -> list[Any]:
        """Insert `specs` in one batched statement: `ManyInserter.insert`, which says how."""
        return self.batched.insert(
            session, specs, trace_context=trace_context, fresh=fresh, ids_only=ids_only
        )

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
        driver = self.driver_of(real)
        if not driver.supports_listen_notify:  # no NOTIFY: wake this process's workers
            local_wakeups.enqueued(real, self.table, (spec.queue,))
        mapper = self._mapper()
        loaded = mapper.class_manager.dispatch.load  # a @reconstructor is one too
        if loaded or spec.workflow or not (self._plain_model() and _plain_session(real)):
            job: JobT = self.insert(session, [spec], trace_context=trace_context)[0]
            return job
        one = self._one(spec, trace_context)

        def insert_once(session: Session, specs: Sequence[JobSpec]) -> list[Any]:
            row = driver.job_insert(session, spec, one.shape, trace_context)
            if row is None:  # a key was taken: find the job that holds it
                return self.batched.match(session, specs, [])
            return [attach(session, mapper, spec, one, row)]

        if spec.unique_key is None:  # nothing to retry: see `ManyInserter.insert_in_order`
            job = insert_once(real, [spec])[0]
            return job
        found: JobT = self.batched.insert_in_order(real, [spec], insert_once)[0]
        return found

    def attached_rows(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> list[Any]:
        """The `RowsFunction` of `batched`: built as `insert_one` builds its row where it can.

        The INSERT returns only what the database filled (and the keys, to pair each
        row with its spec: rows come back in the batch's order, less the specs whose
        key was taken), and each row is attached as `insert_one` attaches its own.
        Without the application's own columns, the batch travels as one JSON
        parameter and comes back gathered (`Driver.jobs_insert_gathered`).
        """
        mapper = self._mapper()
        loaded = mapper.class_manager.dispatch.load
        if workflow or loaded or not (self._plain_model() and _plain_session(session)):
            return self.batched.loaded_rows(session, specs, columns, workflow, trace_context)
        batch = JobsInsert(specs, columns, workflow, trace_context)
        driver = self.driver_of(session)
        if not columns and not self._has_arrays():
            # Gathered: ``payload`` decoded, and the columns the database fills with
            # ``now()`` take the one ``now()`` returned.
            many, now_filled = self._json(bool(trace_context))
            gathered, now = driver.jobs_insert_gathered(session, batch, many.shape.returning)
            shared = dict.fromkeys(now_filled, now)
            return attach_all(session, mapper, many, self._pair(many, specs, gathered), shared)
        many = self._many(tuple(columns) + (("trace_context",) if trace_context else ()))
        rows = driver.jobs_insert(session, batch, many.shape.returning)
        # A trace context is in the extra columns: returned with the rows, not left NULL.
        return attach_all(session, mapper, many, self._pair(many, specs, rows), {})

    @staticmethod
    def _pair(
        one: One, specs: Sequence[JobSpec], rows: Sequence[Sequence[Any]]
    ) -> list[tuple[JobSpec, Sequence[Any]]]:
        """Each row (in id order) with its spec: the next spec that carries its keys."""
        if len(rows) == len(specs):  # every spec inserted its row, in the batch's order
            return list(zip(specs, rows, strict=True))
        keys_at = one.returned.index("idempotency_key"), one.returned.index("unique_key")
        paired: list[tuple[JobSpec, Sequence[Any]]] = []
        for spec in specs:
            if len(paired) == len(rows):
                break
            row = rows[len(paired)]
            if (row[keys_at[0]], row[keys_at[1]]) == (spec.idempotency_key, spec.unique_key):
                paired.append((spec, row))
        return paired

    def _returned(self, extra: tuple[str, ...]) -> list[Any]:
        """The columns a batched INSERT returns: those the database fills, and the keys."""
        mapper = self._mapper()
        known = set(SET_COLUMNS) - {"idempotency_key", "unique_key"}
        known |= set(NULL_COLUMNS) - set(extra)
        mapped = set(mapper.columns.values())
        return [c for c in self.model.__table__.c if c.name not in known and c in mapped]

    def _many(self, extra: tuple[str, ...]) -> One:
        """`Driver.jobs_insert` returning what `_attach` needs."""
        many = self._manys.get(extra)
        if many is None:
            columns = self._returned(extra)
            shape = InsertShape(extra=extra, returning=tuple(c.name for c in columns))
            many = self._manys[extra] = self._shape(shape, self._keys_of(columns))
        return many

    def _json(self, traced: bool) -> tuple[One, tuple[str, ...]]:
        """`Driver.jobs_insert_gathered` returning what `_attach` needs.

        With it, the attributes that take the ``now()`` it returns: the columns whose
        default is ``now()``.
        """
        found = self._jsons.get(traced)
        if found is None:
            columns = self._returned(("trace_context",) if traced else ())
            now_filled = [c for c in columns if c.name != "run_at" and defaults_to_now(c)]
            arrays = [c for c in columns if c not in now_filled]
            shape = InsertShape(returning=tuple(c.name for c in arrays))
            many = self._shape(shape, self._keys_of(arrays), also=self._keys_of(now_filled))
            found = self._jsons[traced] = (many, self._keys_of(now_filled))
        return found

    def _keys_of(self, columns: Sequence[Any]) -> tuple[str, ...]:
        """The attribute each of `columns` fills."""
        mapper = self._mapper()
        return tuple(mapper.get_property_by_column(c).key for c in columns)

    def _mapper(self) -> Mapper[Any]:
        """The model's mapper, configured: as the ORM makes sure before each statement.

        The application's mappers may have changed since (a relationship to the
        jobs model declared later); configuring is a flag check once done.
        """
        mapper = self._mapped
        if mapper is None:
            mapper = self._mapped = inspect(self.model)
        sqlalchemy_private.check_configure(mapper)
        return mapper

    def _has_arrays(self) -> bool:
        """Whether the model has an ARRAY column, which `_json_rows`' ``array_agg`` cannot gather.

        (It refuses NULL arrays, and arrays of unequal lengths.)
        """
        if self._arrays is None:
            table = self.model.__table__
            self._arrays = any(isinstance(c.type, sqltypes.ARRAY) for c in table.c)
        return self._arrays

    def _plain_model(self) -> bool:
        """Whether a job of this model may be attached as built (see `insert_one`)."""
        if self._plain is None:
            mapper = self._mapper()
            table = self.model.__table__
            own_keys = all(
                mapper.get_property_by_column(table.c[name]).key == name
                for name in (*SET_COLUMNS, *NULL_COLUMNS, "id", "payload")
            )
            self._plain = (
                own_keys
                and mapper.inherits is None
                and mapper.polymorphic_on is None
                and list(mapper.self_and_descendants) == [mapper]
                and tuple(mapper.primary_key) == (table.c.id,)
            )
        return self._plain

    def _one(self, spec: JobSpec, trace_context: Mapping[str, str] | None) -> One:
        """The statement for a job like `spec`: which columns it sets decides which."""
        timing = "at" if spec.run_at is not None else "after" if spec.delay else "now"
        if not (
            trace_context
            or spec.columns
            or spec.idempotency_key is not None
            or spec.unique_key is not None
            or spec.concurrency_key is not None
        ):  # the common job: no key, column or trace context
            one = self._ones.get((timing, (), ()))
            if one is not None:
                return one
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
            known = set(SET_COLUMNS) | (set(NULL_COLUMNS) - set(extra))
            mapped = set(mapper.columns.values())
            columns = [c for c in self.model.__table__.c if c.name not in known and c in mapped]
            insert = InsertShape(timing, keys, extra, tuple(c.name for c in columns))
            returned = tuple(mapper.get_property_by_column(c).key for c in columns)
            one = self._ones[shape] = self._shape(insert, returned)
        return one

    def _shape(
        self, shape: InsertShape, returned: tuple[str, ...], also: tuple[str, ...] = ()
    ) -> One:
        mapper = self._mapper()
        filled = {*NULL_COLUMNS, *SET_COLUMNS, *returned, *also}
        unloaded = frozenset(mapper.class_manager) - filled
        identity_class = mapper.identity_key_from_primary_key((None,))[0]
        return One(shape, returned, unloaded, identity_class)
