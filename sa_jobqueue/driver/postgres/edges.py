"""The enqueue side of workflows: lock upstream jobs, insert edges, grow a batch.

A job enqueued ``after=[...]`` locks its upstream jobs first (`lock_upstream`), is
inserted ``waiting`` (`sa_jobqueue.driver.postgres.inserts`), then gets one edge per
upstream job (`insert_edges`); a batch's callback waits for its members
(`add_to_batch`). The release at an upstream job's end is
`sa_jobqueue.statements.workflows.release_dependents`. See docs/workflows.md.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    Update,
    bindparam,
    case,
    func,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.common import unnest_rows
from sa_jobqueue.statements.workflows import edges_of

__all__ = ["add_to_batch", "batch_members_among", "insert_edges", "lock_upstream"]


def lock_upstream(model: type[JobMixin]) -> Update:
    """Lock the jobs in ``:upstream_ids`` and mark them ``has_dependents``; return ``(id, status)``.

    The row lock is what makes a release impossible to lose: an upstream job's
    fenced end (an UPDATE of the same row) waits for the enqueuing transaction to
    commit, and the release that follows it in the worker's transaction is a later
    statement, whose snapshot then sees the new edges. An upstream job that ended
    before the lock is returned with its final status, so the new job counts it as
    ended. ``id = ANY(...)`` walks the primary key in id order, so two enqueues lock
    shared upstream jobs in one order. Ids that match no row are missing from the
    result (the caller names them in its error).
    """
    ids = bindparam("upstream_ids", type_=ARRAY(BigInteger))
    return (
        update(model)
        .where(model.id == func.any(ids))
        .values(has_dependents=true())
        .returning(model.id, model.status)
    )


def insert_edges(model: type[JobMixin]) -> PgInsert:
    """Insert the edges ``(:job_ids[i], :edge_upstream_ids[i])`` (job i waits for upstream i)."""
    edges = edges_of(model)
    batch = unnest_rows(
        ("job_ids", "job_id", BigInteger), ("edge_upstream_ids", "upstream", BigInteger)
    )
    rows = select(batch.c.job_id, batch.c.upstream)
    return pg_insert(edges).from_select(["job_id", "upstream_id"], rows)


def add_to_batch(model: type[JobMixin]) -> Update:
    """Make batch callback ``:batch_id`` wait for ``:added`` more jobs; return its id.

    The callback is inserted ``pending`` by ``jobs.batch`` (an empty batch's callback
    runs at once) and becomes ``waiting`` as jobs join, in the same transaction. It
    matches only while the callback has not started, so a batch whose transaction
    has committed and whose callback ran cannot grow.
    """
    waiting = func.coalesce(model.waiting_for, 0) + bindparam("added", type_=Integer)
    return (
        update(model)
        .where(
            model.id == bindparam("batch_id", type_=BigInteger),
            model.status.in_([Status.PENDING.value, Status.WAITING.value]),
            model.attempts == 0,
        )
        .values(
            # Waiting while a member has not ended (members that joined already ended,
            # cancelled at birth, are not counted: with none left it stays due).
            status=case((waiting > 0, Status.WAITING.value), else_=model.status),
            waiting_for=waiting,
            after_failure="run",
            updated_at=func.now(),
        )
        .returning(model.id)
    )


def batch_members_among(model: type[JobMixin]) -> Select[int]:
    """Of the jobs ``:member_ids``, those that batch ``:batch_id`` has as members already."""
    edges = edges_of(model)
    return select(edges.c.upstream_id).where(
        edges.c.job_id == bindparam("batch_id", type_=BigInteger),
        edges.c.upstream_id == func.any(bindparam("member_ids", type_=ARRAY(BigInteger))),
    )
