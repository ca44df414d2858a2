"""Flow control's statements: the per-kind lock, the limited claim, the limits' stats.

A limited kind's claim takes its transaction-scoped advisory lock (`lock_limited`, or
`complete_and_lock` with the round's acknowledgement), then counts and leases what fits
(`claim_limited`). Why this design, and its failure cases: docs/flow-control.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Executable,
    Float,
    Integer,
    Select,
    Text,
    Update,
    bindparam,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.postgres.counters import log_done, with_counted_columns
from sa_jobqueue.driver.postgres.fairness import claim_fair
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.naming import lock_name
from sa_jobqueue.statements.common import CLAIMED_COLUMNS, claimed_columns, ended_notify, seconds
from sa_jobqueue.statements.control import is_paused
from sa_jobqueue.statements.flow_stats import starts_of

__all__ = [
    "claim_limited",
    "complete_and_lock",
    "drop_start",
    "lock_limited",
    "log_start",
    "move_start",
    "rate_window_count",
]


def lock_limited(model: type[JobMixin], kind: str) -> Select[Any]:
    """``pg_advisory_xact_lock`` on `kind`'s limit: waits for other claimers of `kind`.

    Claim transactions are short (no handler runs inside one), so the wait is a
    claim's length. A claimer taking several kinds' locks takes them in sorted
    order, so two claimers never wait on each other in a circle.
    """
    key = func.hashtextextended(_limit_lock_name(model, kind), 0)
    return select(func.pg_advisory_xact_lock(key))


def complete_and_lock(
    model: type[JobMixin], complete: Update, *, ended: str | None = None
) -> Select[Any]:
    """`complete` (the acknowledgement), then the locks of the kinds in ``:lock_kinds``.

    One statement, so one round trip, for what a claim round runs first anyway and
    the kind locks its limited claims need (those of `lock_limited`, taken in the
    order of ``:lock_kinds``: sorted, as always). `complete` is an ``UPDATE ...
    RETURNING id, attempts, has_dependents``; it runs as a data-modifying CTE, which PostgreSQL
    always runs to completion, and the locks in a scalar subquery of an aggregate
    without ``GROUP BY``, which yields exactly one row, so they are taken whether or
    not any job was still held. Returns that row: ``locked`` (how many locks),
    ``ids`` and ``attempt_numbers`` (arrays of the jobs still held, NULL for none).

    A `claim_limited` after it, in the same transaction, starts after the locks were
    granted: its READ COMMITTED snapshot sees every claim of the lock's previous
    holders, as after `lock_limited`.

    With `ended` (the table's ended channel), the row also has ``ended_notified``:
    one ``pg_notify`` of the done jobs' ids (`statements.common.ended_notify`).
    """
    done = with_counted_columns(model, complete).cte("done")
    kinds = (
        func.unnest(bindparam("lock_kinds", type_=ARRAY(Text)))
        .table_valued("kind")
        .render_derived(name="locking")
    )
    key = func.hashtextextended(literal(_limit_lock_name(model, ""), Text) + kinds.c.kind, 0)
    locked = select(func.count(func.pg_advisory_xact_lock(key))).select_from(kinds)
    columns: list[Any] = [
        locked.scalar_subquery().label("locked"),
        func.array_agg(done.c.id).label("ids"),
        func.array_agg(done.c.attempts).label("attempt_numbers"),
        # The jobs that others wait for (`workflows.release_dependents`), NULL for none.
        func.array_agg(done.c.id).filter(done.c.has_dependents).label("upstream_ids"),
    ]
    if ended is not None:
        columns.append(ended_notify(ended, done).scalar_subquery().label("ended_notified"))
    # The jobs done are counted in the same statement (`counters.log_done`).
    return select(*columns).select_from(done).add_cte(log_done(model, done))


def _limit_lock_name(model: type[JobMixin], kind: str) -> str:
    return lock_name(model.__tablename__, f"limit:{kind}")


def claim_limited(model: type[JobMixin], *, kind: str, limits: Limits, lease: float) -> Executable:
    """Lease up to ``:limit`` due pending `kind` jobs of ``:queue_name``, within `limits`.

    The jobs go to ``:owner``. Run it after `lock_limited` (or `complete_and_lock`),
    in the same transaction.

    * ``max_running``: leases at most ``max_running - running`` (running jobs of the
      kind in any queue, leased by any worker; an expired lease still counts until
      the sweeper takes the job back).
    * ``max_running_per_key``: of each ``concurrency_key``, leases at most
      ``N - running of that key``, in claim order within the key; jobs without a key
      are not limited by it. A key at its limit is passed over, so the jobs of
      other keys behind it still run (no head-of-line blocking).
    * ``rate_limit``: leases at most ``count - starts in the last window`` and logs
      one start per leased job (``clock_timestamp()``, read after the lock was
      granted), pruning the kind's starts that left the window.

    Rows locked by another transaction are skipped, never waited on. Returns the
    leased jobs' `CLAIMED_COLUMNS`.

    A kind declared ``fair=True`` is claimed by turns instead
    (`sa_jobqueue.statements.fairness.claim_fair`).
    """
    if limits.fair:
        return claim_fair(model, kind=kind, limits=limits, lease=lease)
    queue_name = bindparam("queue_name", type_=Text)
    pending = [
        model.status == Status.PENDING.value,
        model.queue == queue_name,
        model.kind == literal(kind, Text),
        model.run_at <= func.now(),
        # A paused queue yields nothing, limited or not (as in `claim`).
        ~is_paused(model, queue_name),
    ]
    limit = bindparam("limit", type_=Integer)
    room: list[ColumnElement[Any]] = []
    running_of_kind = [model.status == Status.RUNNING.value, model.kind == literal(kind, Text)]
    if limits.max_running is not None:
        running = select(func.count()).where(*running_of_kind).scalar_subquery()
        room.append(literal(limits.max_running, Integer) - running)
    starts = starts_of(model)
    clock: Any = None
    window: ColumnElement[Any] | None = None
    if limits.rate_count is not None:
        clock = select(func.clock_timestamp().label("t")).cte("clock")
        window = seconds(literal(float(limits.rate_window or 0), Float))
        recent = (
            select(func.count())
            .where(starts.c.kind == literal(kind, Text))
            .where(starts.c.started_at > select(clock.c.t).scalar_subquery() - window)
            .scalar_subquery()
        )
        room.append(literal(limits.rate_count, Integer) - recent)
    order = (model.priority, model.run_at, model.id)

    # The rows are locked with the plain ``LIMIT :limit``, which the planner can
    # estimate (a LIMIT computed by a subquery it guesses as 10 % of the table,
    # and then joins the UPDATE by scanning every row); the room the limits leave
    # is applied to the locked rows afterwards. Locked rows left over stay locked
    # until COMMIT, which costs nobody: every claimer of the kind waits on its lock.
    candidates = select(model.id, model.priority, model.run_at).where(*pending)
    if limits.max_running_per_key is not None:
        busy = (
            select(model.concurrency_key.label("key"), func.count().label("n"))
            .where(*running_of_kind, model.concurrency_key.is_not(None))
            .group_by(model.concurrency_key)
            .cte("busy")
        )
        ranked = (
            select(
                model.id,
                model.concurrency_key.label("key"),
                (
                    func.row_number().over(partition_by=model.concurrency_key, order_by=order)
                    + func.coalesce(busy.c.n, 0)
                ).label("slot"),
            )
            .outerjoin(busy, busy.c.key == model.concurrency_key)
            .where(*pending)
            .cte("ranked")
        )
        fitting = (
            select(ranked.c.id)
            .where(
                or_(
                    ranked.c.key.is_(None),
                    ranked.c.slot <= literal(limits.max_running_per_key, Integer),
                )
            )
            .subquery("fitting")
        )
        # The window function cannot sit beside FOR UPDATE: lock in the outer query,
        # which re-checks the status of a row changed since the snapshot. A join, not
        # ``id IN (...)``, which PostgreSQL may run as a nested loop over both sets.
        candidates = candidates.join(fitting, fitting.c.id == model.id)
    locked = (
        candidates.order_by(*order)
        .limit(limit)
        .with_for_update(of=model, skip_locked=True)
        .cte("locked")
    )
    if room:
        # LIMIT takes no negative count: a limit overrun (lowered while jobs ran) is 0.
        fits = func.greatest(func.least(*room), 0) if len(room) > 1 else func.greatest(room[0], 0)
        due = (
            select(locked.c.id)
            .order_by(locked.c.priority, locked.c.run_at, locked.c.id)
            .limit(fits)
            .cte("due")
        )
    else:
        due = select(locked.c.id).cte("due")

    leased = {
        model.status: Status.RUNNING.value,
        model.attempts: model.attempts + 1,
        model.locked_by: bindparam("owner", type_=Text),
        model.locked_until: func.now() + seconds(literal(float(lease), Float)),
        model.updated_at: func.now(),
    }
    returned = claimed_columns(model)
    claimed = update(model).where(model.id == due.c.id).values(leased).returning(*returned)
    if clock is None or window is None:
        return claimed
    claimed_cte = claimed.cte("claimed")
    now = select(clock.c.t).scalar_subquery()
    logged = insert(starts).from_select(["kind", "started_at"], select(claimed_cte.c.kind, now))
    pruned = delete(starts).where(
        starts.c.kind == literal(kind, Text),
        starts.c.started_at <= now - window,
    )
    # ``rate_stamp``: the stamp each leased job holds in the log until it starts
    # (`rate_window_count` and `move_start`, at the start).
    return (
        select(*(claimed_cte.c[name] for name in CLAIMED_COLUMNS), now.label("rate_stamp"))
        .add_cte(logged.cte("logged"))
        .add_cte(pruned.cte("pruned"))
    )


# -- a rate-limited job's start: its claim's stamp moves to the moment it starts ----------
#
# A claim logs one stamp per job it leases, at the claim; the handler starts later (a
# batch, a loaded machine). At the start, under the kind's lock (`lock_limited`), the
# worker counts the stamps of the window ending now without its own (`rate_window_count`),
# and moves its stamp to now when that leaves room (`move_start`, or `log_start` when it
# left the window and was pruned), or drops it and does not start (`drop_start`). So
# the log holds each start at the time it started (docs/flow-control.md).

_CTID: ColumnElement[Any] = literal_column("ctid")


def rate_window_count(model: type[JobMixin], *, kind: str, window: float) -> Select[Any]:
    """``recent``: `kind`'s stamps in the window that ends now; ``now``: ``clock_timestamp()``."""
    starts = starts_of(model)
    clock = select(func.clock_timestamp().label("t")).cte("clock")
    now = select(clock.c.t).scalar_subquery()
    recent = (
        select(func.count())
        .where(starts.c.kind == literal(kind, Text))
        .where(starts.c.started_at > now - seconds(literal(float(window), Float)))
        .scalar_subquery()
    )
    return select(recent.label("recent"), now.label("now"))


def _one_stamp(model: type[JobMixin], kind: str) -> Any:
    """The ``ctid`` of one of `kind`'s stamps equal to ``:stamp`` (equal stamps are alike)."""
    starts = starts_of(model)
    return (
        select(_CTID)
        .select_from(starts)
        .where(starts.c.kind == literal(kind, Text))
        .where(starts.c.started_at == bindparam("stamp", type_=DateTime(timezone=True)))
        .limit(1)
        .scalar_subquery()
    )


def move_start(model: type[JobMixin], *, kind: str) -> Update:
    """Move one of `kind`'s stamps ``:stamp`` to ``:now``; returns a row if one was there."""
    starts = starts_of(model)
    return (
        update(starts)
        .where(_CTID.op("=")(_one_stamp(model, kind)))
        .values(started_at=bindparam("now", type_=DateTime(timezone=True)))
        .returning(starts.c.kind)
    )


def log_start(model: type[JobMixin], *, kind: str) -> Executable:
    """Log a start of `kind` at ``:now`` (its claim's stamp had left the window)."""
    return insert(starts_of(model)).values(
        kind=literal(kind, Text), started_at=bindparam("now", type_=DateTime(timezone=True))
    )


def drop_start(model: type[JobMixin], *, kind: str) -> Executable:
    """Delete one of `kind`'s stamps ``:stamp``: its job does not start now."""
    starts = starts_of(model)
    return delete(starts).where(_CTID.op("=")(_one_stamp(model, kind)))
