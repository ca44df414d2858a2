"""The asyncio half of enqueue: `aenqueue`, `aenqueue_many`, `abatch` and `asignal`.

Each takes an `AsyncSession`, prepares its `JobSpec`s as `EnqueueAPI` does and runs the
same inserts on the session's sync side (``run_sync``), inside the ``send`` span opened in
the caller's context. `JobQueue` inherits these from `AsyncEnqueueAPI`. See
docs/asyncio.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

from sa_jobqueue import tracing
from sa_jobqueue.core.aio import check_async_session
from sa_jobqueue.enqueue.api import EnqueueAPI
from sa_jobqueue.enqueue.batch import Batch
from sa_jobqueue.enqueue.prepare import EnqueueOptions, check_ids_only
from sa_jobqueue.schema.model import JobT

if TYPE_CHECKING:
    from typing import Unpack

    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["AsyncEnqueueAPI"]


class AsyncEnqueueAPI(EnqueueAPI[JobT]):
    """`EnqueueAPI`'s methods for an `AsyncSession` (mixed into `JobQueue`)."""

    async def aenqueue(
        self,
        session: AsyncSession,
        kind: str,
        payload: Any = None,
        **options: Unpack[EnqueueOptions],
    ) -> JobT:
        """`enqueue` for an `AsyncSession`: the job joins the caller's async unit of work.

        Same arguments, validation, idempotency and transaction rules as `enqueue`
        (it never commits); the insert runs through SQLAlchemy's own bridge,
        ``AsyncSession.run_sync``, so both share one implementation. Works with the
        ``postgresql+psycopg`` and ``postgresql+asyncpg`` async drivers, and
        ``sqlite+aiosqlite``, ``mariadb+aiomysql`` and ``mysql+aiomysql``.

        Example:
            >>> async with AsyncSession(engine) as session, session.begin():  # doctest: +SKIP
            ...     session.add(Order(id=4))
            ...     job = await jobs.aenqueue(session, "send_receipt", {"order_id": 4})

        The returned row belongs to `session`; after a commit that expires it, read
        its attributes before the commit, or use ``expire_on_commit=False``.

        Raises:
            ValidationError: naming the bad argument, before the session is touched.
            ConfigurationError: `session` is not an `AsyncSession` (a sync `Session`
                is told to use ``jobs.enqueue(...)``).
        """
        session = check_async_session(session, "aenqueue")
        spec, keyed_enqueue = self._prepare(kind, payload, options, call="jobs.aenqueue")
        if spec.after:
            waiting: list[JobT] = await session.run_sync(self._insert_many, [spec])
            return waiting[0]
        # The span opens here, in the caller's context, around the bridge.
        with tracing.producing([spec.queue], 1) as produced:
            if keyed_enqueue is not None:
                job: JobT = await session.run_sync(
                    self._keyed.insert, spec, keyed_enqueue, trace_context=produced.carrier
                )
            else:
                job = await session.run_sync(
                    self._inserter.insert_one, spec, trace_context=produced.carrier
                )
            produced.inserted([job.id])
        return job

    @overload
    async def aenqueue_many(
        self, session: AsyncSession, items: Iterable[Any], *, ids_only: Literal[False] = False
    ) -> list[JobT]: ...

    @overload
    async def aenqueue_many(
        self, session: AsyncSession, items: Iterable[Any], *, ids_only: Literal[True]
    ) -> list[int]: ...

    @overload
    async def aenqueue_many(
        self, session: AsyncSession, items: Iterable[Any], *, ids_only: bool
    ) -> list[JobT] | list[int]: ...

    async def aenqueue_many(
        self, session: AsyncSession, items: Iterable[Any], *, ids_only: bool = False
    ) -> list[JobT] | list[int]:
        """`enqueue_many` for an `AsyncSession`: one round trip, rows in the order given.

        Same items, rules, idempotency and ``ids_only`` as `enqueue_many`; never commits.
        """
        session = check_async_session(session, "aenqueue_many")
        check_ids_only(ids_only)
        specs = self._prepare_many(items)
        if ids_only:
            ids: list[int] = await session.run_sync(self._insert_ids, specs)
            return ids
        rows: list[JobT] = await session.run_sync(self._insert_many, specs)
        return rows

    async def abatch(self, session: AsyncSession, *, callback: Any) -> Batch[JobT]:
        """`batch` for an `AsyncSession`; add jobs with ``await batch.aenqueue_many(...)``."""
        session = check_async_session(session, "abatch")
        spec = self._callback_spec(callback)
        with tracing.producing([spec.queue], 1) as produced:
            job: JobT = await session.run_sync(
                self._inserter.insert_one, spec, trace_context=produced.carrier
            )
            produced.inserted([job.id])
        return Batch(session, job, self._prepare_many, self._insert_members)

    async def asignal(
        self, session: AsyncSession, job_id: int, name: str, payload: Any = None
    ) -> int:
        """`signal` for an `AsyncSession`, in the caller's async transaction."""
        session = check_async_session(session, "asignal")
        checked = self._signaller.check(job_id, name, payload)
        signal_id: int = await session.run_sync(
            lambda sync: self._signaller.send(sync.connection(), *checked)
        )
        return signal_id
