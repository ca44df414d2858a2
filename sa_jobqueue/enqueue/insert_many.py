"""The batched INSERT of enqueue: many jobs as one statement, one round trip.

`ManyInserter` runs it for one model in the caller's session, never commits, inserts keyed
jobs in key order, and returns the job that holds a key already taken. How a batch's rows
are inserted and built is a function it is given (`RowsFunction`; by default
`ManyInserter.loaded_rows`, loaded by the ORM): `sa_jobqueue.enqueue.insert.Inserter`, which
holds one, gives it its own, which builds the rows without the ORM's loading where nothing
could tell. See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy.orm import Session

from sa_jobqueue.core import local_wakeups
from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.driver.protocol.enqueue import JobsInsert
from sa_jobqueue.enqueue.batch_rows import lock_order, own_columns
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.schema.model import JobMixin

__all__ = ["DriverOf", "Inserted", "ManyInserter", "RowsFunction"]

JobT = TypeVar("JobT", bound=JobMixin)


class Inserted(NamedTuple):
    """What ``ids_only`` inserts return for one job: its id and its keys, no mapped object."""

    id: int
    idempotency_key: str | None
    unique_key: str | None


#: ``rows(session, specs, columns, workflow, trace_context)``: insert `specs` as one batch
#: in `session`'s transaction and return the rows it inserted (those whose key was taken
#: are missing), in id order, each with ``id``, ``idempotency_key`` and ``unique_key``.
#: `columns` are the application's own columns some spec sets (`own_columns`).
RowsFunction = Callable[
    [Session, Sequence[JobSpec], dict[str, list[Any]], bool, Mapping[str, str] | None], list[Any]
]


class DriverOf:
    """The driver of a session's database for one jobs model (`driver_for`), found once per dialect.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model
        self._by_dialect: dict[str, Driver] = {}

    def __call__(self, session: Session) -> Driver:
        """The driver of the database `session` sends the model's statements to."""
        bind = session.bind
        if bind is None:  # binds per mapper or table, or a get_bind of the application's
            bind = session.get_bind(mapper=self.model)
        name = bind.dialect.name
        driver = self._by_dialect.get(name)
        if driver is None:
            driver = self._by_dialect[name] = driver_for(name, self.model)
        return driver


class ManyInserter(Generic[JobT]):
    """Runs the batched INSERT for one model, through its session's driver.

    Args:
        model: the jobs model.
        rows: how a batch's rows are inserted and built (`RowsFunction`); by default
            `loaded_rows`, which the ORM loads.
    """

    #: How often a unique key is retried when its active job finished between the
    #: INSERT that conflicted with it and the SELECT that looked for it.
    UNIQUE_RETRIES = 3

    def __init__(self, model: type[JobT], rows: RowsFunction | None = None) -> None:
        self.model = model
        self.table = str(model.__tablename__)
        self._rows: RowsFunction = rows or self.loaded_rows
        #: The driver of a session's database.
        self.driver_of = DriverOf(model)

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
        own_columns(self.model.__table__, specs)  # a bad mix of columns fails before any SQL
        if not self.driver_of(session).supports_listen_notify:  # wake this process's workers
            local_wakeups.enqueued(session, self.table, {spec.queue for spec in specs})
        # Insert keyed rows in key order (in the keyed rows' own slots, so rows without
        # a key keep their place): ON CONFLICT waits on a concurrent transaction's
        # uncommitted key, and two batches taking the same keys in different orders
        # would otherwise deadlock, aborting one caller's transaction.
        order = lock_order(specs)

        def insert_once(session: Session, batch: Sequence[JobSpec]) -> list[Any]:
            return self._insert_once(session, batch, trace_context, fresh, ids_only)

        if order != sorted(order):
            rows = self.insert_in_order(session, [specs[i] for i in order], insert_once)
            result: list[Any] = [None] * len(specs)
            for position, index in enumerate(order):
                result[index] = rows[position]
            return result
        return self.insert_in_order(session, specs, insert_once)

    def insert_in_order(
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
        columns = own_columns(self.model.__table__, specs)
        if ids_only:
            inserted = self._id_rows(session, specs, columns, workflow, trace_context)
        else:
            # Jobs with workflow columns are loaded by the ORM, whoever builds the others.
            rows = self.loaded_rows if workflow else self._rows
            inserted = rows(session, specs, columns, workflow, trace_context)
        if fresh is not None:
            fresh.update(job.id for job in inserted)
        if len(inserted) == len(specs):
            return inserted
        return self.match(session, specs, inserted, ids_only)

    def loaded_rows(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> list[Any]:
        """Run the batched INSERT; the rows it inserted, loaded by the ORM, in id order.

        The `RowsFunction` of a `ManyInserter` given none. `columns` are the
        application's own columns some spec sets (`own_columns`).
        """
        batch = JobsInsert(specs, columns, workflow, trace_context)
        return self.driver_of(session).jobs_insert_loaded(session, batch)

    def _id_rows(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        columns: dict[str, list[Any]],
        workflow: bool,
        trace_context: Mapping[str, str] | None,
    ) -> list[Inserted]:
        """`loaded_rows` for ``ids_only``: the id and keys of each row inserted, in id order."""
        batch = JobsInsert(specs, columns, workflow, trace_context)
        # A batch without keys needs no key arrays back: every one would be NULL.
        keyed = any(s.idempotency_key is not None or s.unique_key is not None for s in specs)
        rows = self.driver_of(session).jobs_insert_ids(session, batch, keys=keyed)
        return [Inserted(*row) for row in rows]

    def match(
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
            for job in self._found(session, wanted, False, ids_only):
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
            for job in self._found(session, wanted_unique, True, ids_only):
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

    def _found(
        self, session: Session, keys: list[str], unique: bool, ids_only: bool
    ) -> Sequence[Any]:
        """The jobs holding `keys`: mapped rows, or `Inserted` for ``ids_only``."""
        found = self.driver_of(session).jobs_by_keys(
            session, keys, unique=unique, ids_only=ids_only
        )
        return [Inserted(*row) for row in found] if ids_only else found
