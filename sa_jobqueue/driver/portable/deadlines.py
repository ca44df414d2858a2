"""`PortableDeadlines`: the jobs of a kind past its task's deadline, ended ``failed``.

A `FencedUpdate`: locks the jobs past the deadline (skipping locked rows where the
database can; SQLite's writers take turns), then ends them. See
`sa_jobqueue.driver.protocol.deadlines` and docs/durable.md ("Deadlines").
"""

from __future__ import annotations

from functools import cached_property

from sqlalchemy import Connection, Float, Text, bindparam, literal_column, null, or_

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.fenced import FencedUpdate
from sa_jobqueue.driver.protocol.deadlines import DEADLINE_STATUSES, DeadlinePass, compensating
from sa_jobqueue.schema.model import Status

__all__ = ["PortableDeadlines"]


class PortableDeadlines(PortableBase):
    """DeadlineOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def jobs_fail_past_deadline(self, conn: Connection, params: DeadlinePass) -> list[int]:
        """End up to ``params.limit`` pending or running jobs past the deadline; their ids."""
        values = {
            "deadline_kind": params.kind,
            "deadline_seconds": params.seconds,
            "limit": params.limit,
            "deadline_error": params.error,
        }
        return [row.id for row in self._deadline_fail.run(conn, values)]

    @cached_property
    def _deadline_fail(self) -> FencedUpdate:
        model = self.model
        now = self.sql.now()
        created = self.sql.plus_seconds(
            model.__table__.c.created_at, bindparam("deadline_seconds", type_=Float)
        )
        past = [
            model.kind == bindparam("deadline_kind", type_=Text),
            # Statuses written into the SQL: SQLite then proves its partial indexes'
            # predicates (ix_pending, ix_running) and reads only such jobs.
            or_(*(model.status == literal_column(f"'{s.value}'", Text) for s in DEADLINE_STATUSES)),
            created <= now,
            ~compensating(model),
        ]
        values = {
            "status": Status.FAILED.value,
            "finished_at": now,
            "updated_at": now,
            "locked_until": null(),
            "last_error": bindparam("deadline_error", type_=Text),
        }
        return FencedUpdate(
            model,
            self.sql,
            past,
            values,
            (model.id,),
            skip_locked=True,
            order_by=(model.created_at,),
            limit=True,
        )
