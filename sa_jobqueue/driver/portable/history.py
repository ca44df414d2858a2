"""`AttemptHistory`: the attempt history in portable statements, written after a fenced end.

PostgreSQL writes a job's history entry in the statement of its fenced failure
(`statements.attempt_errors.with_history`); here it is the statement after it, in the
same transaction, copied from the row as the failure left it (``attempts``,
``locked_by``, ``last_error``), so only attempts that ended write one. The entry's
``id`` is the job's next one (its largest plus one): SQLite cannot number the second
column of a composite key, and the job's row, locked by the failure, serialises every
writer of its history. At most `HISTORY_LIMIT` entries per job are kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Table, and_, bindparam, delete, func, insert, or_, select

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.registry_tables import HISTORY_LIMIT, errors_table_for

__all__ = ["AttemptHistory"]


class AttemptHistory:
    """The history writes of one jobs model, built once.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        table = model.__table__
        assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
        errors = errors_table_for(table)
        older = errors.alias("older")
        following = (
            select(func.coalesce(func.max(older.c.id), 0) + 1)
            .where(older.c.job_id == model.id)
            .scalar_subquery()
        )
        self._record = insert(errors).from_select(
            ["job_id", "id", "attempt", "worker", "error"],
            select(
                model.id,
                following,
                model.attempts,
                model.locked_by,
                func.coalesce(model.last_error, ""),
            ).where(model.id.in_(bindparam("ids", expanding=True))),
        )
        self._newest = (
            select(errors.c.job_id, func.max(errors.c.id))
            .where(errors.c.job_id.in_(bindparam("ids", expanding=True)))
            .group_by(errors.c.job_id)
        )
        self._errors = errors

    def record(self, conn: Connection, ended: Sequence[tuple[int, int]]) -> None:
        """Write one entry for each ``(id, attempts)`` of `ended`, whose rows just ended it.

        Run it after the fenced statement that ended them, in its transaction; it
        then trims the history of jobs at `HISTORY_LIMIT` attempts or more (a job has
        at most one entry per attempt: one below that has nothing to trim).
        """
        if not ended:
            return
        conn.execute(self._record, {"ids": [job_id for job_id, _ in ended]})
        full = [job_id for job_id, attempts in ended if attempts >= HISTORY_LIMIT]
        if full:
            self._trim(conn, full)

    def _trim(self, conn: Connection, ids: Sequence[int]) -> None:
        """Drop the entries of `ids` but their newest `HISTORY_LIMIT`.

        `record` numbers a job's entries one by one, so those to keep are the ids
        above the job's largest minus `HISTORY_LIMIT`.
        """
        errors = self._errors
        newest = conn.execute(self._newest, {"ids": list(ids)}).all()
        old = [
            and_(errors.c.job_id == job_id, errors.c.id <= top - HISTORY_LIMIT)
            for job_id, top in newest
            if top > HISTORY_LIMIT
        ]
        if old:
            conn.execute(delete(errors).where(or_(*old)))
