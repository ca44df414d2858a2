"""`Batch`: jobs that share one callback job, which runs once after all of them have ended.

``jobs.batch(session, callback=(kind, payload))`` inserts the callback job in the
caller's transaction and returns a `Batch`; each job added through it joins the
callback's upstream jobs (`enqueue.workflows.Graph`). Jobs may join until that
transaction ends. The callback runs after every member has ended, whatever the
outcome (``after_failure="run"``), with ``ctx.upstream`` holding their results and
``ctx.upstream_statuses`` their final statuses. A batch that got no member runs its
callback at once. See docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from sqlalchemy.orm import Session, SessionTransaction

from sa_jobqueue.enqueue.prepare import JobSpec, check_ids_only
from sa_jobqueue.errors import BatchClosedError
from sa_jobqueue.schema.model import JobMixin

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["Batch"]

JobT = TypeVar("JobT", bound=JobMixin)

#: Validates batch items (`prepare_many` bound to the queue): items -> specs.
Prepare = Callable[[Iterable[Any]], list[JobSpec]]
#: Inserts specs as members of the batch whose callback has the given id (ids only, or not).
Insert = Callable[[Session, Sequence[JobSpec], int, bool], list[Any]]


class Batch(Generic[JobT]):
    """A batch of jobs and its callback; made by ``jobs.batch()`` (or ``jobs.abatch()``).

    Attributes:
        id: the batch's id, which is its callback job's id.
        callback: the callback job's row.

    Example:
        >>> with Session(engine) as session, session.begin():          # doctest: +SKIP
        ...     batch = jobs.batch(session, callback=("report", {"run": 7}))
        ...     batch.enqueue_many([("resize", {"i": i}) for i in range(1000)])
    """

    def __init__(
        self,
        session: Session | AsyncSession,
        callback: JobT,
        prepare: Prepare,
        insert: Insert,
    ) -> None:
        self.session = session
        self.callback = callback
        self.id: int = int(callback.id)
        self._prepare = prepare
        self._insert = insert
        self._transaction = self._current(session)

    def __repr__(self) -> str:
        return f"<Batch id={self.id} callback={self.callback.kind!r}>"

    @staticmethod
    def _sync(session: Session | AsyncSession) -> Session:
        if isinstance(session, Session):
            return session
        sync: Session = session.sync_session
        return sync

    def _current(self, session: Session | AsyncSession) -> SessionTransaction | None:
        return self._sync(session).get_transaction()

    def _check_open(self) -> None:
        transaction = self._current(self.session)
        if transaction is None or transaction is not self._transaction:
            raise BatchClosedError(
                f"batch {self.id}: the transaction that made it has ended; jobs join a "
                "batch only until its transaction commits"
            )

    def enqueue(self, kind: str, payload: Any = None, **options: Any) -> JobT:
        """Add one job to the batch (`JobQueue.enqueue`'s keywords) in the batch's session.

        Raises:
            BatchClosedError: the batch's transaction has ended.
            ValidationError: naming the bad argument, before the session is touched.
        """
        return self.enqueue_many([{"kind": kind, "payload": payload, **options}])[0]

    @overload
    def enqueue_many(
        self, items: Iterable[Any], *, ids_only: Literal[False] = False
    ) -> list[JobT]: ...

    @overload
    def enqueue_many(self, items: Iterable[Any], *, ids_only: Literal[True]) -> list[int]: ...

    @overload
    def enqueue_many(self, items: Iterable[Any], *, ids_only: bool) -> list[JobT] | list[int]: ...

    def enqueue_many(self, items: Iterable[Any], *, ids_only: bool = False) -> list[Any]:
        """Add many jobs to the batch in one round trip (`JobQueue.enqueue_many`'s items).

        With ``ids_only=True``, their ids instead of their rows, as `JobQueue.enqueue_many`.

        Raises:
            BatchClosedError: the batch's transaction has ended.
        """
        if not isinstance(self.session, Session):
            raise BatchClosedError(
                f"batch {self.id} belongs to an AsyncSession: use await batch.aenqueue_many()"
            )
        self._check_open()
        check_ids_only(ids_only)
        specs = self._prepare(items)
        return self._insert(self.session, specs, self.id, ids_only)

    async def aenqueue(self, kind: str, payload: Any = None, **options: Any) -> JobT:
        """`enqueue` for a batch made on an `AsyncSession` (``jobs.abatch``)."""
        rows = await self.aenqueue_many([{"kind": kind, "payload": payload, **options}])
        return rows[0]

    @overload
    async def aenqueue_many(
        self, items: Iterable[Any], *, ids_only: Literal[False] = False
    ) -> list[JobT]: ...

    @overload
    async def aenqueue_many(
        self, items: Iterable[Any], *, ids_only: Literal[True]
    ) -> list[int]: ...

    @overload
    async def aenqueue_many(
        self, items: Iterable[Any], *, ids_only: bool
    ) -> list[JobT] | list[int]: ...

    async def aenqueue_many(self, items: Iterable[Any], *, ids_only: bool = False) -> list[Any]:
        """`enqueue_many` for a batch made on an `AsyncSession` (``jobs.abatch``)."""
        session = self.session
        if isinstance(session, Session):
            raise BatchClosedError(
                f"batch {self.id} belongs to a Session: use batch.enqueue_many()"
            )
        self._check_open()
        check_ids_only(ids_only)
        specs = self._prepare(items)
        rows: list[Any] = await session.run_sync(self._insert, specs, self.id, ids_only)
        return rows
