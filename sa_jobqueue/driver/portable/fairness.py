"""Fair claims in portable SQL: a fair kind's claim takes turns between ``concurrency_key`` values.

The policy of PostgreSQL's `sa_jobqueue.driver.postgres.fairness` (stride scheduling:
the turns table remembers where each key stands, between claims, workers and crashes),
with the turns computed in Python from a few plain reads, under the kind's lock
(`kind_locks`), which makes the turns table consistent across workers. The statements
are built once per driver, the kind, queue and counts bound (`FairClaims`). Policy,
guarantees and cost: docs/flow-control.md ("Fair claims").
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any, NamedTuple

from sqlalchemy import (
    BindParameter,
    Connection,
    Delete,
    Insert,
    Select,
    Table,
    Text,
    Update,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.kind_jobs import (
    IDS,
    KIND,
    QUEUE,
    WANT,
    busy_keys,
    due_of_kind,
    running_count,
)
from sa_jobqueue.driver.portable.leasing import Leasing
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.schema.state_tables import turns_table_for
from sa_jobqueue.statements.fair_weights import weights_of

__all__ = ["FairClaims"]

#: Beside `kind_jobs`' parameters (the kind, its queue, how many of each key at most,
#: the ids chosen), those of the kept statements here: keys, a key and its new ``pass``.
_KEYS: BindParameter[Any] = bindparam("sajq_fair_keys", expanding=True)
_KEY = bindparam("sajq_fair_key", type_=Text)
_PASS: BindParameter[float] = bindparam("sajq_fair_pass")


class _Candidate(NamedTuple):
    """A due job's place in the turns: sorted, the lowest turns are leased first."""

    turn: float
    old: bool  # the key had a place already (a new key goes first on a tie)
    place: int  # the job's place in claim order (priority, run_at, id) among the due
    id: int
    key: str
    weight: float


def _deep_enough(
    due: Sequence[Any],
    chosen: Sequence[_Candidate],
    depth: int,
    limit: int,
    stand: dict[str, float],
    weight_of: dict[str, float],
    room: dict[str, int],
) -> bool:
    """Whether no job below `depth` of a key could have been among the `chosen`.

    A key read to `depth` may have more due jobs; its next one's turn, ``stand + depth
    / weight``, must come after the last chosen (strictly: a tie may go to it), unless
    its per-key limit (`room`) lets it run no more. With fewer than `limit` chosen,
    any key read to the bottom may have more.
    """
    last = chosen[-1].turn if len(chosen) == limit else None
    bottom = {row.key for row in due if row.rank == depth}
    for key in bottom:
        if room.get(key, limit) <= depth:
            continue
        if last is None or stand[key] + depth / weight_of[key] <= last:
            return False
    return True


class FairClaims:
    """The fair kinds' claims of one driver, their statements built once for every kind."""

    def __init__(self, driver: PortableBase) -> None:
        self.driver = driver
        table = driver.model.__table__
        assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
        self.turns, self.weights = turns_table_for(table), weights_of(driver.model)

    def claim(
        self,
        conn: Connection,
        kind: str,
        limits: Limits,
        queue: str,
        limit: int,
        owner: str,
    ) -> list[Claimed]:
        """Lease up to `limit` due pending `kind` jobs of `queue` to `owner`, by turns.

        Run it under the kind's lock. Stride scheduling over the keys with due jobs
        (jobs without a key are the key ``''``): a key stands at its stored ``pass`` (at
        least ``base``, the lowest ``pass`` stored among them), or, new to the turns,
        one turn before ``base``; its i-th due job's turn is ``stand + (i - 1) /
        weight``. The lowest turns are leased, ties going first to new keys, then in
        claim order; each served key's ``pass`` moves to its last leased turn plus ``1 /
        weight``, and a key with no due job left loses its row (back later, it is new
        again). ``max_running`` and ``max_running_per_key`` hold as in
        `LimitedClaims.claim`.
        """
        stored: dict[str, float] = {
            row.key: row[1] for row in conn.execute(self._stored, {"sajq_limited_kind": kind})
        }
        # Each key's first `depth` due jobs are read, not its first `limit`: with K keys
        # standing within a turn of each other, a claim takes about limit / K of each.
        # Deeper when a key read to the bottom could still have had a turn among those
        # chosen (`_deep_enough`): the choice is the one all of them would give.
        depth = min(limit, -(-limit // max(len(stored), 1)) + 1)
        bound = {"sajq_limited_kind": kind, "sajq_limited_queue": queue, "sajq_limited_want": depth}
        due = conn.execute(self._ranked, bound).all()
        keys = {row.key for row in due}
        weight_of: dict[str, float] = {key: 1.0 for key in keys}
        if keys:
            found = conn.execute(self._weights, {"sajq_fair_keys": sorted(keys)})
            weight_of.update((row.key, float(row.weight)) for row in found)
        room: dict[str, int] = {}  # how many more of a key its per-key limit lets run
        cap = limits.max_running_per_key
        if cap is not None and keys:
            busy = {row.key: row.n for row in conn.execute(self._busy, {"sajq_limited_kind": kind})}
            room = {key: cap - busy.get(key, 0) for key in keys if key != ""}
        passes = [stored[key] for key in keys if key in stored]
        base = min(passes) if passes else 0.0
        # A key new to the turns (or back after it had no due job) stands one turn
        # before the others: its first job goes next, and it earns no more credit.
        stand = {
            key: max(stored[key], base) if key in stored else base - 1.0 / weight_of[key]
            for key in keys
        }
        while True:
            candidates = [
                _Candidate(
                    stand[row.key] + (row.rank - 1) / weight_of[row.key],
                    row.key in stored,
                    row.place,
                    row.id,
                    row.key,
                    weight_of[row.key],
                )
                for row in due
                if row.rank <= room.get(row.key, limit)
            ]
            chosen = sorted(candidates)[:limit]
            if depth >= limit or _deep_enough(due, chosen, depth, limit, stand, weight_of, room):
                break
            depth = min(limit, depth * 2)
            # A key new since the first read (MariaDB reads committed) waits for the next.
            deeper = conn.execute(self._ranked, {**bound, "sajq_limited_want": depth})
            due = [row for row in deeper if row.key in stand]
        leased = self._lease(conn, kind, limits, chosen, owner) if chosen else []
        self._move_turns(conn, kind, chosen, leased, stored, keys)
        return leased

    def _lease(
        self,
        conn: Connection,
        kind: str,
        limits: Limits,
        chosen: Sequence[_Candidate],
        owner: str,
    ) -> list[Claimed]:
        """Lease the `chosen` jobs, lowest turns first, as many as ``max_running`` lets run.

        By primary key, re-checking each is still pending (claims of the kind take its
        lock, so another claim cannot have taken one; a cancel may have).
        """
        room = len(chosen)
        if limits.max_running is not None:
            running = conn.execute(self._running, {"sajq_limited_kind": kind}).scalar_one()
            room = min(room, max(limits.max_running - running, 0))
        if room == 0:
            return []
        ids = [candidate.id for candidate in chosen[:room]]
        return self._leasing.run(conn, owner, {"sajq_limited_ids": ids})

    def _move_turns(
        self,
        conn: Connection,
        kind: str,
        chosen: Sequence[_Candidate],
        leased: Sequence[Claimed],
        stored: dict[str, float],
        keys: set[str],
    ) -> None:
        """Each served key's ``pass`` past its last leased turn; forget the keys with no due job.

        Under the kind's lock nothing else writes the kind's rows: one UPDATE per stored
        key and one INSERT per new one, each sent as one batch (no upsert needed).
        """
        got = {job.id for job in leased}
        served: dict[str, float] = {}
        for candidate in chosen:
            if candidate.id in got:
                after = candidate.turn + 1.0 / candidate.weight
                served[candidate.key] = max(served.get(candidate.key, after), after)
        moved = [
            {"sajq_limited_kind": kind, "sajq_fair_key": key, "sajq_fair_pass": turn}
            for key, turn in served.items()
        ]
        if moves := [move for move in moved if move["sajq_fair_key"] in stored]:
            conn.execute(self._move, moves)
        if arrivals := [move for move in moved if move["sajq_fair_key"] not in stored]:
            conn.execute(self._arrive, arrivals)
        # A key with no due job forgets its place: back later, it stands as a new key.
        if forgotten := sorted(set(stored) - keys):
            conn.execute(self._forget, {"sajq_limited_kind": kind, "sajq_fair_keys": forgotten})

    @cached_property
    def _ranked(self) -> Select[Any]:
        """Each key's first `WANT` due jobs (no claim leases more), with their rank and place."""
        model = self.driver.model
        order = (model.priority, model.run_at, model.id)
        ranked = (
            select(
                model.id,
                func.coalesce(model.concurrency_key, "").label("key"),
                func.row_number()
                .over(partition_by=model.concurrency_key, order_by=order)
                .label("rank"),
                func.row_number().over(order_by=order).label("place"),
            )
            .where(*due_of_kind(self.driver, KIND, QUEUE))
            .subquery("ranked")
        )
        return select(ranked).where(ranked.c.rank <= WANT)

    @cached_property
    def _stored(self) -> Select[Any]:
        turns = self.turns
        return select(turns.c.key, turns.c["pass"]).where(turns.c.kind == KIND)

    @cached_property
    def _weights(self) -> Select[Any]:
        weights = self.weights
        return select(weights.c.key, weights.c.weight).where(weights.c.key.in_(_KEYS))

    @cached_property
    def _busy(self) -> Select[Any]:
        busy: Select[Any] = busy_keys(self.driver.model, KIND)
        return busy

    @cached_property
    def _running(self) -> Select[Any]:
        return running_count(self.driver.model, KIND)

    @cached_property
    def _leasing(self) -> Leasing:
        model = self.driver.model
        chosen = select(model.id).where(model.id.in_(IDS), model.status == Status.PENDING.value)
        return Leasing(self.driver, chosen)

    @cached_property
    def _move(self) -> Update:
        turns = self.turns
        return (
            update(turns).where(turns.c.kind == KIND, turns.c.key == _KEY).values({"pass": _PASS})
        )

    @cached_property
    def _arrive(self) -> Insert:
        turns = self.turns
        return insert(turns).values({"kind": KIND, "key": _KEY, "pass": _PASS})

    @cached_property
    def _forget(self) -> Delete:
        turns = self.turns
        return delete(turns).where(turns.c.kind == KIND, turns.c.key.in_(_KEYS))
