"""The claim statements (one queue, many queues in one), and `Claims`.

`Claims` builds a driver's claim statements once and runs them on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Exists,
    Float,
    FromClause,
    Integer,
    Row,
    Select,
    Text,
    Update,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from sa_jobqueue.core.validation import check_name
from sa_jobqueue.driver.postgres.plan_cache import (
    claim_ceiling,
    due_within,
    written_limit,
    written_names,
)
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.common import (
    claimed_columns,
    seconds,
)
from sa_jobqueue.statements.control import is_paused

__all__ = [
    "LEVEL_WALK_MAX_QUEUES",
    "Claims",
    "claim",
    "claim_queues",
    "priority_levels",
]


def claim(
    model: type[JobMixin],
    *,
    leases: Mapping[str, float],
    default_lease: float,
    exclude_kinds: Sequence[str] = (),
    kinds: Sequence[str] | None = None,
    ceiling: int,
) -> Update:
    """Lease up to ``:limit`` due pending jobs of queue ``:queue_name`` to ``:owner``.

    The lease of each job is its kind's lease from `leases` (seconds), else
    `default_lease`. Rows locked by another claimer are skipped, never waited on.
    ``queue = :queue_name`` walks the partial index in claim order and stops after
    ``:limit`` rows. Nothing is claimed from a queue listed in the paused-queues
    table. Returns the leased jobs. A worker of several queues uses `claim_queues`.

    `exclude_kinds` are the worker's limited kinds, which `claim_limited` claims
    instead; without any, the statement excludes no kind.
    `kinds`, when given, are the only kinds claimed: a worker's handled kinds, so it
    leaves the jobs of any other kind pending, untouched, for a worker that has
    their handler (a deploy in flight).

    `ceiling`, written into the SQL, is the most ``:limit`` may be (`claim_ceiling`):
    the planner sizes the plan by it (`plan_cache.due_within`).
    """
    queue_name = bindparam("queue_name", type_=Text)
    levels = priority_levels(model, queue_name)
    per_level = _due_in(
        model, queue_name, exclude_kinds, ceiling, kinds=kinds, level=levels.c.priority
    )
    ranked = per_level.lateral("c")
    # Lock inside a CTE so the planner cannot re-run the LIMITed subquery and
    # update more rows than it locked. The levels come lowest first, each level's
    # rows in claim order (a nested loop over a recursive walk keeps both orders).
    due = due_within(select(ranked.c.id).select_from(levels.join(ranked, true())), ceiling)
    return _lease(model, due, leases, default_lease)


def priority_levels(
    model: type[JobMixin], queue: ColumnElement[Any], outer: FromClause | None = None
) -> Any:
    """The priority levels of `queue`'s pending jobs, lowest first: a recursive CTE.

    One index probe per level (the smallest ``priority`` above the last one), run as
    the claim asks for rows: a claim that fills its ``LIMIT`` in the first level
    never looks for a second.
    """
    table = model.__table__

    def level_after(above: ColumnElement[Any] | None) -> Any:
        jobs = table.alias()
        found = select(func.min(jobs.c.priority)).where(
            jobs.c.status == literal_column(f"'{Status.PENDING.value}'", Text),
            jobs.c.queue == queue,
        )
        if above is not None:
            found = found.where(jobs.c.priority > above)
        if outer is not None:
            found = found.correlate_except(jobs)  # `outer` and the walk's last level
        return found.scalar_subquery()

    levels = select(level_after(None).label("priority")).cte(
        "levels", recursive=True, nesting=outer is not None
    )
    return levels.union_all(
        select(level_after(levels.c.priority)).where(levels.c.priority.is_not(None))
    )


def claim_queues(
    model: type[JobMixin],
    *,
    queues: Sequence[str],
    leases: Mapping[str, float],
    default_lease: float,
    exclude_kinds: Sequence[str] = (),
    kinds: Sequence[str] | None = None,
    ceiling: int,
) -> Update:
    """Lease up to ``:limit`` due pending jobs of `queues` to ``:owner``, from ``queues[:start]``.

    One statement for a worker of many queues, taking them in their order from the
    one at index ``:start`` (0-based), wrapping around: that queue's due jobs in
    claim order (``priority, run_at, id``), then the next queue's, until ``:limit``
    rows are leased; the same rows as `claim` run once per queue in that order, with
    the same leases, paused-queue filter, `exclude_kinds` and `kinds`. The caller moves
    ``:start`` between rounds, so no queue waits behind the others for long.

    Up to `LEVEL_WALK_MAX_QUEUES` queues, each queue's priority levels are walked as in
    `claim` (jobs not yet due are never stepped over); past it, each queue is one range
    (a walk per level would cost more than it saves over many thin queues).
    Each queue is a ``LATERAL`` subquery (``queue = q.name``): an ordered walk of
    the pending index that locks its rows with ``FOR UPDATE SKIP LOCKED`` as it goes
    and stops as soon as the outer ``LIMIT`` is met, so an empty queue costs one
    index probe, a locked row is stepped over inside its queue, and no row is locked
    that is not leased. (``queue = ANY(:queues)`` would sort every due row of those
    queues on every claim.) The names are written into the statement, checked by
    `check_name` first, so a round sends an offset, not a thousand names. `ceiling`: as
    in `claim`.
    """
    names = [check_name("queue", queue) for queue in queues]
    # Names hold only letters, digits and _ . : / - (check_name): safe in a literal.
    ring = type_coerce(
        literal_column("(ARRAY[" + ", ".join(f"'{name}'" for name in names) + "]::text[])"),
        ARRAY(Text),
    )
    # ``(SELECT :start)``: with a bare ``:start`` the plan built with the values folds the
    # rotated array to a constant and counts its queues, and the one built without them
    # guesses ten; with both guessing ten, PostgreSQL keeps the latter (`plan_cache`).
    start = select(bindparam("start", type_=Integer)).scalar_subquery()
    rotated = ring[start + 1 : len(names)].op("||")(ring[1:start])
    ordered = func.unnest(rotated).table_valued("name").render_derived(name="q")
    per_queue: Any
    if len(names) > LEVEL_WALK_MAX_QUEUES:
        # Past that many queues the walk's few microseconds per queue add up (11.8 ms
        # instead of 7.2 for a claim over 1,000 empty queues): one range per queue.
        due_here = _due_in(
            model, ordered.c.name, exclude_kinds, ceiling, outer=ordered, kinds=kinds
        )
        per_queue = due_here.lateral("c")
    else:
        levels = priority_levels(model, ordered.c.name, outer=ordered)
        per_level = _due_in(
            model,
            ordered.c.name,
            exclude_kinds,
            ceiling,
            outer=ordered,
            kinds=kinds,
            level=levels.c.priority,
        ).lateral("c")
        walk = select(per_level.c.id).select_from(levels.join(per_level, true()))
        per_queue = walk.lateral("l")
    # No ORDER BY: the rows come as the nested loop makes them, queue by queue in
    # the array's order (a function scan returns its rows in order, and a LATERAL
    # subquery can only be the inner side of a nested loop; nothing else is joined,
    # so there is no other join order to choose).
    due = due_within(select(per_queue.c.id).select_from(ordered.join(per_queue, true())), ceiling)
    return _lease(model, due, leases, default_lease)


def _due_in(
    model: type[JobMixin],
    queue: ColumnElement[Any],
    exclude_kinds: Sequence[str],
    ceiling: int,
    outer: FromClause | None = None,
    kinds: Sequence[str] | None = None,
    level: ColumnElement[Any] | None = None,
) -> Select[Any]:
    """The first `ceiling` due pending jobs of `queue`, locked (``SKIP LOCKED``) in claim order.

    None when `queue` is paused (one primary-key probe of the paused-queues table).
    `outer` is the FROM that `queue` comes from, when the result is a LATERAL
    subquery: the paused probe refers to it rather than joining it again. With
    `level`, only the jobs of that ``priority``: the index then bounds ``run_at``
    too, and the walk stops at the first job not yet due instead of stepping over
    every future job of the queue (79 ms beside 1,000,000 of them).
    """
    paused = is_paused(model, queue)
    if outer is not None and isinstance(paused, Exists):
        paused = paused.correlate(outer)
    due = (
        select(model.id)
        # 'pending' written into the SQL, not bound: a generic plan can then prove
        # the partial index's predicate; with ``status = $1`` it can only scan the
        # table and sort (885 ms over 1,000 queues), and psycopg prepares the claim
        # after five executions.
        .where(model.status == literal_column(f"'{Status.PENDING.value}'", Text))
        .where(model.queue == queue)
    )
    if level is not None:
        due = due.where(model.priority == level)
    due = (
        due.where(model.run_at <= func.now())
        .where(~paused)
        .order_by(model.priority, model.run_at, model.id)
        # The ceiling, written in: ``:limit`` applies on top (`due_within`), and rows
        # are locked only as the walk above pulls them. The planner then plans for
        # ``ceiling`` of the rows it expects, an ordered index walk, whether it expects
        # a few (a queue grown since ANALYZE, one deep queue among thin ones) or tens
        # of thousands beside a big table. ``(SELECT :limit)`` here made it plan for a
        # tenth of them: beside 10,000,000 finished jobs, a bitmap scan and a sort of
        # every due row, 24-159 ms per claim (docs/scaling.md).
        .limit(written_limit(ceiling))
        .with_for_update(skip_locked=True)
    )
    if outer is not None and level is not None:
        # Inside the levels' own LATERAL: `outer` and the level come from around it.
        due = due.correlate_except(model.__table__)
    # The kinds are written into the SQL, not bound: the plan built without the values
    # (generic) then estimates the kind filter as the plan built with them does, and
    # PostgreSQL keeps it (`plan_cache`).
    if kinds is not None:
        # Only the worker's kinds (less its limited ones): the others are stepped
        # over in the index walk, left pending with their attempts untouched.
        wanted = sorted(set(kinds) - set(exclude_kinds))
        return due.where(model.kind.in_(written_names("kind", wanted)))
    if exclude_kinds:
        due = due.where(model.kind.not_in(written_names("kind", sorted(exclude_kinds))))
    return due


def _lease(
    model: type[JobMixin],
    due: Any,
    leases: Mapping[str, float],
    default_lease: float,
) -> Update:
    """Lease the rows of the CTE `due` (its ``id`` column) to ``:owner``; return them."""
    lease: ColumnElement[Any] = literal(float(default_lease), Float)
    if leases:
        lease = case(
            {kind: literal(float(value), Float) for kind, value in leases.items()},
            value=model.kind,
            else_=lease,
        )
    leased = {
        model.status: Status.RUNNING.value,
        model.attempts: model.attempts + 1,
        model.locked_by: bindparam("owner", type_=Text),
        model.locked_until: func.now() + seconds(lease),
        model.updated_at: func.now(),
    }
    returned = claimed_columns(model)
    # ``id = ANY(ARRAY(SELECT id FROM due))``, not ``FROM due``: the planner sizes
    # the array at a few elements whatever it guessed for `due` (whose LIMIT it
    # cannot see), so the leased rows are found by primary key, never by a hash
    # join over a scan of the whole table.
    ids = func.array(select(due.c.id).scalar_subquery())
    return update(model).where(model.id == func.any(ids)).values(leased).returning(*returned)


#: Up to this many queues, `next_run_at` walks the pending index level by level; beyond
#: it, one aggregate over the queues' pending rows costs less than a probe per level.
LEVEL_WALK_MAX_QUEUES = 32


class Claims:
    """A driver's claims of the kinds that are not limited; each statement is built once.

    Args:
        model: the jobs model.
        leases: kind -> lease in seconds, written into each claim.
        default_lease: the lease of kinds not in `leases`.
        exclude_kinds: kinds never claimed here (the limited kinds).
        kinds: the only kinds claimed (None: any kind), in any order.
    """

    def __init__(
        self,
        model: type[JobMixin],
        leases: Mapping[str, float],
        default_lease: float,
        exclude_kinds: Sequence[str],
        kinds: Sequence[str] | None,
    ) -> None:
        self.model = model
        self._lease = (leases, default_lease)
        kinds = None if kinds is None else sorted(kinds)
        options = {"default_lease": default_lease, "exclude_kinds": exclude_kinds, "kinds": kinds}
        self._options: dict[str, Any] = {"leases": leases, **options}
        self._claim: dict[int, Update] = {}
        self._claim_queues: dict[tuple[tuple[str, ...], int], Update] = {}

    def claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queue` to `owner` (`claim`).

        One statement per `claim_ceiling`, built when first asked: a worker's claims
        use one or two of them.
        """
        ceiling = claim_ceiling(limit)
        statement = self._claim.get(ceiling)
        if statement is None:
            statement = self._claim[ceiling] = claim(self.model, **self._options, ceiling=ceiling)
        params = {"queue_name": queue, "limit": limit, "owner": owner}
        return self._claimed(conn.execute(statement, params).all())

    def claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int
    ) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queues` to `owner` (`claim_queues`).

        The statement is built once per list of queues and `claim_ceiling`, with the
        names in it; a round passes only `start`, the index of the queue whose jobs
        come first.
        """
        key = tuple(queues)
        ceiling = claim_ceiling(limit)
        statement = self._claim_queues.get((key, ceiling))
        if statement is None:
            statement = self._claim_queues[key, ceiling] = claim_queues(
                self.model, queues=key, **self._options, ceiling=ceiling
            )
        params = {"start": start % len(key), "limit": limit, "owner": owner}
        return self._claimed(conn.execute(statement, params).all())

    def _claimed(self, rows: Sequence[Row[Any]]) -> list[Claimed]:
        return Claimed.from_rows(rows, *self._lease)
