"""The enqueue half of `JobQueue`: enqueue, enqueue_many, batch and signal.

`JobQueue` inherits these methods (their asyncio twins from `sa_jobqueue.enqueue.api_async`);
each checks its session, prepares the `JobSpec`s
(`sa_jobqueue.enqueue.prepare`) and inserts them in the caller's transaction, inside
their ``send`` span, through `Inserter`, `KeyedInserter` or `Graph`. See docs/enqueue.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, overload

from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue import tracing
from sa_jobqueue.core.aio import check_sync_session
from sa_jobqueue.enqueue.batch import Batch
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.enqueue.keyed import KeyedEnqueue, KeyedInserter, check_keyed
from sa_jobqueue.enqueue.prepare import (
    EnqueueOptions,
    JobSpec,
    check_ids_only,
    check_options,
    prepare,
    prepare_many,
)
from sa_jobqueue.enqueue.signaller import Signaller
from sa_jobqueue.enqueue.workflows import AfterCheck, Graph
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.columns import OwnColumns
from sa_jobqueue.schema.model import JobT
from sa_jobqueue.tasks import Registry

if TYPE_CHECKING:
    from typing import Unpack


__all__ = ["EnqueueAPI"]


class EnqueueAPI(Generic[JobT]):
    """Adding jobs of `model` to the caller's transaction (mixed into `JobQueue`)."""

    model: type[JobT]
    registry: Registry
    max_payload_bytes: int
    _inserter: Inserter[JobT]
    _keyed: KeyedInserter[JobT]
    _columns: OwnColumns
    _after: AfterCheck
    _graph: Graph[JobT]
    _signaller: Signaller[JobT]

    def enqueue(
        self,
        session: Session | scoped_session[Any],
        kind: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> JobT:
        """Add a job to `session`'s transaction and return its row.

        The job commits or rolls back with the caller's unit of work; this never
        commits and never opens a transaction of its own. Workers cannot see it
        before the commit.

        Args:
            session: the caller's session.
            kind: the task's name.
            payload: a JSON value (default ``{}``).
            **options: `EnqueueOptions`: ``queue``, ``priority``, ``run_at`` or
                ``delay``, ``max_attempts``, ``idempotency_key``, ``unique_key``,
                ``concurrency_key``, ``columns``, ``after`` and ``after_failure``
                (docs/workflows.md), ``debounce`` or ``throttle``; each is described
                there.

        With OpenTelemetry installed, the insert runs in a ``send <queue>`` span whose
        context is stored in the job's ``trace_context`` (see `sa_jobqueue.tracing`).

        Raises:
            ValidationError: (a `ValueError`) naming the bad argument, before the
                session is touched.
            ConfigurationError: `session` is not a `Session` (an `AsyncSession`
                is told to use ``await jobs.aenqueue(...)``).
        """
        check_sync_session(session, "enqueue", "aenqueue")
        spec, keyed_enqueue = self._prepare(kind, payload, options, call="jobs.enqueue")
        if keyed_enqueue is not None:
            return self._insert_keyed(_plain(session), spec, keyed_enqueue)
        if spec.after:
            job: JobT = self._insert_many(_plain(session), [spec])[0]
            return job
        return self._insert_one(session, spec)

    def _prepare(
        self, kind: object, payload: Any, options: EnqueueOptions, *, call: str
    ) -> tuple[JobSpec, KeyedEnqueue | None]:
        """One job's `JobSpec` and its debounce or throttle, for `enqueue` and `aenqueue`."""
        plain: dict[str, Any] = {}
        keyed_enqueue = None
        if options:  # the common call gives none: nothing to check here
            check_options(call, options)
            plain.update(options)
            keyed_enqueue = check_keyed(
                plain.pop("debounce", None),
                plain.pop("throttle", None),
                run_at=plain.get("run_at"),
                delay=plain.get("delay"),
                keys={
                    "idempotency_key": plain.get("idempotency_key"),
                    "unique_key": plain.get("unique_key"),
                    "after": plain.get("after"),
                },
            )
        spec = prepare(
            self.registry,
            self.max_payload_bytes,
            kind,
            payload,
            **plain,
            check_columns=self._columns.check,
            check_after=self._after,
        )
        return spec, keyed_enqueue

    def _insert_one(self, session: Session | scoped_session[Any], spec: JobSpec) -> JobT:
        """Insert `spec` in `session`'s transaction, inside its ``send`` span."""
        session = _plain(session)
        if not tracing.recording():  # no span to open: spare the context manager
            return self._inserter.insert_one(session, spec)
        with tracing.producing([spec.queue], 1) as produced:
            job = self._inserter.insert_one(session, spec, trace_context=produced.carrier)
            produced.inserted([job.id])
        return job

    def _insert_keyed(self, session: Session, spec: JobSpec, keyed_enqueue: KeyedEnqueue) -> JobT:
        """Insert a debounced or throttled `spec`, inside its ``send`` span."""
        with tracing.producing([spec.queue], 1) as produced:
            job = self._keyed.insert(session, spec, keyed_enqueue, trace_context=produced.carrier)
            produced.inserted([job.id])
        return job

    @overload
    def enqueue_many(
        self,
        session: Session | scoped_session[Any],
        items: Iterable[Any],
        *,
        ids_only: Literal[False] = False,
    ) -> list[JobT]: ...

    @overload
    def enqueue_many(
        self,
        session: Session | scoped_session[Any],
        items: Iterable[Any],
        *,
        ids_only: Literal[True],
    ) -> list[int]: ...

    @overload
    def enqueue_many(
        self, session: Session | scoped_session[Any], items: Iterable[Any], *, ids_only: bool
    ) -> list[JobT] | list[int]: ...

    def enqueue_many(
        self,
        session: Session | scoped_session[Any],
        items: Iterable[Any],
        *,
        ids_only: bool = False,
    ) -> list[JobT] | list[int]:
        """Add many jobs in one round trip; return their rows in the order given.

        `items` are ``(kind, payload)`` pairs or dicts of `enqueue`'s keywords plus
        ``kind`` (``"columns"`` included). Fan-out (one event, one job per consumer) is one call::

            jobs.enqueue_many(session, [(kind, {"order_id": 4}) for kind in consumers])

        Same transaction rules, idempotency and unique keys as `enqueue`; one bad item rejects
        the whole call before the session is touched.

        With ``ids_only=True`` it returns the jobs' ids instead (in the order given; for an
        item whose key was taken, the id of the job holding it) and builds no mapped
        object: nothing joins the session, which makes a batch of 1,000 about a third
        cheaper (docs/enqueue.md#ids-only). For bulk loads that need only the ids.
        """
        check_sync_session(session, "enqueue_many", "aenqueue_many")
        check_ids_only(ids_only)
        specs = self._prepare_many(items)
        if ids_only:
            return self._insert_ids(_plain(session), specs)
        return self._insert_many(_plain(session), specs)

    def _prepare_many(self, items: Iterable[Any]) -> list[JobSpec]:
        return prepare_many(
            self.registry, self.max_payload_bytes, items, self._columns.check, self._after
        )

    def _insert_many(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        batch_id: int | None = None,
        *,
        ids_only: bool = False,
    ) -> list[Any]:
        """Insert `specs` inside their ``send`` span: through `Graph` when one waits.

        The rows are mapped jobs, or with `ids_only` `Inserted` (id and keys).
        """
        with tracing.producing([spec.queue for spec in specs], len(specs)) as produced:
            carrier = produced.carrier
            rows: list[Any]
            if batch_id is not None or self._graph.needed(specs):
                rows = self._graph.insert(
                    session, specs, trace_context=carrier, batch_id=batch_id, ids_only=ids_only
                )
            else:
                rows = self._inserter.insert(
                    session, specs, trace_context=carrier, ids_only=ids_only
                )
            produced.inserted([row.id for row in rows])
        return rows

    def _insert_ids(
        self, session: Session, specs: Sequence[JobSpec], batch_id: int | None = None
    ) -> list[int]:
        """`_insert_many` returning the ids only: no mapped object is built."""
        return [row.id for row in self._insert_many(session, specs, batch_id, ids_only=True)]

    def _insert_members(
        self, session: Session, specs: Sequence[JobSpec], batch_id: int, ids_only: bool = False
    ) -> Any:
        if ids_only:
            return self._insert_ids(session, specs, batch_id)
        return self._insert_many(session, specs, batch_id)

    def batch(self, session: Session, *, callback: Any) -> Batch[JobT]:
        """Start a batch in `session`'s transaction: `callback` runs once all its jobs have ended.

        Example:
            >>> with Session(engine) as session, session.begin():      # doctest: +SKIP
            ...     batch = jobs.batch(session, callback=("report", {"run": 7}))
            ...     batch.enqueue_many([("resize", {"i": i}) for i in range(1000)])

        The callback job is inserted now, in the caller's transaction (it commits or
        rolls back with the batch's jobs). Add jobs with ``batch.enqueue`` and
        ``batch.enqueue_many`` until that transaction ends. The callback runs once
        (lease mode: at least once, fenced, like any job) after every job of the batch
        has ended, whatever the outcome; ``ctx.upstream`` holds their results and
        ``ctx.upstream_statuses`` their statuses. A batch with no job runs its
        callback at once. See docs/workflows.md.

        Args:
            session: the caller's session.
            callback: ``(kind, payload)``, or a dict of `enqueue`'s keywords plus
                ``kind`` (as an `enqueue_many` item; no ``after``).

        Raises:
            ValidationError: naming the bad argument, before the session is touched.
        """
        check_sync_session(session, "batch", "abatch")
        session = _plain(session)
        spec = self._callback_spec(callback)
        return Batch(
            session, self._insert_one(session, spec), self._prepare_many, self._insert_members
        )

    def _callback_spec(self, callback: Any) -> JobSpec:
        try:
            (spec,) = self._prepare_many([callback])
        except ValidationError as exc:
            exc.args = (exc.args[0].replace("items[0]", "callback", 1),)
            raise
        if spec.after:
            raise ValidationError(
                "callback", callback, "a batch callback waits for the batch's jobs; give no after="
            )
        return spec

    def signal(
        self, session: Session | scoped_session[Any], job_id: int, name: str, payload: Any = None
    ) -> int:
        """Send signal `name` with `payload` to job `job_id`, in the caller's transaction.

        The signal exists only if the caller's transaction commits. A job parked in
        ``ctx.wait_for_signal(name)`` is made due at that COMMIT, and idle workers of
        its queue wake through LISTEN/NOTIFY; a signal sent before the job waits is
        kept for it (each wait takes the oldest one of its name). The job's row is
        locked until the caller's transaction ends. Never commits.

        Args:
            session: the caller's session (its transaction carries the signal).
            job_id: the job to signal.
            name: the name its handler waits for.
            payload: a JSON value (checked like a job's payload), or None.

        Returns:
            The signal's id.

        Raises:
            ValidationError: a bad id, name or payload; no such job; a job that has
                ended (done, failed or cancelled).

        Example::

            with Session(engine) as session, session.begin():
                jobs.signal(session, job_id, "approved", {"by": "ops"})
        """
        check_sync_session(session, "signal")
        checked = self._signaller.check(job_id, name, payload)
        return self._signaller.send(_plain(session).connection(), *checked)


def _plain(session: Session | scoped_session[Any]) -> Session:
    """The `Session` a `scoped_session` (Flask-SQLAlchemy's ``db.session``) stands for."""
    return session() if isinstance(session, scoped_session) else session
