"""`ChildStatements`: the `ChildOps` family in statements every database runs as they are.

Two short statements, a read and a fenced UPDATE, written once for PostgreSQL, SQLite and
MariaDB/MySQL alike (`PortableChildren` and `PostgresDriver` run them). See
`sa_jobqueue.driver.protocol.children` and docs/durable.md ("Child jobs").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Connection, Integer, Select, Update, bindparam, select, update

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.protocol.children import ChildState
from sa_jobqueue.driver.protocol.steps import StepFence
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements.common import fence

__all__ = ["ChildStatements", "PortableChildren"]


class ChildStatements:
    """`ChildOps` for one jobs model; its two statements are built once.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        job = bindparam("child_job", type_=BigInteger)
        self._state: Select[Any] = select(model.status, model.result, model.last_error).where(
            model.id == job
        )
        fenced = fence(
            model,
            bindparam("fence_job", type_=BigInteger),
            bindparam("fence_attempt", type_=Integer),
        )
        self._await: Update = update(model).where(*fenced).values(waiting_for=1)

    def job_child_state(self, conn: Connection, job_id: int) -> ChildState | None:
        """`ChildOps.job_child_state`: one read by primary key."""
        row = conn.execute(self._state, {"child_job": job_id}).first()
        return None if row is None else ChildState(str(row.status), row.result, row.last_error)

    def job_await_child(self, conn: Connection, fence: StepFence) -> bool:
        """`ChildOps.job_await_child`: one fenced UPDATE."""
        values = {"fence_job": fence.job_id, "fence_attempt": fence.attempt, "owner": fence.owner}
        return conn.execute(self._await, values).rowcount == 1


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

    def job_await_child(self, conn: Connection, fence: StepFence) -> bool:
        """`ChildStatements.job_await_child`."""
        return self._child_statements().job_await_child(conn, fence)
