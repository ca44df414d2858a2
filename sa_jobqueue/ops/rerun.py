"""``jobs.rerun``: a new job that re-runs an old one from one of its recorded steps.

The new job has the old one's kind, payload, queue, priority, concurrency_key and the
application's own columns, the task's max_attempts, and is due now. The rows the old job
recorded before the step (in the order ``jobs show`` lists them: ``recorded_at``, then
name) are copied to it with their results, as attempt 0, so its handler, run from the top,
skips them and runs the step and what follows. What is and is not copied, and why, is in
docs/durable.md#re-run-from-a-step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, cast

from sqlalchemy.orm import Session, scoped_session
from sqlalchemy.orm.attributes import set_committed_value

from sa_jobqueue.core.aio import check_sync_session
from sa_jobqueue.core.validation import check_job_id
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.ops.archived import find_archived
from sa_jobqueue.schema.columns import OwnColumns
from sa_jobqueue.schema.model import JobT
from sa_jobqueue.statements import rerun as statements
from sa_jobqueue.statements.steps import steps_of
from sa_jobqueue.tasks import Registry

__all__ = ["NOT_COPIED", "RerunAPI", "copied_steps"]

#: Kinds of step rows a rerun leaves behind: a failed try (history of the old job's
#: attempts), a signal wait still open (the new job waits afresh), and the old job's
#: compensations and compensation state (a copied step keeps its ``compensate`` row).
NOT_COPIED = frozenset({"try", "wait", "compensated", "compensating", "compensation"})


class RerunAPI(Generic[JobT]):
    """Re-running a job of `model` from a recorded step (mixed into `JobQueue`)."""

    model: type[JobT]
    registry: Registry
    _columns: OwnColumns

    def rerun(self, session: Session | scoped_session[Any], job_id: int, *, from_step: str) -> JobT:
        """Enqueue a copy of job `job_id` that runs again from its recorded step `from_step`.

        The new job has the same kind, payload, queue, priority, concurrency_key and
        own columns, and the task's max_attempts (a kind not registered in this queue:
        the old row's, which each of its sleeps and waits raised by one). It is due
        now, and starts with the steps the old job recorded before `from_step` (with
        their results; also its finished sleeps and signal waits), so its handler skips
        them and runs `from_step` and every step after it. Copied rows have attempt 0.

        Not copied: idempotency and unique keys (the new job would be refused as a
        duplicate of the old one), ``after=`` dependencies, the old job's failed tries
        and open waits, its signals not taken. The old job is left as it is, whatever
        its status. Added to `session`'s transaction like `enqueue`; never commits.
        See docs/durable.md#re-run-from-a-step.

        Raises:
            ValidationError: `job_id` is not an int or names no job, `from_step` is not
                a str, or is not a step the job recorded, or was recorded at the same
                instant as another row (which came first is then unknown).
            ConfigurationError: `session` is not a `Session`.
        """
        check_sync_session(session, "rerun")
        job_id = check_job_id(job_id)
        if not isinstance(from_step, str):
            raise ValidationError(
                "from_step",
                from_step,
                f"must be a step's name (a str), not {type(from_step).__name__}",
            )
        if not from_step:
            raise ValidationError("from_step", from_step, "must be a step's name, not empty")
        plain = session() if isinstance(session, scoped_session) else session
        old = plain.get(self.model, job_id)
        if old is None and find_archived(plain, self.model, job_id) is not None:
            raise ValidationError(
                "job id",
                job_id,
                f"was moved to the archive of table {self.model.__tablename__!r}: a rerun"
                " copies a live job's rows only (re-run a job before it is archived)",
            )
        if old is None:
            raise ValidationError(
                "job id",
                job_id,
                f"is not a job of table {self.model.__tablename__!r}: nothing to re-run",
            )
        conn = plain.connection()
        names = copied_steps(
            job_id, conn.execute(steps_of(self.model), {"job_id": job_id}).all(), from_step
        )
        enqueue = cast("Any", self).enqueue
        new: JobT = enqueue(
            plain,
            old.kind,
            old.payload,
            queue=old.queue,
            priority=old.priority,
            # Each sleep or wait raised the row's max_attempts by one: the task's is
            # the enqueue's; a kind not registered here keeps the row's.
            max_attempts=None if self.registry.get(old.kind) else old.max_attempts,
            concurrency_key=old.concurrency_key,
            columns={name: getattr(old, name) for name in self._columns.columns} or None,
        )
        if names:
            conn.execute(
                statements.copy_steps(self.model),
                {"to_job": new.id, "from_job": job_id, "names": names},
            )
            conn.execute(statements.mark_has_steps(self.model), {"job_id": new.id})
            set_committed_value(new, "has_steps", True)
        return new


def copied_steps(job_id: int, rows: Sequence[Any], from_step: str) -> list[str]:
    """The names of the rows of `rows` (`steps_of`'s, in order) recorded before `from_step`.

    Raises:
        ValidationError: `from_step` is no ``step`` row of them, or another row to copy
            shares its ``recorded_at`` (a transactional handler's steps commit with one
            timestamp on PostgreSQL; SQLite keeps milliseconds).
    """
    # (job_id, name) is the table's key: one row at most has that name.
    at_step = next(
        (i for i, row in enumerate(rows) if row.name == from_step and row.kind == "step"), None
    )
    if at_step is None:
        recorded = ", ".join(repr(row.name) for row in rows if row.kind == "step") or "none"
        raise ValidationError(
            "from_step", from_step, f"is not a step job {job_id} recorded (its steps: {recorded})"
        )
    at = rows[at_step].recorded_at
    # A step's ``<step>#compensate`` row goes with its step (copied when the step is,
    # whenever it was recorded): it never makes a tie of its own.
    ordered = [r for r in rows if r.kind != "compensate"]
    tied = [
        r.name
        for r in ordered
        if r.recorded_at == at and r.name != from_step and r.kind not in NOT_COPIED
    ]
    if tied:
        raise ValidationError(
            "from_step",
            from_step,
            f"was recorded by job {job_id} at the same instant as {', '.join(map(repr, tied))}: "
            "which ran first is unknown, so is what to copy",
        )
    before = [r.name for r in rows[:at_step] if r.kind not in NOT_COPIED | {"compensate"}]
    names = {r.name for r in rows}
    undone = [name for name in before if f"{name}#compensated" in names]
    if undone:
        raise ValidationError(
            "from_step",
            from_step,
            f"comes after {', '.join(map(repr, undone))}, which job {job_id} compensated "
            f"(undone): re-run it from {undone[0]!r} or an earlier step",
        )
    return before + [f"{name}#compensate" for name in before if f"{name}#compensate" in names]
