"""`ChildStatements`: the `ChildOps` family in a statement every database runs as it is.

One read by primary key, written once for PostgreSQL, SQLite and MariaDB/MySQL alike
(`PortableChildren` and `PostgresDriver` run it). See
`sa_jobqueue.driver.protocol.children` and docs/durable.md ("Child jobs").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Connection, Select, bindparam, select

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.protocol.children import ChildState
from sa_jobqueue.schema.model import JobMixin

__all__ = ["ChildStatements", "PortableChildren"]


class ChildStatements:
    """`ChildOps` for one jobs model; its statement is built once.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        job = bindparam("child_job", type_=BigInteger)
        self._state: Select[Any] = select(model.status, model.result, model.last_error).where(
            model.id == job
        )

    def job_child_state(self, conn: Connection, job_id: int) -> ChildState | None:
        """`ChildOps.job_child_state`: one read by primary key."""
        row = conn.execute(self._state, {"child_job": job_id}).first()
        return None if row is None else ChildState(str(row.status), row.result, row.last_error)


class PortableChildren(PortableBase):
    """ChildOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    _children: ChildStatements | None = None

    def _child_statements(self) -> ChildStatements:
        if self._children is None:
            self._children = ChildStatements(self.model)
        return self._children

    def job_child_state(self, conn: Connection, job_id: int) -> ChildState | None:
        """`ChildStatements.job_child_state`."""
        return self._child_statements().job_child_state(conn, job_id)
