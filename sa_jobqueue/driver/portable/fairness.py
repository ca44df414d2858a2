"""Fair claims in portable SQL: a fair kind's claim takes turns between ``concurrency_key`` values.

The policy of PostgreSQL's `sa_jobqueue.driver.postgres.fairness` (stride scheduling:
the turns table remembers where each key stands, between claims, workers and crashes),
with the turns computed in Python from a few plain reads, under the kind's lock
(`kind_locks`), which makes the turns table consistent across workers. Policy,
guarantees and cost: docs/flow-control.md ("Fair claims").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, Table, case, delete, func, insert, select, update

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.kind_jobs import busy_keys, due_of_kind, running_count
from sa_jobqueue.driver.portable.leasing import lease
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.schema.state_tables import turns_table_for
from sa_jobqueue.statements.fair_weights import weights_of

__all__ = ["claim_fair"]


class _Candidate(NamedTuple):
    """A due job's place in the turns: sorted, the lowest turns are leased first."""

    turn: float
    old: bool  # the key had a place already (a new key goes first on a tie)
    priority: int
    run_at: Any
    id: int
    key: str
    weight: float


def claim_fair(
    driver: PortableBase,
    conn: Connection,
    kind: str,
    limits: Limits,
    queue: str,
    limit: int,
    owner: str,
) -> list[Claimed]:
    """Lease up to `limit` due pending `kind` jobs of `queue` to `owner`, by turns.

    Run it under the kind's lock. Stride scheduling over the keys with due jobs (jobs
    without a key are the key ``''``): a key stands at its stored ``pass`` (at least
    ``base``, the lowest ``pass`` stored among them), or, new to the turns, one turn
    before ``base``; its i-th due job's turn is ``stand + (i - 1) / weight``. The
    lowest turns are leased, ties going first to new keys, then in claim order; each
    served key's ``pass`` moves to its last leased turn plus ``1 / weight``, and a key
    with no due job left loses its row (back later, it is new again). ``max_running``
    and ``max_running_per_key`` hold as in `LimitedClaims.claim`.
    """
    model = driver.model
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    turns, weights = turns_table_for(table), weights_of(model)
    order = (model.priority, model.run_at, model.id)
    pending = due_of_kind(driver, kind, queue)
    # Each key's first `limit` due jobs in claim order (no claim leases more).
    ranked = (
        select(
            model.id,
            func.coalesce(model.concurrency_key, "").label("key"),
            model.priority,
            model.run_at,
            func.row_number()
            .over(partition_by=model.concurrency_key, order_by=order)
            .label("rank"),
        )
        .where(*pending)
        .subquery("ranked")
    )
    due = conn.execute(select(ranked).where(ranked.c.rank <= limit)).all()
    keys = {row.key for row in due}
    stored: dict[str, float] = {
        row.key: row[1]
        for row in conn.execute(select(turns.c.key, turns.c["pass"]).where(turns.c.kind == kind))
    }
    weight_of: dict[str, int] = {}
    if keys:
        query = select(weights.c.key, weights.c.weight).where(weights.c.key.in_(sorted(keys)))
        weight_of = {row.key: row.weight for row in conn.execute(query)}
    busy: dict[str, int] = {}
    if limits.max_running_per_key is not None and keys:
        busy = {row.key: row.n for row in conn.execute(busy_keys(model, kind))}
    passes = [stored[key] for key in keys if key in stored]
    base = min(passes) if passes else 0.0
    candidates = []
    for row in due:
        weight = float(weight_of.get(row.key, 1))
        # A key new to the turns (or back after it had no due job) stands one turn before
        # the others: its first job goes next, and it earns no more credit than that.
        old = row.key in stored
        stand = max(stored[row.key], base) if old else base - 1.0 / weight
        cap = limits.max_running_per_key
        if cap is not None and row.key != "" and row.rank + busy.get(row.key, 0) > cap:
            continue
        turn = stand + (row.rank - 1) / weight
        candidates.append(_Candidate(turn, old, row.priority, row.run_at, row.id, row.key, weight))
    chosen = sorted(candidates)[:limit]
    leased: list[Claimed] = []
    if chosen:
        leased = _lease_chosen(driver, conn, kind, limits, chosen, owner)
    _move_turns(conn, turns, kind, chosen, leased, stored, keys)
    return leased


def _lease_chosen(
    driver: PortableBase,
    conn: Connection,
    kind: str,
    limits: Limits,
    chosen: Sequence[_Candidate],
    owner: str,
) -> list[Claimed]:
    """Lease the `chosen` jobs still pending, lowest turns first, as many as fit."""
    model = driver.model
    room = len(chosen)
    if limits.max_running is not None:
        running = running_count(model, kind)
        room = min(room, max(limits.max_running - conn.execute(running).scalar_one(), 0))
    if room == 0:
        return []
    place = {candidate.id: i for i, candidate in enumerate(chosen)}
    # By primary key, re-checking each is still pending; one locked elsewhere is
    # skipped (claims of the kind take its lock, so that is rare).
    due = (
        select(model.id)
        .where(model.id.in_(list(place)), model.status == Status.PENDING.value)
        .order_by(case(place, value=model.id))
        .limit(room)
    )
    return lease(driver, conn, due, owner)


def _move_turns(
    conn: Connection,
    turns: Table,
    kind: str,
    chosen: Sequence[_Candidate],
    leased: Sequence[Claimed],
    stored: dict[str, float],
    keys: set[str],
) -> None:
    """Each served key's ``pass`` past its last leased turn; forget the keys with no due job.

    Under the kind's lock nothing else writes the kind's rows: an UPDATE of a stored
    key, an INSERT of a new one (no upsert needed).
    """
    got = {job.id for job in leased}
    served: dict[str, float] = {}
    for candidate in chosen:
        if candidate.id in got:
            after = candidate.turn + 1.0 / candidate.weight
            served[candidate.key] = max(served.get(candidate.key, after), after)
    for key, moved in served.items():
        if key in stored:
            conn.execute(
                update(turns)
                .where(turns.c.kind == kind, turns.c.key == key)
                .values({"pass": moved})
            )
        else:
            conn.execute(insert(turns).values({"kind": kind, "key": key, "pass": moved}))
    # A key with no due job forgets its place: back later, it stands as a new key.
    forgotten = sorted(set(stored) - keys)
    if forgotten:
        conn.execute(delete(turns).where(turns.c.kind == kind, turns.c.key.in_(forgotten)))
