"""`Deadlines`: the jobs of a kind past its task's deadline, ended ``failed`` (PostgreSQL).

See `sa_jobqueue.driver.protocol.deadlines` and docs/durable.md ("Deadlines").
"""

from __future__ import annotations

from functools import cached_property

from sqlalchemy import (
    Connection,
    Float,
    Integer,
    Text,
    Update,
    bindparam,
    func,
    literal_column,
    or_,
    select,
    update,
)

from sa_jobqueue.driver.protocol.deadlines import DEADLINE_STATUSES, DeadlinePass, compensating
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.common import seconds

__all__ = ["Deadlines", "fail_past_deadline"]


def fail_past_deadline(model: type[JobMixin]) -> Update:
    """End ``failed`` up to ``:limit`` jobs of ``:deadline_kind`` past ``:seconds``.

    Pending or running ones (`DEADLINE_STATUSES`) not compensating, the oldest first; rows another
    transaction holds are skipped, never waited for.
    Returns their ids.
    """
    now = func.now()
    past = (
        select(model.id)
        .where(
            model.kind == bindparam("deadline_kind", type_=Text),
            # An OR of statuses written into the SQL, not bound nor IN: each arm then
            # proves a partial index's predicate (ix_pending, ix_running), in a generic
            # plan too, so the sweep reads only such jobs, never the finished ones.
            or_(*(model.status == literal_column(f"'{s.value}'", Text) for s in DEADLINE_STATUSES)),
            model.created_at <= now - seconds(bindparam("seconds", type_=Float)),
            ~compensating(model),
        )
        .order_by(model.created_at)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    ended = {
        "status": Status.FAILED.value,
        "finished_at": now,
        "updated_at": now,
        "locked_until": None,
        "last_error": bindparam("error", type_=Text),
    }
    return update(model).where(model.id.in_(past)).values(ended).returning(model.id)


class Deadlines:
    """`DeadlineOps` for one jobs model; its statement is built once, when first run.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self._model = model

    @cached_property
    def _fail(self) -> Update:
        return fail_past_deadline(self._model)

    def jobs_fail_past_deadline(self, conn: Connection, params: DeadlinePass) -> list[int]:
        """`fail_past_deadline`."""
        values = {
            "deadline_kind": params.kind,
            "seconds": params.seconds,
            "limit": params.limit,
            "error": params.error,
        }
        return list(conn.execute(self._fail, values).scalars())
