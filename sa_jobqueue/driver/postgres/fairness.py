"""Fair claims: a fair kind's claim takes turns between ``concurrency_key`` values.

`claim_fair` is what `claim_limited` runs for a kind declared with ``fair=True``,
after the kind's advisory lock (so fair claims of one kind, over every worker, run
one after another and see each other's leases). Each due job gets a *turn* by
stride scheduling (the turns table remembers where each key stands, so turns
survive between claims, workers and crashes); the claim leases the lowest turns
first. So every key with due jobs gets its next job leased before any key gets two
more (weight 1), and a key of weight 3 gets three per round.
Policy, guarantees and cost: docs/flow-control.md ("Fair claims").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Select,
    Table,
    Text,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import aliased

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.state_tables import turns_table_for
from sa_jobqueue.statements.common import CLAIMED_COLUMNS, seconds
from sa_jobqueue.statements.control import is_paused
from sa_jobqueue.statements.fair_weights import weights_of

__all__ = ["UNKEYED_WINDOW", "claim_fair"]

#: How many of a queue's first due jobs a fair claim looks through for jobs of the kind
#: that have no ``concurrency_key`` (which `enqueue` refuses for a fair kind).
UNKEYED_WINDOW = 1000


def _weights(model: type[JobMixin]) -> Table:
    return weights_of(model)


def _turns(model: type[JobMixin]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return turns_table_for(table)


def claim_fair(model: type[JobMixin], *, kind: str, limits: Limits, lease: float) -> Select[Any]:
    """Lease up to ``:limit`` due pending `kind` jobs of ``:queue_name`` to ``:owner``, by turns.

    Run it after `lock_limited` (or `complete_and_lock`), in the same transaction:
    the kind's lock makes the turns table consistent across workers.

    Stride scheduling over the keys with due jobs (jobs without a key are the key
    ``''``): a key stands at its stored ``pass`` (at least ``base``, the lowest
    ``pass`` stored), or, new to the turns, one turn before ``base``; its i-th due
    job's turn is ``stand + (i - 1) / weight``. The lowest turns are leased, ties
    going first to new keys, then in claim order; each served key's ``pass`` moves to
    its last leased turn plus ``1 / weight``, and a key with no due job left loses
    its row (back later, it is new again: a key that was away earns no credit).
    So keys take turns (weight 1: one job each per round, whoever
    enqueued first), a key of weight 3 gets three jobs per round, and one key's
    backlog delays no other key by more than a round. ``max_running`` and
    ``max_running_per_key`` hold as in `claim_limited`. Returns the leased jobs'
    `CLAIMED_COLUMNS`.
    """
    queue_name = bindparam("queue_name", type_=Text)
    pending = [
        # 'pending' written into the SQL, as in `claims.claim`: a generic plan can then
        # prove the partial indexes' predicate.
        model.status == literal_column(f"'{Status.PENDING.value}'", Text),
        model.queue == queue_name,
        model.kind == literal(kind, Text),
        model.run_at <= func.now(),
        ~is_paused(model, queue_name),
    ]
    running_of_kind = [model.status == Status.RUNNING.value, model.kind == literal(kind, Text)]
    weights, turns = _weights(model), _turns(model)
    order = (model.priority, model.run_at, model.id)
    limit = bindparam("limit", type_=Integer)
    of_kind = [
        model.status == literal_column(f"'{Status.PENDING.value}'", Text),
        model.queue == queue_name,
        model.kind == literal(kind, Text),
    ]
    # The keys with pending jobs, one index probe each (a "loose index scan" of
    # ix_<table>_keyed), instead of reading every pending job of the kind.
    first = (
        select(model.concurrency_key.label("key"))
        .where(*of_kind, model.concurrency_key.is_not(None))
        .order_by(model.concurrency_key)
        .limit(1)
    )
    walk = first.cte("walk", recursive=True)
    step = aliased(model, name="step")
    following = (
        select(step.concurrency_key)
        .where(
            step.status == literal_column(f"'{Status.PENDING.value}'", Text),
            step.queue == queue_name,
            step.kind == literal(kind, Text),
            step.concurrency_key > walk.c.key,
        )
        .order_by(step.concurrency_key)
        .limit(1)
        .scalar_subquery()
    )
    walk = walk.union_all(select(following).where(walk.c.key.is_not(None)))
    # Each key's first `:limit` due jobs in claim order (no claim leases more).
    head = (
        select(
            model.id,
            model.priority,
            model.run_at,
            func.row_number().over(order_by=order).label("rank"),
        )
        .where(*pending, model.concurrency_key == walk.c.key)
        .order_by(*order)
        .limit(limit)
        .lateral("head")
    )
    keyed = (
        select(walk.c.key, head.c.id, head.c.priority, head.c.run_at, head.c.rank)
        .select_from(walk)
        .join(head, literal(True))
        .where(walk.c.key.is_not(None))
    )
    # Jobs without a key (enqueue refuses them for a fair kind; raw SQL may not) are
    # one more key, looked for among the queue's first due jobs only (the keyed index
    # does not hold them): `UNKEYED_WINDOW`.
    window = (
        select(model.id, model.priority, model.run_at, model.kind, model.concurrency_key)
        .where(
            model.status == literal_column(f"'{Status.PENDING.value}'", Text),
            model.queue == queue_name,
            model.run_at <= func.now(),
        )
        .order_by(*order)
        .limit(UNKEYED_WINDOW)
        .subquery("window")
    )
    unkeyed = (
        select(
            literal("", Text).label("key"),
            window.c.id,
            window.c.priority,
            window.c.run_at,
            func.row_number()
            .over(order_by=(window.c.priority, window.c.run_at, window.c.id))
            .label("rank"),
        )
        .where(window.c.kind == literal(kind, Text), window.c.concurrency_key.is_(None))
        .where(~is_paused(model, queue_name))
    )
    ranked = keyed.union_all(unkeyed).cte("ranked")
    keys = select(ranked.c.key).distinct().cte("keys")
    state = (
        select(
            keys.c.key,
            turns.c["pass"].label("pass"),
            cast(func.coalesce(weights.c.weight, 1), Float).label("weight"),
        )
        .select_from(keys)
        .outerjoin(turns, (turns.c.kind == literal(kind, Text)) & (turns.c.key == keys.c.key))
        .outerjoin(weights, weights.c.key == keys.c.key)
        .cte("state")
    )
    base = select(func.coalesce(func.min(state.c["pass"]), 0.0).label("v")).cte("base")
    # A key new to the turns (or back after it had no due job) stands one turn before
    # the others: its first job goes next, and it earns no more credit than that.
    stand = case(
        (state.c["pass"].is_(None), base.c.v - 1.0 / state.c.weight),
        else_=func.greatest(state.c["pass"], base.c.v),
    )
    slot: Any = ranked.c.rank
    candidates = (
        select(
            ranked.c.id,
            ranked.c.key,
            ranked.c.priority,
            ranked.c.run_at,
            state.c.weight,
            state.c["pass"].is_(None).label("new"),
            (stand + (ranked.c.rank - 1) / state.c.weight).label("turn"),
        )
        .select_from(ranked)
        .join(state, state.c.key == ranked.c.key)
        .join(base, literal(True))
    )
    if limits.max_running_per_key is not None:
        busy = (
            select(model.concurrency_key.label("key"), func.count().label("n"))
            .where(*running_of_kind, model.concurrency_key.is_not(None))
            .group_by(model.concurrency_key)
            .cte("busy")
        )
        slot = ranked.c.rank + func.coalesce(busy.c.n, 0)
        cap = literal(limits.max_running_per_key, Integer)
        candidates = candidates.outerjoin(busy, busy.c.key == ranked.c.key).where(
            or_(ranked.c.key == literal("", Text), slot <= cap)
        )
    fit = candidates.cte("fitting")
    by_turn = (fit.c.turn, fit.c.new.desc(), fit.c.priority, fit.c.run_at, fit.c.id)
    chosen = (
        select(
            fit.c.id, fit.c.key, fit.c.turn, fit.c.weight, fit.c.new, fit.c.priority, fit.c.run_at
        )
        .order_by(*by_turn)
        .limit(limit)
        .cte("chosen")
    )
    # Lock the chosen rows by primary key (``id = ANY(ARRAY(...))``: never a hash join
    # over a scan of the table), re-checking that each is still pending; one locked
    # elsewhere is skipped (claims of the kind take its lock, so that is rare).
    ids = func.array(select(chosen.c.id).scalar_subquery())
    locked = (
        select(model.id)
        .where(model.id == func.any(ids))
        .where(model.status == literal_column(f"'{Status.PENDING.value}'", Text))
        .with_for_update(skip_locked=True)
        .cte("locked")
    )
    due: Any = select(chosen.c.id, chosen.c.key, chosen.c.turn, chosen.c.weight).join(
        locked, locked.c.id == chosen.c.id
    )
    if limits.max_running is not None:
        running = select(func.count()).where(*running_of_kind).scalar_subquery()
        room = func.greatest(literal(limits.max_running, Integer) - running, 0)
        due = due.order_by(
            chosen.c.turn, chosen.c.new.desc(), chosen.c.priority, chosen.c.run_at, chosen.c.id
        ).limit(room)
    due = due.cte("due")
    leased = {
        model.status: Status.RUNNING.value,
        model.attempts: model.attempts + 1,
        model.locked_by: bindparam("owner", type_=Text),
        model.locked_until: func.now() + seconds(literal(float(lease), Float)),
        model.updated_at: func.now(),
    }
    returned = [getattr(model, name) for name in CLAIMED_COLUMNS]
    claimed = (
        update(model).where(model.id == due.c.id).values(leased).returning(*returned).cte("claimed")
    )
    served = select(
        literal(kind, Text).label("kind"),
        due.c.key,
        (func.max(due.c.turn) + 1.0 / func.max(due.c.weight)).label("pass"),
    ).group_by(due.c.key)
    moved = pg_insert(turns).from_select(["kind", "key", "pass"], served)
    moved = moved.on_conflict_do_update(
        index_elements=[turns.c.kind, turns.c.key], set_={"pass": moved.excluded["pass"]}
    )
    # A key with no due job forgets its place: back later, it stands as a new key.
    forgotten = delete(turns).where(
        turns.c.kind == literal(kind, Text), turns.c.key.not_in(select(keys.c.key))
    )
    return (
        select(*(claimed.c[name] for name in CLAIMED_COLUMNS))
        .add_cte(moved.cte("moved"))
        .add_cte(forgotten.cte("forgotten"))
    )
