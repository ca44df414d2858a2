"""The operator half of `JobQueue`: stats, listing, retry, cancel, prune, pause and resume.

`JobQueue` inherits these methods; each is thin over `sa_jobqueue.ops.admin`,
`sa_jobqueue.ops.retention` or `sa_jobqueue.ops.pausing` (the functions the command line
and the dashboard call too), bound to the queue's model. See docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Generic

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from sa_jobqueue.core.aio import check_async_session, check_sync_session
from sa_jobqueue.ops import admin, fairness, pausing
from sa_jobqueue.ops.durable_state import DurableState, durable_state
from sa_jobqueue.ops.workers import AttemptError, WorkerInfo, attempt_history, list_workers
from sa_jobqueue.ops.workflows import Graph, graph_of
from sa_jobqueue.schema.model import JobT
from sa_jobqueue.tasks import Registry

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["OperatorAPI"]


class OperatorAPI(Generic[JobT]):
    """Operating the queue of `model` (mixed into `JobQueue`)."""

    model: type[JobT]
    registry: Registry

    def pause(self, session: Session, queue: str | Iterable[str]) -> list[str]:
        """Pause `queue` for every worker when `session` commits; never commits.

        Workers claim nothing from a paused queue; running jobs finish. Returns
        the queues that were not paused already.
        """
        return pausing.pause(session, self.model, queue)

    def resume(self, session: Session, queue: str | Iterable[str]) -> list[str]:
        """Resume a paused `queue` when `session` commits; idle workers wake at once.

        Returns the queues that were paused. Never commits.
        """
        return pausing.resume(session, self.model, queue)

    def set_weight(self, session: Session, key: str, weight: int) -> None:
        """Give ``concurrency_key`` `key` `weight` turns per round in fair claims.

        For kinds declared with ``fair=True`` (docs/flow-control.md): a key of weight
        3 gets three jobs leased for each one of a key of weight 1. Weight 1 (the
        default for every key) removes the key's row. Applies to every fair kind of
        the table, from the next claim of each worker once `session` commits; never
        commits.

        Raises:
            ValidationError: `key` is not a valid concurrency key, or `weight` is not
                an int of at least 1.
        """
        check_sync_session(session, "set_weight")
        fairness.set_weight(session, self.model, key, weight)

    def weights(self, session: Session) -> dict[str, int]:
        """Every ``concurrency_key`` whose weight in fair claims is not 1."""
        check_sync_session(session, "weights")
        return fairness.weights(session, self.model)

    async def astats(self, session: AsyncSession) -> admin.Stats:
        """`stats` for an `AsyncSession` (read-only, in its transaction).

        The other operator calls take a session first, so they bridge the same way:
        ``await session.run_sync(jobs.retry, [job_id])``.
        """
        session = check_async_session(session, "astats")
        limits = {task.kind: task.limits for task in self.registry.limited()}
        return await session.run_sync(admin.stats, self.model, limits)

    def stats(self, session: Session) -> admin.Stats:
        """Counts per queue and status, queue lag, expired leases, recent dead letters.

        Read-only, in `session`'s transaction. See `ops.admin.QueueStats` for each number;
        each limited task's running/limit numbers are in ``limits`` (`ops.admin.LimitStats`).
        """
        check_sync_session(session, "stats", "astats")
        limits = {task.kind: task.limits for task in self.registry.limited()}
        return admin.stats(session, self.model, limits)

    def list_jobs(
        self,
        session: Session,
        *,
        status: Sequence[str] | str | None = None,
        queue: Sequence[str] | str | None = None,
        kind: Sequence[str] | str | None = None,
        limit: int = 50,
    ) -> list[admin.JobInfo]:
        """Up to `limit` jobs matching every filter given, newest first, as plain data."""
        check_sync_session(session, "list_jobs")
        return admin.list_jobs(
            session, self.model, status=status, queue=queue, kind=kind, limit=limit
        )

    def show(self, session: Session, job_id: int) -> admin.JobInfo | None:
        """The job `job_id` as plain data (payload, times, ``last_error`` in full), or None."""
        check_sync_session(session, "show")
        return admin.get_job(session, self.model, job_id)

    def retry(
        self, session: Session, ids: Iterable[int], *, with_dependents: bool = False
    ) -> admin.Changed:
        """Move ``failed``/``cancelled`` jobs among `ids` back to ``pending``, due now.

        One more attempt is allowed; ``last_error`` is kept. Never commits: the
        change (and the NOTIFY that wakes idle workers) takes effect when the
        caller's transaction commits. Jobs in other statuses come back in
        ``skipped``, unknown ids in ``missing``. With `with_dependents`, the jobs
        their failure cancelled (``after=`` them) wait for them again, down the
        graph (``revived``; docs/workflows.md).
        """
        check_sync_session(session, "retry")
        return admin.retry(session, self.model, ids, with_dependents=with_dependents)

    def graph(self, session: Session, job_id: int) -> Graph:
        """What job `job_id` waits for and what waits for it (docs/workflows.md)."""
        check_sync_session(session, "graph")
        return graph_of(session.connection(), self.model, job_id)

    def durable(self, session: Session, job: admin.JobInfo) -> DurableState:
        """`job`'s recorded steps, its signals and what it is parked for (docs/durable.md)."""
        check_sync_session(session, "durable")
        return durable_state(session.connection(), self.model, job.id, job.status)

    def retry_failed(
        self, session: Session, *, queue: str | None = None, kind: str | None = None
    ) -> admin.Changed:
        """`retry` every ``failed`` job (of `queue` and/or `kind`); never commits."""
        check_sync_session(session, "retry_failed")
        return admin.retry_failed(session, self.model, queue=queue, kind=kind)

    def cancel(self, session: Session, ids: Iterable[int]) -> admin.Changed:
        """Cancel ``pending`` or ``running`` jobs among `ids`; never commits.

        A running job is cancelled at once; when the caller commits, its worker is
        told (``ctx.cancelled`` turns True, its slot is freed). Its handler is not
        killed: its later report changes nothing and the job is not retried
        (``was_running`` lists such jobs).
        """
        check_sync_session(session, "cancel")
        return admin.cancel(session, self.model, ids)

    def prune(
        self,
        engine: Engine | Connection,
        *,
        older_than: timedelta | Mapping[str, timedelta],
        statuses: Iterable[str] | None = None,
        batch_size: int = admin.DEFAULT_BATCH_SIZE,
    ) -> admin.PruneResult:
        """Delete finished jobs older than `older_than` in short batches; see `ops.admin.prune`.

        Commits each batch itself (hence an engine, not a session). Never touches
        ``pending`` or ``running`` rows, never blocks a claim, and only one pruner
        per table runs at a time (``locked_out`` tells the others).
        """
        return admin.prune(
            engine, self.model, older_than=older_than, statuses=statuses, batch_size=batch_size
        )

    def workers(self, session: Session, *, include_gone: bool = True) -> list[WorkerInfo]:
        """The worker registry: each worker ``live``, ``idle`` or ``gone``, with its running jobs.

        See `ops.workers.list_workers` and docs/workers-registry.md.
        """
        check_sync_session(session, "workers")
        return list_workers(session, self.model, include_gone=include_gone)

    def attempt_history(self, session: Session, job_id: int) -> list[AttemptError]:
        """Job `job_id`'s failed attempts, oldest first (at most the newest 25 are kept)."""
        check_sync_session(session, "attempt_history")
        return attempt_history(session, self.model, job_id)
