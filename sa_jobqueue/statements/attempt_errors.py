"""The attempt history: written by the fenced failures themselves, read by the operators.

`with_history` wraps a fenced failure (``fail``, ``retry_later``, ``discard``,
``sweep_expired``) so that the same statement inserts one history row per attempt it
ended and trims the job's history to `HISTORY_LIMIT` rows: a stale worker's fence
matches no row, so it writes no history either. See docs/workers-registry.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Select, Table, Update, bindparam, delete, func, insert, select

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.registry_tables import HISTORY_LIMIT, errors_table_for
from sa_jobqueue.statements.common import ended_notify

__all__ = ["attempt_history", "with_history"]


def _errors(model: type[JobMixin]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return errors_table_for(table)


def with_history(
    model: type[JobMixin],
    fenced: Update,
    *,
    ended_channel: str | None = None,
    statuses: Sequence[str] | None = None,
) -> Select[Any]:
    """`fenced` (an UPDATE ... RETURNING that ends attempts) recording each in the history.

    One statement: the UPDATE runs in a CTE; an INSERT writes ``(job_id, attempt,
    worker, error)`` for each row it returned (``attempts``, ``locked_by`` and the
    ``last_error`` it wrote, so the message is cut as ``last_error`` is); a DELETE drops
    the job's entries beyond the newest ``HISTORY_LIMIT - 1`` it had, so with the new
    one at most `HISTORY_LIMIT` stay (only for jobs at ``HISTORY_LIMIT`` attempts or
    more: each attempt writes at most one entry, so a job below has fewer). Returns the
    columns `fenced` returned, by name. With `ended_channel`, the statement also sends
    the `statements.common.ended_notify` NOTIFY of the rows it ended (those in
    `statuses`, when given), as ``ended_notified``, exactly as
    `statements.common.notifying_ended` does.
    """
    errors = _errors(model)
    ended = fenced.returning(
        model.id.label("history_job_id"),
        model.attempts.label("history_attempt"),
        model.locked_by.label("history_worker"),
        model.last_error.label("history_error"),
    ).cte("ended")
    names = [column.key for column in ended.c if not column.key.startswith("history_")]
    recorded = insert(errors).from_select(
        ["job_id", "attempt", "worker", "error"],
        select(
            ended.c.history_job_id,
            ended.c.history_attempt,
            ended.c.history_worker,
            func.coalesce(ended.c.history_error, ""),
        ),
    )
    older = errors.alias("older")
    # The id of the newest entry that must go (None: fewer than HISTORY_LIMIT - 1 kept).
    cutoff = (
        select(older.c.id)
        .where(older.c.job_id == errors.c.job_id)
        .order_by(older.c.id.desc())
        .offset(HISTORY_LIMIT - 1)
        .limit(1)
        .scalar_subquery()
    )
    # A job has at most one entry per attempt, so one below HISTORY_LIMIT attempts has
    # nothing to trim: the DELETE looks at the history only past that many.
    full = select(ended.c.history_job_id).where(ended.c.history_attempt >= HISTORY_LIMIT)
    trimmed = delete(errors).where(errors.c.job_id.in_(full), errors.c.id <= cutoff)
    columns: list[Any] = [ended.c[name] for name in names]
    if ended_channel is not None:
        notified = ended_notify(ended_channel, ended, statuses=statuses)
        columns.append(notified.scalar_subquery().label("ended_notified"))
    return select(*columns).add_cte(recorded.cte("recorded"), trimmed.cte("trimmed"))


def attempt_history(model: type[JobMixin]) -> Select[Any]:
    """The history of ``:job_id``, oldest first: ``attempt, worker, error, failed_at``."""
    errors = _errors(model)
    return (
        select(errors.c.attempt, errors.c.worker, errors.c.error, errors.c.failed_at)
        .where(errors.c.job_id == bindparam("job_id", type_=BigInteger))
        .order_by(errors.c.id)
    )
