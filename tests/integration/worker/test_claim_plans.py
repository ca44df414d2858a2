"""Once psycopg prepared them, PostgreSQL plans the claims and the next-due probe once.

psycopg prepares a statement on the server after five runs; PostgreSQL then plans it
with each run's values (a custom plan) until the plan built without them (the generic
plan) costs no more than those did, and keeps that one. A claim planned again at every
run paid 0.3-0.5 ms of an idle worker's wake-up; the statements are written so that both
plans cost the same (`claims._within`, the kinds and the next-due probe's LIMIT written
into the SQL), and PostgreSQL's own choice settles on the generic plan: no session setting
of the claim loop's connection, nothing for a pool to reset. PostgreSQL only: the other
databases have no plan cache of this kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.postgres import PostgresDriver, claims, plan_cache
from tests.integration.worker.test_claim_queues import _prepared
from tests.support.models import Job

OWNER = "claim-plans-test"
QUEUES = ["a", "b", "c", "d"]
#: Runs of each statement: psycopg prepares at the fifth, PostgreSQL plans the first
#: five prepared runs with their values, and may choose the generic plan from then on.
RUNS = 14


def _driver(**options: Any) -> PostgresDriver:
    return PostgresDriver(Job, leases={"noop": 60.0}, default_lease=300.0, **options)


Run = Callable[[Connection, int], object]

CASES: dict[str, tuple[Run, str]] = {
    # (what a claim round runs, run i; a fragment of that statement's SQL only)
    "one queue": (
        lambda conn, i: _driver().job_claim(conn, "a", 1 + i % 32, OWNER),
        "UPDATE jobs SET status",
    ),
    "one queue, its limited kinds excluded": (
        lambda conn, i: _driver(limits={"capped": Limits(max_running=2)}).job_claim(
            conn, "a", 1 + i % 32, OWNER
        ),
        "NOT IN ('capped')",
    ),
    "one queue, the handled kinds only": (
        lambda conn, i: _driver(kinds=["noop", "other"]).job_claim(conn, "a", 1 + i % 32, OWNER),
        "IN ('noop', 'other')",
    ),
    "four queues, from each in turn": (
        lambda conn, i: _driver().job_claim_queues(conn, QUEUES, 1 + i % 32, OWNER, i % 4),
        "ARRAY['a', 'b', 'c', 'd']",
    ),
    "the next-due probe": (
        lambda conn, i: _driver().queue_next_due(conn, ["a"]),
        "AS seconds",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_prepared_claim_is_planned_once_for_any_limit(committed: Engine, case: str) -> None:
    run, fragment = CASES[case]
    with committed.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (queue, kind, payload, run_at) SELECT q, 'noop', '{}', "
                "now() + interval '1 hour' FROM unnest(CAST(:queues AS text[])) AS q, "
                "generate_series(1, 50)"
            ),
            {"queues": QUEUES},
        )
        conn.execute(text("ANALYZE jobs"))
    with committed.connect() as conn:
        for i in range(RUNS):
            with conn.begin():
                run(conn, i)
        plans = conn.execute(
            text(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE NOT from_sql AND strpos(statement, :fragment) > 0"
            ),
            {"fragment": fragment},
        ).all()
    assert plans, f"psycopg prepared no statement with {fragment!r}"
    # At most the five custom plans PostgreSQL makes before it compares (none for a
    # statement without parameters), then the generic plan at every run.
    got = [(generic > 0, custom <= 5) for _, generic, custom in plans]
    assert got == [(True, True)] * len(plans), [" ".join(s.split())[:200] for s, _, _ in plans]


@pytest.mark.parametrize(
    ("limit", "ceiling"), [(1, 32), (32, 32), (33, 64), (160, 256), (1000, 1024)]
)
def test_a_claim_is_built_for_the_power_of_two_at_or_above_its_limit(limit, ceiling):
    assert plan_cache.claim_ceiling(limit) == ceiling
    statement = claims.claim(Job, leases={}, default_lease=60.0, ceiling=ceiling)
    assert f"LIMIT {ceiling})" in str(statement.compile())


def test_a_claim_leases_its_limit_and_no_more_under_its_ceiling(committed: Engine) -> None:
    with committed.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (queue, kind, payload) SELECT 'a', 'noop', '{}' "
                "FROM generate_series(1, 100)"
            )
        )
    driver = _driver()
    leased = []
    with committed.connect() as conn:
        for limit in (33, 1, 7, 64):  # ceilings 64, 32, 32, 64; 59 jobs left for the last
            with conn.begin():
                leased.append(len(driver.job_claim(conn, "a", limit, OWNER)))
    assert leased == [33, 1, 7, 59]


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("analysed", [False, True], ids=["stale", "fresh"])
def test_a_claim_beside_a_big_table_walks_the_index_and_sorts_nothing(
    committed: Engine, analysed: bool, generic: bool
) -> None:
    """20,000 due jobs beside 30,000 finished ones, read as if the table were not cached.

    With the lateral walk's LIMIT hidden, the planner planned for a tenth of the queue's
    due rows; beside 10,000,000 finished jobs (a table no cache holds) that was a bitmap
    scan and a sort of all 20,000 to lock 41, 24-159 ms per claim. The ceiling written
    in plans for its first rows however many it expects: fresh statistics (20,000) or
    stale ones (the jobs arrived after ANALYZE, as without autovacuum). A small
    ``effective_cache_size`` prices this table's index walk as 10 GB's would be.
    """
    with committed.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (queue, kind, payload, status, finished_at) "
                "SELECT 'a', 'noop', '{}', 'done', now() FROM generate_series(1, 30000)"
            )
        )
    with committed.connect() as conn:
        conn.execute(text("ANALYZE jobs"))
        conn.commit()
    with committed.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (queue, kind, payload) "
                "SELECT 'a', 'noop', '{}' FROM generate_series(1, 20000)"
            )
        )
    if analysed:
        with committed.connect() as conn:
            conn.execute(text("ANALYZE jobs"))
            conn.commit()
    statement = claims.claim(Job, leases={}, default_lease=60.0, kinds=["noop"], ceiling=64)
    sql, arguments = _prepared(statement, {"queue_name": "a", "limit": 41, "owner": OWNER})
    mode = "force_generic_plan" if generic else "force_custom_plan"
    with committed.connect() as conn:
        transaction = conn.begin()
        conn.execute(text(f"SET LOCAL plan_cache_mode = {mode}"))
        conn.execute(text("SET LOCAL effective_cache_size = '64kB'"))
        conn.exec_driver_sql(f"PREPARE sajq_claim AS {sql}")
        try:
            rows = conn.exec_driver_sql(
                f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE sajq_claim({arguments})"
            )
            plan = "\n".join(row[0] for row in rows)
        finally:
            conn.exec_driver_sql("DEALLOCATE sajq_claim")  # PREPARE outlives the transaction
            transaction.rollback()  # nothing leased
    assert "Index Scan using ix_jobs_pending" in plan, plan
    for step in ("Sort", "Bitmap", "Seq Scan"):
        assert step not in plan, plan
    assert "rows=41 loops=1" in plan, plan
