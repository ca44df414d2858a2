"""`AttemptHistory`: the attempt history in portable statements, written after a fenced end.

PostgreSQL writes a job's history entry in the statement of its fenced failure
(`statements.attempt_errors.with_history`); here it is the statement after it, in the
same transaction, copied from the rows as the failure left them (``attempts``,
``locked_by``, ``last_error``), so only attempts that ended write one. At most
`HISTORY_LIMIT` entries per job are kept.

An entry's ``id`` is its attempt number. SQLite cannot number the second column of a
composite key, and reading the job's largest id first would, on MariaDB, take gap
locks on the history's index that two failures of neighbouring jobs then wait for in a
circle; the attempt number needs no read. It is unique per job: an attempt ends once
(the fence), only a fenced end writes an entry, and ``attempts`` never decreases. So
ids still order a job's entries, as PostgreSQL's do. Any other writer of the history
on these databases must number its entries the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
)

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
        self._record = insert(errors).from_select(
            ["job_id", "id", "attempt", "worker", "error"],
            select(
                model.id,
                model.attempts,
                model.attempts,
                model.locked_by,
                func.coalesce(model.last_error, ""),
            ).where(model.id.in_(bindparam("ids", expanding=True))),
        )
        job_id = bindparam("job_id", type_=BigInteger)
        # The newest id that goes: the first one past the HISTORY_LIMIT newest.
        self._cutoff = (
            select(errors.c.id)
            .where(errors.c.job_id == job_id)
            .order_by(errors.c.id.desc())
            .offset(HISTORY_LIMIT)
            .limit(1)
        )
        cutoff = bindparam("cutoff", type_=Integer)
        self._trim = delete(errors).where(and_(errors.c.job_id == job_id, errors.c.id <= cutoff))

    def record(self, conn: Connection, ended: Sequence[tuple[int, int]]) -> None:
        """Write one entry for each ``(id, attempts)`` of `ended`, whose rows just ended it.

        Run it after the fenced statement that ended them, in its transaction. Then
        trims the history of jobs past `HISTORY_LIMIT` attempts (a job has at most
        one entry per attempt: one with fewer has nothing to trim).
        """
        if not ended:
            return
        conn.execute(self._record, {"ids": [job_id for job_id, _ in ended]})
        for job_id, attempts in ended:
            if attempts > HISTORY_LIMIT:
                cutoff = conn.execute(self._cutoff, {"job_id": job_id}).scalar()
                if cutoff is not None:
                    conn.execute(self._trim, {"job_id": job_id, "cutoff": cutoff})
