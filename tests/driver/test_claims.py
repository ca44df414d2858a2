"""Claims: `job_claim`, `job_claim_queues`, `job_claim_limited`, `job_start_rated`, `kinds_*`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, Select, Update, event
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Claimed, Driver
from tests.driver.conftest import OTHER, OWNER, add, claim, later, row
from tests.support.models import Job, new_queue


def test_claim_takes_due_jobs_in_priority_then_run_at_then_id_order(db: Engine, driver: Driver):
    plain, urgent, _later = add(db), add(db, priority=-1), add(db, run_at=later(3600))
    second = add(db)
    # (The rows come back in no particular order: which were taken is the order.)
    assert {job.id for job in claim(db, driver, 1)} == set(urgent)
    assert {job.id for job in claim(db, driver, 1)} == set(plain)
    assert {job.id for job in claim(db, driver, 10)} == set(second)  # not the one due later


def test_claim_leases_to_the_owner_and_counts_the_attempt(db: Engine, driver: Driver):
    [job_id] = add(db, kind="short")
    [job] = claim(db, driver)
    assert (job.id, job.kind, job.attempts, job.lease) == (job_id, "short", 1, 5.0)
    stored = row(db, job_id)
    assert (stored.status, stored.attempts, stored.locked_by) == ("running", 1, OWNER)
    assert stored.locked_until is not None


def test_claim_returns_what_a_handler_needs(db: Engine, driver: Driver):
    [job_id] = add(db, queue="mail", max_attempts=7, idempotency_key="order:4")
    [job] = claim(db, driver, queue="mail")
    assert (job.queue, job.payload, job.max_attempts) == ("mail", {"i": 0}, 7)
    assert job.idempotency_key == "order:4"
    assert job.key == (job_id, 1)


def test_claim_skips_locked_rows(db: Engine, driver: Driver):
    first, second = add(db, 2)
    with db.connect() as one, db.connect() as two, one.begin():
        assert [job.id for job in driver.job_claim(one, "default", 1, OWNER)] == [first]
        if not driver.supports_skip_locked:
            assert taken_after_commit(one, lambda: claim(db, driver, 5, OTHER)) == [second]
            return
        # `one` has not committed: `two` neither waits for its row nor takes it.
        with two.begin():
            assert [job.id for job in driver.job_claim(two, "default", 5, OTHER)] == [second]


def taken_after_commit(one: Connection, claim_rest: Callable[[], list[Claimed]]) -> list[int]:
    """Where writers take turns (SQLite): `claim_rest` waits for `one`'s COMMIT, then claims.

    Returns the ids it claimed once `one` committed; it claims nothing before.
    """
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.extend(job.id for job in claim_rest()))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # still waiting for `one`
    one.commit()
    waiter.join(30)
    return got


def test_claim_gives_each_job_to_one_of_two_concurrent_claimers(db: Engine, driver: Driver):
    ids = add(db, 40)
    got: dict[str, list[int]] = {OWNER: [], OTHER: []}

    def claimer(owner: str) -> None:
        while batch := claim(db, driver, 3, owner):
            got[owner] += [job.id for job in batch]

    threads = [threading.Thread(target=claimer, args=(owner,)) for owner in got]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(got[OWNER] + got[OTHER]) == ids


def test_claim_leaves_out_paused_queues(db: Engine, driver: Driver):
    add(db, queue="mail")
    with Session(db) as session, session.begin():
        new_queue().pause(session, "mail")
    assert claim(db, driver, queue="mail") == []


def test_claim_leaves_out_limited_kinds_and_kinds_not_handled(db: Engine, make_driver):
    add(db, kind="limited")
    add(db, kind="elsewhere")
    [mine] = add(db, kind="mine")
    from tests.driver.conftest import LIMITS

    driver = make_driver(limits=LIMITS, kinds=["mine", "limited"])
    assert [job.id for job in claim(db, driver, 10)] == [mine]


def test_claim_of_nothing_due_returns_nothing(db: Engine, driver: Driver):
    add(db, run_at=later(60))
    assert claim(db, driver, 5) == []


def test_claim_queues_takes_the_start_queue_first_then_wraps_around(db: Engine, driver: Driver):
    a = add(db, 2, queue="a")
    b = add(db, 2, queue="b")
    c = add(db, 2, queue="c")
    with db.begin() as conn:
        got = driver.job_claim_queues(conn, ["a", "b", "c"], 5, OWNER, start=1)
    assert {job.id for job in got} == {*b, *c, a[0]}


def test_claim_queues_skips_locked_rows(db: Engine, driver: Driver):
    first, second = add(db, 2, queue="a")
    with db.connect() as one, db.connect() as two, one.begin():
        assert [j.id for j in driver.job_claim_queues(one, ["a", "b"], 1, OWNER)] == [first]
        if not driver.supports_skip_locked:

            def rest() -> list[Claimed]:
                with db.begin() as conn:
                    return driver.job_claim_queues(conn, ["a", "b"], 5, OTHER)

            assert taken_after_commit(one, rest) == [second]
            return
        with two.begin():
            got = driver.job_claim_queues(two, ["a", "b"], 5, OTHER)
            assert [job.id for job in got] == [second]


def test_claim_limited_holds_max_running_across_claimers(db: Engine, driver: Driver):
    add(db, 5, kind="limited")
    with db.begin() as conn:
        first = driver.job_claim_limited(conn, "limited", ["default"], 5, OWNER)
    with db.begin() as conn:
        second = driver.job_claim_limited(conn, "limited", ["default"], 5, OTHER)
    assert (len(first), len(second)) == (2, 0)  # max_running=2 over every worker


def test_claim_limited_waits_for_the_other_claimer_of_its_kind(db: Engine, driver: Driver):
    add(db, 5, kind="limited")
    second: list[int] = []
    with db.connect() as one, db.connect() as two:
        with one.begin():
            assert len(driver.job_claim_limited(one, "limited", ["default"], 1, OWNER)) == 1

            def claim_two() -> None:
                with two.begin():
                    got = driver.job_claim_limited(two, "limited", ["default"], 5, OTHER)
                    second.extend(job.id for job in got)

            thread = threading.Thread(target=claim_two)
            thread.start()
            thread.join(0.5)
            assert thread.is_alive()  # it waits for `one`'s lock...
        thread.join(30)
    assert len(second) == 1  # ...then counts what `one` committed: 2 - 1


def test_claim_limited_keeps_one_running_job_per_key(db: Engine, driver: Driver):
    a1, a2 = add(db, 2, kind="per_key", concurrency_key="a")
    [b1] = add(db, kind="per_key", concurrency_key="b")
    with db.begin() as conn:
        got = driver.job_claim_limited(conn, "per_key", ["default"], 5, OWNER)
    assert sorted(job.id for job in got) == [a1, b1]
    assert row(db, a2).status == "pending"


def test_claim_limited_runs_the_same_statements_each_round(db: Engine, driver: Driver):
    # A limited kind's round takes a few jobs: its statements are kept (kind, queue and
    # counts bound), not built anew. The kind's lock aside, round 2 runs round 1's objects.
    for key in "abcdef":
        add(db, kind="per_key", concurrency_key=key)
    add(db, 6, kind="limited")
    add(db, 6, kind="rated")
    rounds: list[list[Any]] = []

    def seen(conn: Any, element: Any, *args: Any) -> None:
        choosing = isinstance(element, Select)
        leasing = isinstance(element, Update) and "RETURNING" in str(element.compile(conn))
        if choosing or leasing:  # (not the kind's lock: an INSERT, or SQLite's UPDATE)
            rounds[-1].append(element)

    event.listen(db, "before_execute", seen)
    try:
        for _ in range(2):
            rounds.append([])
            with db.begin() as conn:
                for kind in ("per_key", "limited", "rated"):
                    assert len(driver.job_claim_limited(conn, kind, ["default"], 1, OWNER)) == 1
    finally:
        event.remove(db, "before_execute", seen)
    first, second = rounds
    assert len(first) == len(second) >= 3
    assert [a is b for a, b in zip(first, second, strict=True)] == [True] * len(first), first


def test_claim_limited_with_the_lock_held_runs_no_lock_statement(db: Engine, driver: Driver):
    add(db, 3, kind="limited")
    with db.begin() as conn:
        driver.job_complete(conn, [], OWNER)  # (nothing: no statement)
        got = driver.job_claim_limited(conn, "limited", ["default"], 1, OWNER, locked=True)
    assert len(got) == 1


def test_start_rated_starts_within_the_window_and_refuses_past_it(db: Engine, driver: Driver):
    add(db, 3, kind="rated")
    with db.begin() as conn:
        got = driver.job_claim_limited(conn, "rated", ["default"], 5, OWNER)
    assert len(got) == 2  # rate_limit=(2, 60s): the claims logged two starts
    with db.begin() as conn:
        assert driver.job_start_rated(conn, got[0]) is True  # its own stamp moved to now
    [plain_id] = add(db)
    [plain] = claim(db, driver)
    assert plain.id == plain_id
    with db.begin() as conn:
        assert driver.job_start_rated(conn, plain) is True  # no rate limit: starts


def test_kinds_due_names_the_limited_kinds_with_a_due_job(db: Engine, driver: Driver):
    add(db, kind="limited")
    add(db, kind="per_key", run_at=later(3600))
    with db.connect() as conn:
        assert driver.kinds_due(conn, ["limited", "per_key", "rated"], ["default"]) == {"limited"}
        assert driver.kinds_due(conn, ["limited"], ["other"]) == set()


def test_kinds_limited_due_says_whether_a_limited_kind_waits(db: Engine, driver: Driver):
    with db.connect() as conn:
        assert driver.kinds_limited_due(conn, ["default"]) is False
    add(db, kind="plain")
    with db.connect() as conn:
        assert driver.kinds_limited_due(conn, ["default"]) is False
    add(db, kind="limited")
    with db.connect() as conn:
        assert driver.kinds_limited_due(conn, ["default"]) is True
        assert driver.kinds_limited_due(conn, ["other"]) is False


def test_claimed_rows_are_the_same_job_as_the_orm_sees(db: Engine, driver: Driver):
    [job_id] = add(db)
    [job] = claim(db, driver)
    with Session(db) as session:
        assert session.get(Job, job_id).attempts == job.attempts  # type: ignore[union-attr]
