"""The limited claim statements against a real PostgreSQL, on separate connections.

The races are made deterministic: two claim transactions are held open side by side,
so the test shows what the kind lock is for (without it the second claimer counts the
same free slots) and that with it the second claimer waits, then counts right.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Connection, Engine, event, func, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.limits import check_limits
from sa_jobqueue.driver.postgres import PostgresDriver, claims, completion, runtime
from sa_jobqueue.driver.postgres import limits as flow
from sa_jobqueue.schema.model import Status
from sa_jobqueue.worker.claimer import UNLIMITED_BACKOFF, Claimer
from sa_jobqueue.worker.limited_claimer import MIN_BACKOFF, LimitedClaims
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue


def _enqueue(engine: Engine, kind: str, n: int, keys: list[str | None] | None = None) -> list[int]:
    jobs = new_queue()
    with Session(engine) as session, session.begin():
        items: list[dict[str, Any]] = [
            {"kind": kind, "payload": {"n": i}, "concurrency_key": keys[i] if keys else None}
            for i in range(n)
        ]
        return [job.id for job in jobs.enqueue_many(session, items)]


def _claim(conn: Connection, statement: Any, owner: str, limit: int = 10) -> list[int]:
    params = {"queue_name": "default", "limit": limit, "owner": owner}
    return [row.id for row in conn.execute(statement, params)]


def _running(engine: Engine, kind: str) -> int:
    with engine.connect() as conn:
        query = select(func.count()).where(Job.kind == kind, Job.status == Status.RUNNING.value)
        return int(conn.scalar(query) or 0)


def _backend_waiting_on_advisory(engine: Engine, pid: int) -> bool:
    with engine.connect() as conn:
        query = text("SELECT wait_event FROM pg_stat_activity WHERE pid = :pid")
        return bool(conn.scalar(query, {"pid": pid}) == "advisory")


MAX2 = check_limits(max_running=2)


def test_without_the_kind_lock_two_open_claims_overbook(committed):
    """Why the lock exists: the count alone cannot see an uncommitted claim."""
    _enqueue(committed, "sync_crm", 6)
    claim = flow.claim_limited(Job, kind="sync_crm", limits=MAX2, lease=60.0)
    with committed.connect() as a, committed.connect() as b, a.begin():
        first = _claim(a, claim, "a", limit=2)
        with b.begin():
            second = _claim(b, claim, "b", limit=2)
    assert len(first) == 2
    assert len(second) == 2  # both counted 0 running: 4 running under max_running=2
    assert _running(committed, "sync_crm") == 4


def test_with_the_kind_lock_the_second_claimer_waits_then_counts_the_first(committed):
    _enqueue(committed, "sync_crm", 6)
    claim = flow.claim_limited(Job, kind="sync_crm", limits=MAX2, lease=60.0)
    lock = flow.lock_limited(Job, "sync_crm")
    second: list[int] = []
    with committed.connect() as a, committed.connect() as b:
        b_pid = b.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        b.rollback()

        def claimer_b() -> None:
            with b.begin():
                b.execute(lock)
                second.extend(_claim(b, claim, "b"))

        with a.begin():
            a.execute(lock)
            first = _claim(a, claim, "a")
            thread = threading.Thread(target=claimer_b)
            thread.start()
            wait_for(lambda: _backend_waiting_on_advisory(committed, b_pid), 10, "b on the lock")
            assert not second
        thread.join(10)
    assert len(first) == 2
    assert second == []  # it counted the 2 that `a` committed
    assert _running(committed, "sync_crm") == 2


def test_other_kinds_locks_do_not_wait_on_each_other(committed):
    lock_a = flow.lock_limited(Job, "a")
    lock_b = flow.lock_limited(Job, "b")
    with committed.connect() as one, committed.connect() as two, one.begin():
        one.execute(lock_a)
        with two.begin():
            two.execute(text("SET LOCAL lock_timeout = '2s'"))
            two.execute(lock_b)  # would time out if the keys collided


def test_a_finished_job_frees_its_slot(committed):
    _enqueue(committed, "sync_crm", 4)
    claim = flow.claim_limited(Job, kind="sync_crm", limits=MAX2, lease=60.0)
    with committed.begin() as conn:
        first = _claim(conn, claim, "w")
    with committed.begin() as conn:
        assert _claim(conn, claim, "w") == []
        params = {"ids": first[:1], "attempt_numbers": [1], "owner": "w"}
        conn.execute(completion.complete(Job), params)
        assert len(_claim(conn, claim, "w")) == 1  # its own completion counts at once


def test_expired_lease_holds_its_slot_until_the_sweeper_takes_the_job_back(committed):
    _enqueue(committed, "sync_crm", 3)
    claim = flow.claim_limited(Job, kind="sync_crm", limits=MAX2, lease=60.0)
    with committed.begin() as conn:
        held = _claim(conn, claim, "crashed")
        assert len(held) == 2
        conn.execute(
            update(Job)
            .where(Job.id.in_(held))
            .values(locked_until=func.now() - text("interval '1 second'"))
        )
    with committed.begin() as conn:
        assert _claim(conn, claim, "alive") == []  # expired, but still running
        swept = conn.execute(runtime.sweep_expired(Job), {"limit": 100}).all()
        assert sorted(row.id for row in swept) == held
    with committed.begin() as conn:
        assert len(_claim(conn, claim, "alive")) == 2


def test_per_key_limit_passes_over_busy_keys_and_leaves_keyless_jobs_alone(committed):
    keys: list[str | None] = ["a", "a", "b", "a", "b", "c", None, None]
    ids = _enqueue(committed, "charge", len(keys), keys)
    claim = flow.claim_limited(
        Job, kind="charge", limits=check_limits(max_running_per_key=1), lease=60.0
    )
    with committed.begin() as conn:
        first = _claim(conn, claim, "w")
    # One per key, the oldest of each, and both keyless jobs.
    assert first == [ids[0], ids[2], ids[5], ids[6], ids[7]]
    with committed.begin() as conn:
        assert _claim(conn, claim, "w") == []
        params = {"ids": [ids[0]], "attempt_numbers": [1], "owner": "w"}
        conn.execute(completion.complete(Job), params)
        assert _claim(conn, claim, "w") == [ids[1]]  # key "a" again, in claim order


def test_per_key_and_max_running_together_and_limit_is_respected(committed):
    keys: list[str | None] = ["a", "b", "c", "d", "a"]
    ids = _enqueue(committed, "charge", len(keys), keys)
    limits = check_limits(max_running=3, max_running_per_key=1)
    claim = flow.claim_limited(Job, kind="charge", limits=limits, lease=60.0)
    with committed.begin() as conn:
        assert _claim(conn, claim, "w", limit=2) == ids[:2]
        assert _claim(conn, claim, "w", limit=5) == ids[2:3]  # max_running=3 reached


def test_rate_limit_counts_starts_in_a_sliding_window(committed):
    _enqueue(committed, "call_api", 10)
    limits = check_limits(rate_limit=(3, 60.0))
    claim = flow.claim_limited(Job, kind="call_api", limits=limits, lease=60.0)
    starts = statements.starts_of(Job)
    with committed.begin() as conn:
        first = _claim(conn, claim, "w")
        assert len(first) == 3
        conn.execute(
            completion.complete(Job), {"ids": first, "attempt_numbers": [1] * 3, "owner": "w"}
        )
    with committed.begin() as conn:
        assert _claim(conn, claim, "w") == []  # finished or not, the starts count
        assert conn.scalar(select(func.count()).select_from(starts)) == 3
        # Move one start out of the window (61 s ago), two stay in it: one more fits.
        oldest = select(func.min(starts.c.started_at)).scalar_subquery()
        conn.execute(
            update(starts)
            .where(starts.c.started_at == oldest)
            .values(started_at=starts.c.started_at - text("interval '61 seconds'"))
        )
        # Several rows can share one stamp (one claim): count what moved.
        moved = conn.scalar(
            select(func.count()).where(starts.c.started_at < func.now() - text("interval '60 s'"))
        )
    with committed.begin() as conn:
        assert len(_claim(conn, claim, "w")) == moved
        # The claim pruned the starts that left the window and logged its own.
        assert conn.scalar(select(func.count()).select_from(starts)) == 3


def test_unlimited_claim_passes_over_a_saturated_limited_kind(committed):
    limited = _enqueue(committed, "sync_crm", 5)  # older, due first
    unlimited = _enqueue(committed, "plain", 3)
    claim = claims.claim(Job, leases={}, default_lease=60.0, exclude_kinds=["sync_crm"], ceiling=32)
    with committed.begin() as conn:
        rows = conn.execute(claim, {"queue_name": "default", "limit": 10, "owner": "w"}).all()
    assert sorted(row.id for row in rows) == unlimited
    with committed.connect() as conn:
        pending = conn.scalars(select(Job.id).where(Job.status == Status.PENDING.value))
        assert sorted(pending) == limited


def test_stats_show_running_against_each_limit(committed):
    jobs = new_queue()
    jobs.task("sync_crm", max_running=2)(lambda ctx: None)
    jobs.task("charge", max_running_per_key=1)(lambda ctx: None)
    jobs.task("call_api", rate_limit=(5, 1.0))(lambda ctx: None)
    jobs.task("plain")(lambda ctx: None)
    _enqueue(committed, "sync_crm", 3)
    _enqueue(committed, "charge", 2, ["k", "j"])
    _enqueue(committed, "call_api", 2)
    with committed.begin() as conn:
        for task in jobs.registry.limited():
            claim = flow.claim_limited(Job, kind=task.kind, limits=task.limits, lease=60)
            conn.execute(flow.lock_limited(Job, task.kind))
            _claim(conn, claim, "w")
    with Session(committed) as session:
        snapshot = jobs.stats(session)
    usage = {item.kind: item for item in snapshot.limits}
    assert sorted(usage) == ["call_api", "charge", "sync_crm"]
    assert (usage["sync_crm"].running, usage["sync_crm"].max_running) == (2, 2)
    assert (usage["charge"].busiest_key, usage["charge"].max_running_per_key) == (1, 1)
    assert (usage["call_api"].recent_starts, usage["call_api"].rate_count) == (2, 5)
    assert snapshot.to_dict()["limits"][0]["kind"] == "call_api"

    from sa_jobqueue.cli.render import render_stats

    text_ = render_stats(snapshot, "jobs")
    assert "sync_crm      2/2" in text_
    assert "2/5 per 1s" in text_


def test_a_paused_queue_gives_no_limited_job(committed):
    jobs = new_queue()
    _enqueue(committed, "sync_crm", 2)
    claim = flow.claim_limited(Job, kind="sync_crm", limits=MAX2, lease=60.0)
    with Session(committed) as session, session.begin():
        jobs.pause(session, "default")
    with committed.begin() as conn:
        conn.execute(flow.lock_limited(Job, "sync_crm"))
        assert _claim(conn, claim, "w") == []
    with Session(committed) as session, session.begin():
        jobs.resume(session, "default")
    with committed.begin() as conn:
        conn.execute(flow.lock_limited(Job, "sync_crm"))
        assert len(_claim(conn, claim, "w")) == 2


def _lock_is_free(engine: Engine, kind: str) -> bool:
    with engine.begin() as conn:
        return bool(conn.scalar(statements.try_advisory_xact_lock(Job, f"limit:{kind}")))


COMPLETE_AND_LOCK = flow.complete_and_lock(Job, completion.complete(Job, with_results=False))


def test_complete_and_lock_takes_the_kind_locks_even_when_no_job_was_held(committed):
    with committed.connect() as conn, conn.begin():
        params = {"ids": [-1], "attempt_numbers": [1], "owner": "w", "lock_kinds": ["a", "b"]}
        row = conn.execute(COMPLETE_AND_LOCK, params).one()
        assert (row.locked, row.ids, row.attempt_numbers) == (2, None, None)
        assert not _lock_is_free(committed, "a")  # the same keys as lock_limited's
        assert not _lock_is_free(committed, "b")
        assert _lock_is_free(committed, "c")
    assert _lock_is_free(committed, "a")  # released by the COMMIT


def test_after_complete_and_lock_the_claim_counts_the_previous_holders_claims(committed):
    """The lock taken with the acknowledgement: the claim after it sees what `a` committed."""
    _enqueue(committed, "sync_crm", 6)
    claim = flow.claim_limited(Job, kind="sync_crm", limits=MAX2, lease=60.0)
    with committed.begin() as conn:
        done = _claim(conn, claim, "b", limit=1)  # b runs one of the 2 slots
    second: list[int] = []
    with committed.connect() as a, committed.connect() as b:
        b_pid = b.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        b.rollback()

        def claimer_b() -> None:
            with b.begin():
                params = {"ids": done, "attempt_numbers": [1], "owner": "b"}
                b.execute(COMPLETE_AND_LOCK, {**params, "lock_kinds": ["sync_crm"]})
                second.extend(_claim(b, claim, "b"))

        with a.begin():
            a.execute(flow.lock_limited(Job, "sync_crm"))
            first = _claim(a, claim, "a")
            thread = threading.Thread(target=claimer_b)
            thread.start()
            wait_for(lambda: _backend_waiting_on_advisory(committed, b_pid), 10, "b on the lock")
            assert not second
        thread.join(10)
    assert len(first) == 1  # one slot was free
    # b freed its slot, then counted a's committed claim: one more fits, not two.
    assert len(second) == 1
    assert _running(committed, "sync_crm") == 2


def _driver(limits: dict[str, Any]) -> PostgresDriver:
    return PostgresDriver(Job, leases={}, default_lease=60.0, limits=limits)


def _statements(conn: Connection) -> list[str]:
    seen: list[str] = []
    event.listen(conn, "before_cursor_execute", lambda *args: seen.append(args[2]))
    return seen


def test_the_driver_takes_the_locks_asked_for_with_the_acknowledgement(committed):
    ids = _enqueue(committed, "sync_crm", 4)
    driver = _driver({"sync_crm": MAX2})
    with committed.begin() as conn:
        running = driver.job_claim_limited(conn, "sync_crm", ["default"], 1, "w")
    with committed.connect() as loop, committed.connect() as other:
        with other.begin():  # a handler's own transaction (transactional mode): no lock
            assert driver.job_complete(other, running, "w").locked == frozenset()
            assert _lock_is_free(committed, "sync_crm")
        with loop.begin():
            seen = _statements(loop)
            held = driver.job_complete(loop, running, "w", lock_kinds=["sync_crm", "unknown"])
            assert held == set()  # done on `other` already
            assert held.locked == {"sync_crm"}  # (not a limited kind: no lock)
            assert not _lock_is_free(committed, "sync_crm")
            claimed = driver.job_claim_limited(loop, "sync_crm", ["default"], 5, "w", locked=True)
            assert [job.id for job in claimed] == ids[1:3]
            assert len(seen) == 2  # the acknowledgement (with the lock), the claim
        with loop.begin():
            held = driver.job_complete(loop, claimed[:1], "w")
            assert held == {claimed[0].key}
            assert held.locked == frozenset()
            assert _lock_is_free(committed, "sync_crm")  # not asked for: not taken
        with loop.begin():  # the acknowledgement that stores results takes them too
            held = driver.job_complete(
                loop, claimed[1:], "w", ['{"n": 1}'], lock_kinds=["sync_crm"]
            )
            assert held == {claimed[1].key}
            assert not _lock_is_free(committed, "sync_crm")
    with committed.connect() as conn:
        assert conn.scalar(select(Job.result).where(Job.id == claimed[1].id)) == {"n": 1}


def test_an_empty_unlimited_claim_lets_limited_kinds_go_first_for_a_while(committed):
    _enqueue(committed, "sync_crm", 20)
    high = {"sync_crm": check_limits(max_running=1000)}
    driver = _driver(high)
    now = [0.0]
    limited = LimitedClaims(driver, high, clock=lambda: now[0])
    claimer = Claimer(driver, limited, ["default"], "w", clock=lambda: now[0])
    with committed.connect() as conn:
        seen = _statements(conn)

        def round_(free: int) -> list[str]:
            seen.clear()
            with conn.begin():
                kinds = [job.kind for job in claimer.claim(conn, free)]
            return kinds

        assert round_(2) == ["sync_crm"] * 2  # limited first; it filled the round
        assert round_(2) == ["sync_crm"] * 2  # unlimited first: it found nothing...
        assert len(seen) == 3  # (the unlimited claim, the kind lock, the limited claim)
        _enqueue(committed, "plain", 5)
        assert round_(2) == ["sync_crm"] * 2  # ...so the limited kinds go first
        assert round_(2) == ["sync_crm"] * 2  # in every round, while they fill it
        assert len(seen) == 2  # no unlimited claim
        assert round_(30) == ["sync_crm"] * 12 + ["plain"] * 5  # room left: it is asked
        assert round_(2) == []  # (nothing left)
        _enqueue(committed, "sync_crm", 4)
        _enqueue(committed, "plain", 4)
        limited.freed(["sync_crm"])  # (it gave nothing: as if one of its jobs finished)
        assert round_(2) == ["sync_crm"] * 2  # empty last time: limited first again
        now[0] += UNLIMITED_BACKOFF
        assert round_(2) == ["plain"] * 2  # its turn again once the backoff is over
        assert round_(2) == ["sync_crm"] * 2  # and both alternate while both have work
        assert round_(2) == ["plain"] * 2


def test_a_kind_sorting_before_the_locks_taken_ahead_waits_a_round(committed):
    """Taking `a`'s lock after `b`'s would break the sorted order: `a` is asked next round."""
    _enqueue(committed, "a", 2)
    _enqueue(committed, "b", 3)
    limits = {"a": MAX2, "b": MAX2}
    driver = _driver(limits)
    limited = LimitedClaims(driver, limits)
    with committed.begin() as conn:
        running = driver.job_claim_limited(conn, "b", ["default"], 1, "w")
    with committed.connect() as conn:
        with conn.begin():
            seen = _statements(conn)
            held = driver.job_complete(conn, running, "w", lock_kinds=["b"])
            kinds = [
                job.kind for job in limited.claim(conn, ["default"], 10, "w", held=held.locked)
            ]
            assert kinds == ["b", "b"]
            # The acknowledgement (with b's lock), whether `a` has jobs (no lock), b's
            # claim: no lock of `a` after `b`'s, and no claim of `a`.
            assert len(seen) == 3
            assert limited.kinds_to_lock() == ["a", "b"]  # `a` is locked ahead next round
            assert _lock_is_free(committed, "a")
        with conn.begin():
            kinds = [job.kind for job in limited.claim(conn, ["default"], 10, "w")]
            assert kinds == ["a", "a"]  # `b` is full (2 running)


def test_an_idle_unlimited_claim_claims_nothing_ahead_of_free_slots(committed):
    _enqueue(committed, "sync_crm", 20)
    high = {"sync_crm": check_limits(max_running=1000)}
    driver = _driver(high)
    now = [0.0]
    claimer = Claimer(driver, LimitedClaims(driver, high), ["default"], "w", clock=lambda: now[0])
    with committed.connect() as conn:
        seen = _statements(conn)

        def round_(free: int, ahead: int) -> list[str]:
            seen.clear()
            with conn.begin():
                return [job.kind for job in claimer.claim(conn, free, ahead)]

        assert round_(2, 5) == ["sync_crm"] * 2
        # Whether the (never asked) limited kind has jobs, its lock and claim, and the
        # (empty) claim ahead.
        assert len(seen) == 4
        _enqueue(committed, "plain", 5)
        assert round_(2, 5) == ["sync_crm"] * 2
        assert len(seen) == 2  # idle: no claim ahead of the free slots the limited kind took
        now[0] += UNLIMITED_BACKOFF
        assert round_(2, 5) == ["sync_crm"] * 2 + ["plain"] * 5


def test_idle_limited_kinds_are_looked_for_in_one_statement_without_their_locks(committed):
    limits = {kind: MAX2 for kind in ("a", "b", "c")}
    driver = _driver(limits)
    now = [0.0]
    limited = LimitedClaims(driver, limits, clock=lambda: now[0])
    with committed.connect() as conn:
        seen = _statements(conn)
        with conn.begin():
            assert limited.claim(conn, ["default"], 10, "w") == []
        assert len(seen) == 1  # none was ever asked: which are due, one statement
        _enqueue(committed, "b", 1)
        now[0] += MIN_BACKOFF
        seen.clear()
        with conn.begin():
            kinds = [job.kind for job in limited.claim(conn, ["default"], 10, "w")]
            assert _lock_is_free(committed, "a")
            assert _lock_is_free(committed, "c")
            assert not _lock_is_free(committed, "b")
        assert kinds == ["b"]
        assert len(seen) == 3  # which are due (no lock), then b's lock and claim
        assert limited.kinds_to_lock() == ["b"]  # it leased: locked ahead next round
