"""`LimitedClaims`: the limited kinds' claims, rated starts and due probes, in portable SQL.

The same policy as PostgreSQL's driver (`sa_jobqueue.driver.postgres.limits`), in a few
plain statements under the kind's lock (`kind_locks`): count what the limits leave
room for, choose the due jobs that fit, lease them (`leasing.lease`), log the starts.
Claims of one limited kind, over every worker, run one after another, so each sees
the leases of the one before. Why this design, and its failure cases:
docs/flow-control.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Select,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
)

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.fairness import FairClaims
from sa_jobqueue.driver.portable.kind_jobs import (
    IDS,
    KIND,
    QUEUE,
    WANT,
    busy_keys,
    due_of_kind,
    running_count,
)
from sa_jobqueue.driver.portable.kind_locks import lock_kinds
from sa_jobqueue.driver.portable.leasing import Leasing
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.schema.types import Timestamp
from sa_jobqueue.statements.control import is_paused
from sa_jobqueue.statements.flow_stats import starts_of

__all__ = ["LimitedClaims"]


#: Beside `kind_jobs`' parameters, those of the kept statements here: the per-key
#: limit, the clock read under the kind's lock.
_PER_KEY = bindparam("sajq_limited_per_key", type_=Integer)
_STAMP = bindparam("sajq_limited_now", type_=Timestamp()).label("rate_stamp")


class LimitedClaims:
    """The limited kinds of one `PortableDriver` (its `PortableBase.limited`).

    Its statements are built once, for every kind, with the kind, the queue and the
    counts as bound parameters: a claim round of a limited kind takes a handful of jobs
    (as many as its slots free), so building and keying its statements at each round
    cost a worker more than the jobs did.
    """

    def __init__(self, driver: PortableBase) -> None:
        self.driver = driver
        self.starts = starts_of(driver.model)
        self._leasings: dict[tuple[bool, bool], Leasing] = {}
        self._fair = FairClaims(driver)

    def claim(
        self,
        conn: Connection,
        kind: str,
        queues: Sequence[str],
        limit: int,
        owner: str,
        locked: bool,
    ) -> list[Claimed]:
        """The kind's lock (unless `locked`), then what its limits leave room for, per queue.

        * ``max_running``: at most ``max_running - running`` (running jobs of the kind
          in any queue, leased by any worker; an expired lease counts until swept).
        * ``max_running_per_key``: of each ``concurrency_key``, at most ``N - running of
          that key``, in claim order within the key; a key at its limit is passed over
          (no head-of-line blocking); jobs without a key are not limited by it.
        * ``rate_limit``: at most ``count - starts in the last window``; logs one start
          per leased job (the clock read after the lock was granted: each job's
          ``rate_stamp``) and prunes the kind's starts that left the window.
        * ``fair``: by turns between ``concurrency_key`` values (`FairClaims.claim`).
        """
        driver = self.driver
        limits = driver.limited[kind]
        if not locked:
            lock_kinds(driver.sql, driver.model, conn, [kind])
        claimed: list[Claimed] = []
        if limits.fair:
            for queue in queues:
                want = limit - len(claimed)
                if want <= 0:
                    break
                claimed += self._fair.claim(conn, kind, limits, queue, want, owner)
            return claimed
        room = limit
        if limits.max_running is not None:
            running = conn.execute(self._running, {"sajq_limited_kind": kind}).scalar_one()
            room = min(room, limits.max_running - running)
        now: datetime | None = None
        if limits.rate_count is not None:
            now = self._clock(conn)
            room = min(room, limits.rate_count - self._recent(conn, kind, now, limits))
        rated = now is not None
        for queue in queues:
            want = room - len(claimed)
            if want <= 0:
                break
            params: dict[str, Any] = {"sajq_limited_kind": kind, "sajq_limited_queue": queue}
            if rated:
                params["sajq_limited_now"] = now
            if limits.max_running_per_key is None:
                params["sajq_limited_want"] = want
                claimed += self._leasing(by_ids=False, rated=rated).run(conn, owner, params)
                continue
            ids = self._fitting(conn, params, want, limits.max_running_per_key)
            if ids:
                leasing = self._leasing(by_ids=True, rated=rated)
                claimed += leasing.run(conn, owner, {**params, "sajq_limited_ids": ids})
        if now is not None:
            self._log_starts(conn, kind, now, len(claimed), limits)
        return claimed

    def _fitting(
        self, conn: Connection, params: dict[str, Any], want: int, per_key: int
    ) -> list[int]:
        """The ids of up to `want` due jobs of the kind in the queue that `per_key` lets run."""
        chosen = {**params, "sajq_limited_want": want, "sajq_limited_per_key": per_key}
        return list(conn.scalars(self._per_key_fitting, chosen).all())

    @cached_property
    def _running(self) -> Select[Any]:
        return running_count(self.driver.model, KIND)

    @cached_property
    def _order(self) -> tuple[Any, ...]:
        model = self.driver.model
        return (model.priority, model.run_at, model.id)

    @cached_property
    def _due(self) -> Select[Any]:
        """The due jobs of the kind in the queue, in claim order, at most `WANT`."""
        model = self.driver.model
        pending = due_of_kind(self.driver, KIND, QUEUE)
        return select(model.id).where(*pending).order_by(*self._order).limit(WANT)

    @cached_property
    def _per_key_fitting(self) -> Select[Any]:
        """The ids of the due jobs the per-key limit lets run, at most `WANT`, in order."""
        model = self.driver.model
        order = self._order
        pending = due_of_kind(self.driver, KIND, QUEUE)
        busy = busy_keys(model, KIND).subquery("busy")
        slot = func.row_number().over(partition_by=model.concurrency_key, order_by=order)
        ranked = (
            select(
                model.id,
                model.priority,
                model.run_at,
                model.concurrency_key.label("key"),
                (slot + func.coalesce(busy.c.n, 0)).label("slot"),
            )
            .outerjoin(busy, busy.c.key == model.concurrency_key)
            .where(*pending)
            .subquery("ranked")
        )
        # A window function cannot sit beside FOR UPDATE (and MySQL takes no LIMIT in an
        # IN subquery): choose the ids first, then lock them, re-checking each is pending.
        return (
            select(ranked.c.id)
            .where(or_(ranked.c.key.is_(None), ranked.c.slot <= _PER_KEY))
            .order_by(ranked.c.priority, ranked.c.run_at, ranked.c.id)
            .limit(WANT)
        )

    @cached_property
    def _chosen(self) -> Select[Any]:
        """The jobs of `IDS` still pending, in claim order."""
        model = self.driver.model
        return (
            select(model.id)
            .where(model.id.in_(IDS), model.status == Status.PENDING.value)
            .order_by(*self._order)
        )

    def _leasing(self, *, by_ids: bool, rated: bool) -> Leasing:
        """The lease of `_chosen` (`by_ids`) or `_due`, with a ``rate_stamp`` when `rated`."""
        key = (by_ids, rated)
        leasing = self._leasings.get(key)
        if leasing is None:
            due = self._chosen if by_ids else self._due
            leasing = self._leasings[key] = Leasing(self.driver, due, [_STAMP] if rated else [])
        return leasing

    # -- rate limits: the starts log ---------------------------------------------------

    def _clock(self, conn: Connection) -> datetime:
        """The database's clock, read now (after the kind's lock was granted)."""
        now: datetime = conn.execute(self._now).scalar_one()
        return now

    @cached_property
    def _now(self) -> Select[Any]:
        return select(self.driver.sql.now())

    def _recent(self, conn: Connection, kind: str, now: datetime, limits: Limits) -> int:
        """`kind`'s starts in the window that ends at `now`."""
        since = now - timedelta(seconds=float(limits.rate_window or 0))
        recent: int = conn.execute(
            self._starts_since, {"sajq_limited_kind": kind, "sajq_limited_since": since}
        ).scalar_one()
        return recent

    @cached_property
    def _starts_since(self) -> Select[Any]:
        starts = self.starts
        since = bindparam("sajq_limited_since", type_=starts.c.started_at.type)
        return select(func.count()).where(starts.c.kind == KIND, starts.c.started_at > since)

    def _log_starts(
        self, conn: Connection, kind: str, now: datetime, n: int, limits: Limits
    ) -> None:
        """Log `n` starts of `kind` at `now`; prune the kind's starts that left the window."""
        starts = self.starts
        if n:
            conn.execute(insert(starts), [{"kind": kind, "started_at": now}] * n)
        since = now - timedelta(seconds=float(limits.rate_window or 0))
        conn.execute(delete(starts).where(starts.c.kind == kind, starts.c.started_at <= since))

    def start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Under `job.kind`'s lock, count its window without `job`'s stamp; move or drop that.

        True, its stamp moved to now (or a start logged at now, when the claim's stamp
        left the window); or False, its stamp dropped, when the window ending now is
        full. A kind without a rate limit starts: True.
        """
        driver = self.driver
        limits = driver.limited.get(job.kind)
        if limits is None or limits.rate_count is None:
            return True
        lock_kinds(driver.sql, driver.model, conn, [job.kind])
        now = self._clock(conn)
        since = now - timedelta(seconds=float(limits.rate_window or 0))
        recent = self._recent(conn, job.kind, now, limits)
        stamp = job.rate_stamp
        mine = stamp is not None and stamp > since
        if recent - (1 if mine else 0) >= limits.rate_count:
            if mine:
                self._replace_stamp(conn, job.kind, stamp, None)
            return False
        moved = mine and self._replace_stamp(conn, job.kind, stamp, now)
        if not moved:
            conn.execute(insert(self.starts).values(kind=job.kind, started_at=now))
        return True

    def _replace_stamp(
        self, conn: Connection, kind: str, stamp: datetime, to: datetime | None
    ) -> bool:
        """Move one of `kind`'s stamps equal to `stamp` to `to` (None: delete it).

        Equal stamps are alike, and the log has no key to single one out (nor do SQLite
        and MySQL share an ``UPDATE ... LIMIT 1``): all of them are deleted, and all but
        one written back. False when there was none.
        """
        starts = self.starts
        same = (starts.c.kind == kind, starts.c.started_at == stamp)
        n: int = conn.execute(select(func.count()).where(*same)).scalar_one()
        if n == 0:
            return False
        conn.execute(delete(starts).where(*same))
        kept = [stamp] * (n - 1) + ([] if to is None else [to])
        if kept:
            conn.execute(insert(starts), [{"kind": kind, "started_at": at} for at in kept])
        return True

    # -- due probes: no lock --------------------------------------------------------------

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """Which of `kinds` have a job due in `queues` (not paused); a hint, without a lock."""
        if not kinds or not queues:
            return set()
        model = self.driver.model
        query = select(model.kind).distinct().where(*self._due_in(queues), model.kind.in_(kinds))
        return set(conn.scalars(query).all())

    def limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """Whether a job of a limited kind is due in `queues` (not paused); without a lock."""
        limited = sorted(self.driver.limited)
        if not limited or not queues:
            return False
        model = self.driver.model
        hit = select(model.id).where(*self._due_in(queues), model.kind.in_(limited)).limit(1)
        return conn.execute(hit).first() is not None

    def _due_in(self, queues: Sequence[str]) -> list[ColumnElement[bool]]:
        model = self.driver.model
        return [
            model.status == Status.PENDING.value,
            model.queue.in_(list(queues)),
            model.run_at <= self.driver.sql.now(),
            ~is_paused(model, model.queue.expression),
        ]
