"""Jobs that wait for other jobs: the checks of ``after=`` and the inserts of a graph.

`AfterCheck` turns ``after=[job_or_id, ...]`` into sorted unique ids, refusing
anything else before the session is touched. `Graph` inserts jobs that wait, in
the caller's transaction: it locks the upstream jobs first (`Driver.upstream_lock`,
which also marks them ``has_dependents``), so none of them can end unseen between
this read and the caller's COMMIT; each new job is inserted ``waiting`` with the
count of its upstream jobs that have not ended, ``pending`` when all are ``done``
already, or ``cancelled`` when one failed and it does not run after failures; then
one edge per (job, upstream job). A job can only wait for jobs that exist already,
so no cycle can ever form. See docs/workflows.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session

from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.enqueue.insert_many import ManyInserter
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import BatchClosedError, ValidationError
from sa_jobqueue.schema.model import FINISHED, UNFINISHED, JobMixin, Status

__all__ = ["MAX_AFTER", "AfterCheck", "Graph"]

#: The most jobs one job may wait for through ``after=`` (a batch has no such limit).
MAX_AFTER = 1000

JobT = TypeVar("JobT", bound=JobMixin)

_UNFINISHED = frozenset(s.value for s in UNFINISHED)
_ENDED = frozenset(s.value for s in FINISHED)


class AfterCheck:
    """Validates ``after=`` for one jobs model: jobs of that model, or their ids.

    Args:
        model: the application's jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model

    def __call__(self, after: object) -> tuple[int, ...]:
        """Return the ids `after` names, sorted and unique.

        Raises:
            ValidationError: `after` is not a list of jobs or ids, names a job of
                another table or one without an id yet, or more than `MAX_AFTER` jobs.
        """
        if isinstance(after, (str, bytes, Mapping)) or not isinstance(after, (list, tuple, set)):
            raise ValidationError(
                "after", after, "must be a list of jobs (rows enqueue returned) or job ids"
            )
        ids: set[int] = set()
        for item in after:
            ids.add(self._id(item))
        if len(ids) > MAX_AFTER:
            raise ValidationError(
                "after",
                f"<{len(ids)} jobs>",
                f"a job may wait for at most {MAX_AFTER} jobs; "
                "use jobs.batch() for a larger fan-in",
            )
        return tuple(sorted(ids))

    def _id(self, item: object) -> int:
        if isinstance(item, bool):
            raise ValidationError("after", item, "job ids are ints, not bool")
        if isinstance(item, int):
            if not 0 < item < 2**63:
                raise ValidationError("after", item, "is not a job id (a positive bigint)")
            return item
        if isinstance(item, JobMixin):
            if not isinstance(item, self.model):
                raise ValidationError(
                    "after",
                    item,
                    f"is a job of {type(item).__name__} (table "
                    f"{type(item).__tablename__!r}), not of {self.model.__name__} "
                    f"(table {self.model.__tablename__!r}): a job can only wait for jobs "
                    "of its own table",
                )
            job_id = item.id
            if job_id is None:
                raise ValidationError(
                    "after", item, "has no id yet: flush the session (or use jobs.enqueue) first"
                )
            return int(job_id)
        raise ValidationError(
            "after", item, f"must be a job or a job id, not {type(item).__name__}"
        )


class Graph(Generic[JobT]):
    """Inserts jobs with dependencies (and batch members) in the caller's session.

    Args:
        model: the jobs model.
        inserter: the model's `Inserter`, whose batched INSERT (`ManyInserter`) runs
            the jobs' INSERT; the rest goes to the session's driver.
    """

    def __init__(self, model: type[JobT], inserter: Inserter[JobT]) -> None:
        self.model = model
        self.batched: ManyInserter[JobT] = inserter.batched

    def needed(self, specs: Sequence[JobSpec]) -> bool:
        """Whether any of `specs` waits for a job (else the plain insert does)."""
        return any(spec.after for spec in specs)

    def insert(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        *,
        trace_context: Mapping[str, str] | None = None,
        batch_id: int | None = None,
        ids_only: bool = False,
    ) -> list[Any]:
        """Insert `specs` (waiting where they wait), their edges, and join `batch_id`.

        The rows are mapped jobs, or with `ids_only` the inserter's `Inserted` (id and keys).

        Raises:
            ValidationError: an ``after=`` id names no job of this table (nothing
                is inserted; the transaction stays usable).
            BatchClosedError: `batch_id`'s callback has started already.
            ValidationError: with `batch_id`, a key (idempotency or unique) names a
                job that exists already and is not a member of this batch: the batch
                cannot wait for a job it did not insert (nothing is inserted; the
                transaction stays usable).
        """
        if batch_id is not None and any(s.idempotency_key or s.unique_key for s in specs):
            # A key may find a job outside the batch: then undo this call's inserts.
            with session.begin_nested():
                return self._insert(session, specs, trace_context, batch_id, ids_only)
        return self._insert(session, specs, trace_context, batch_id, ids_only)

    def _insert(
        self,
        session: Session,
        specs: Sequence[JobSpec],
        trace_context: Mapping[str, str] | None,
        batch_id: int | None,
        ids_only: bool,
    ) -> list[Any]:
        driver = self.batched.driver_of(session)
        statuses = self._lock_upstream(session, specs)
        planned = [_plan(spec, statuses, batch_id is not None) for spec in specs]
        fresh: set[int] = set()
        rows = self.batched.insert(
            session, planned, trace_context=trace_context, fresh=fresh, ids_only=ids_only
        )
        job_ids: list[int] = []
        upstream_ids: list[int] = []
        for row, spec in zip(rows, planned, strict=True):
            if row.id in fresh:  # a job found by its key keeps its own edges
                job_ids += [row.id] * len(spec.after)
                upstream_ids += spec.after
        members = sorted({row.id for row in rows if row.id in fresh})
        if batch_id is not None and len(fresh) < len(rows):
            self._check_members(session, batch_id, rows, planned, fresh)
        # A member inserted `cancelled` (an upstream job of its had failed) has ended
        # already: the callback waits for the others only (its edge still shows it).
        ended = {row.id for row, spec in zip(rows, planned, strict=True) if spec.status in _ENDED}
        unfinished = [job_id for job_id in members if job_id not in ended]
        if batch_id is not None and members:
            job_ids += [batch_id] * len(members)
            upstream_ids += members
        driver.edges_insert(session, job_ids, upstream_ids)
        if (
            batch_id is not None
            and members
            and not driver.batch_add(session, batch_id, len(unfinished))
        ):
            raise BatchClosedError(
                f"batch {batch_id}: its callback has started (or ended) already; "
                "jobs join a batch only in the transaction that made it"
            )
        return rows

    def _check_members(
        self,
        session: Session,
        batch_id: int,
        rows: Sequence[Any],
        specs: Sequence[JobSpec],
        fresh: set[int],
    ) -> None:
        """Refuse a key that found a job outside batch `batch_id` (never waited for).

        A key of a member (given twice, or in an earlier call of the batch) is fine.
        """
        found = {row.id: spec for row, spec in zip(rows, specs, strict=True) if row.id not in fresh}
        known = self.batched.driver_of(session).batch_members(session, batch_id, sorted(found))
        outside = sorted(set(found) - known)
        if outside:
            spec = found[outside[0]]
            field, key = (
                ("idempotency_key", spec.idempotency_key)
                if spec.idempotency_key
                else ("unique_key", spec.unique_key)
            )
            raise ValidationError(
                field,
                key,
                f"names job {outside[0]}, which exists already and is not a member of "
                f"batch {batch_id}: a batch waits only for the jobs it inserts, so a key "
                "of a job outside it is refused (give a new key, or wait for that job "
                "with after=[...])",
            )

    def _lock_upstream(self, session: Session, specs: Sequence[JobSpec]) -> dict[int, str]:
        upstream = sorted({u for spec in specs for u in spec.after})
        if not upstream:
            return {}
        statuses = self.batched.driver_of(session).upstream_lock(session, upstream)
        missing = [u for u in upstream if u not in statuses]
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
            raise ValidationError(
                "after",
                missing,
                f"no job with id {shown} in table {self.model.__tablename__!r}",
            )
        return statuses


def _plan(spec: JobSpec, statuses: Mapping[int, str], member: bool) -> JobSpec:
    """`spec` with the workflow columns its upstream jobs' statuses decide."""
    if not spec.after:
        return dataclasses.replace(spec, workflow=True, has_dependents=True if member else None)
    unfinished = sum(1 for u in spec.after if statuses[u] in _UNFINISHED)
    failed = [u for u in spec.after if statuses[u] in (Status.FAILED.value, Status.CANCELLED.value)]
    status, error = Status.WAITING.value, None
    if failed and spec.after_failure == "cancel":
        status = Status.CANCELLED.value
        error = f"cancelled: upstream job {failed[0]} ended {statuses[failed[0]]}"
    elif unfinished == 0:
        status = Status.PENDING.value
    return dataclasses.replace(
        spec,
        workflow=True,
        status=status,
        waiting_for=unfinished,
        has_dependents=True if member else None,
        last_error=error,
    )
