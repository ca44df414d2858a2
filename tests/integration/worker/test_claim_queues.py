"""A worker of many queues claims over all of them in one statement (`statements.claim_queues`).

What it must keep from one claim per queue: the queues are taken in the order given
(the `Claimer` rotates it each round), each queue's jobs in claim order (priority,
run_at, id), paused queues and limited kinds left out, locked rows stepped over
inside their queue, and no row locked that is not leased. What it changes: the
number of statements, one per round however many queues are empty.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.orm import Session

from sa_jobqueue import ValidationError
from sa_jobqueue.core.limits import check_limits
from sa_jobqueue.driver.postgres import PostgresDriver, claims
from sa_jobqueue.worker.claimer import Claimer
from sa_jobqueue.worker.limited_claimer import LimitedClaims
from tests.support.models import Job, new_queue

OWNER = "claim-queues-test"


def _add(engine: Engine, rows: list[dict[str, Any]]) -> list[int]:
    """Insert jobs (kind ``noop`` unless given); return their ids in order."""
    with Session(engine) as session, session.begin():
        jobs = [Job(**{"kind": "noop", **row}) for row in rows]
        session.add_all(jobs)
        session.flush()
        return [job.id for job in jobs]


def _driver(limits: dict[str, Any] | None = None) -> PostgresDriver:
    return PostgresDriver(Job, leases={}, default_lease=300.0, limits=limits)


def _claims(engine: Engine) -> list[str]:
    """A list the engine appends each claim statement's SQL to (``FOR UPDATE SKIP LOCKED``)."""
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def look(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "SKIP LOCKED" in statement:
            seen.append(statement)

    return seen


def test_queues_are_taken_in_the_order_given_each_in_claim_order(committed):
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    a_late, a_urgent, a_early = _add(
        committed,
        [
            {"queue": "a"},
            {"queue": "a", "priority": -1},
            {"queue": "a", "run_at": past},
        ],
    )
    (b_first, b_second) = _add(committed, [{"queue": "b"}, {"queue": "b"}])
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim_queues(conn, ["empty", "a", "b"], 4, OWNER)
    assert {job.id for job in got} == {a_urgent, a_early, a_late, b_first}
    with committed.connect() as conn, conn.begin():
        rest = _driver().job_claim_queues(conn, ["b", "a"], 4, OWNER)
    assert [job.id for job in rest] == [b_second]


def test_a_later_queue_goes_first_when_the_order_says_so(committed):
    a_ids = _add(committed, [{"queue": "a"} for _ in range(3)])
    b_ids = _add(committed, [{"queue": "b"} for _ in range(3)])
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim_queues(conn, ["b", "a"], 4, OWNER)
    assert {job.id for job in got} == {*b_ids, a_ids[0]}


def test_start_names_the_queue_that_goes_first_wrapping_around(committed):
    a_ids = _add(committed, [{"queue": "a"} for _ in range(2)])
    c_ids = _add(committed, [{"queue": "c"}])
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim_queues(conn, ["a", "b", "c"], 2, OWNER, start=2)
    assert {job.id for job in got} == {c_ids[0], a_ids[0]}


def test_queue_names_written_into_the_statement_are_checked_first():
    with pytest.raises(ValidationError, match="queue"):
        claims.claim_queues(Job, queues=["a", "b'; --"], leases={}, default_lease=300.0, ceiling=32)


def test_paused_queues_and_limited_kinds_are_left_out(committed):
    jobs = new_queue()
    _add(committed, [{"queue": "held"}])
    [_limited, free] = _add(committed, [{"queue": "a", "kind": "sync_crm"}, {"queue": "a"}])
    with Session(committed) as session, session.begin():
        jobs.pause(session, "held")
    driver = _driver({"sync_crm": check_limits(max_running=1)})
    with committed.connect() as conn, conn.begin():
        got = driver.job_claim_queues(conn, ["held", "a"], 10, OWNER)
    assert [job.id for job in got] == [free]  # neither `paused` nor `limited`


def test_rows_locked_by_another_claimer_are_stepped_over_inside_their_queue(committed):
    a_ids = _add(committed, [{"queue": "a"} for _ in range(4)])
    b_ids = _add(committed, [{"queue": "b"} for _ in range(2)])
    with committed.connect() as other, other.begin():
        other.execute(
            text("SELECT id FROM jobs WHERE id = ANY(:ids) FOR UPDATE"), {"ids": a_ids[:2]}
        )
        with committed.connect() as conn, conn.begin():
            got = _driver().job_claim_queues(conn, ["a", "b"], 3, OWNER)
    assert {job.id for job in got} == {a_ids[2], a_ids[3], b_ids[0]}


def test_no_row_is_locked_that_is_not_leased(committed):
    _add(committed, [{"queue": q} for q in ("a", "b", "c") for _ in range(5)])
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim_queues(conn, ["a", "b", "c"], 7, OWNER)
        assert len(got) == 7
        with committed.connect() as other, other.begin():
            lockable = other.execute(
                text(
                    "SELECT count(*) FROM (SELECT id FROM jobs WHERE status = 'pending'"
                    " FOR UPDATE SKIP LOCKED) AS free"
                )
            ).scalar_one()
    assert lockable == 15 - 7


def test_a_worker_of_many_queues_runs_one_claim_statement_per_round(committed):
    queues = [f"q{i:03d}" for i in range(200)]
    ids = _add(committed, [{"queue": q} for q in queues[::50] for _ in range(3)])
    seen = _claims(committed)
    claimer = Claimer(_driver(), LimitedClaims(_driver(), {}), queues, OWNER)
    with committed.connect() as conn, conn.begin():
        got = claimer.claim(conn, 32)
    assert sorted(job.id for job in got) == sorted(ids)
    assert len(seen) == 1
    assert "unnest" in seen[0]


def test_a_worker_of_one_queue_keeps_the_single_queue_statement(committed):
    [job_id] = _add(committed, [{"queue": "solo"}])
    seen = _claims(committed)
    claimer = Claimer(_driver(), LimitedClaims(_driver(), {}), ["solo"], OWNER)
    with committed.connect() as conn, conn.begin():
        assert [job.id for job in claimer.claim(conn, 8)] == [job_id]
    assert len(seen) == 1
    assert "unnest" not in seen[0]


def test_the_first_queue_rotates_so_a_busy_queue_cannot_hold_the_others_back(committed):
    busy = _add(committed, [{"queue": "a"} for _ in range(20)])
    quiet = _add(committed, [{"queue": "b"}, {"queue": "c"}])
    claimer = Claimer(_driver(), LimitedClaims(_driver(), {}), ["a", "b", "c"], OWNER)
    rounds: list[set[int]] = []
    for _ in range(3):
        with committed.connect() as conn, conn.begin():
            rounds.append({job.id for job in claimer.claim(conn, 2)})
    assert rounds[0] == set(busy[:2])  # a goes first
    assert rounds[1] == {quiet[0], quiet[1]}  # then b, then c
    assert rounds[2] == {busy[2], busy[3]}  # c is empty now, a fills the round


def test_queues_with_due_jobs_take_turns_however_the_empty_ones_lie(committed):
    """Two busy queues side by side among empty ones: each round goes to the other one.

    Rotating the first queue by one per round would give `a` every round that starts
    at an empty queue (four rounds in five here); starting after the last queue
    served alternates them.
    """
    _add(committed, [{"queue": q} for q in ("a", "b") for _ in range(20)])
    queues = ["a", "b", "c", "d", "e"]
    claimer = Claimer(_driver(), LimitedClaims(_driver(), {}), queues, OWNER)
    served: list[str] = []
    for _ in range(6):
        with committed.connect() as conn, conn.begin():
            got = claimer.claim(conn, 2)
        assert len({job.queue for job in got}) == 1
        served.append(got[0].queue)
    assert served == ["a", "b", "a", "b", "a", "b"]


def _plan(conn: Connection, one_queue: bool, queues: list[str], generic: bool) -> str:
    """EXPLAIN ANALYZE of a claim statement prepared as the driver runs it, every value bound.

    The plan is forced custom or generic: psycopg prepares a statement after five
    executions, and PostgreSQL may then keep a generic plan.
    """
    mode = "force_generic_plan" if generic else "force_custom_plan"
    conn.execute(text(f"SET LOCAL plan_cache_mode = {mode}"))
    if one_queue:
        statement = claims.claim(Job, leases={}, default_lease=300.0, ceiling=32)
        values: dict[str, Any] = {"queue_name": queues[0]}
    else:
        statement = claims.claim_queues(
            Job, queues=queues, leases={}, default_lease=300.0, ceiling=32
        )
        values = {"start": 0}
    sql, arguments = _prepared(statement, {**values, "limit": 32, "owner": OWNER})
    conn.exec_driver_sql(f"PREPARE sajq_claim AS {sql}")
    try:
        rows = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE sajq_claim({arguments})")
        return "\n".join(row[0] for row in rows)
    finally:
        conn.exec_driver_sql("DEALLOCATE sajq_claim")  # PREPARE outlives the transaction


def _prepared(statement: Any, values: dict[str, Any]) -> tuple[str, str]:
    """`statement` with each bound parameter as ``$n``, and the arguments to EXECUTE it with.

    EXECUTE inside EXPLAIN takes no bound parameters, so the arguments are literals
    (plain names and numbers here).
    """
    compiled = statement.compile(dialect=psycopg.dialect())
    params = {**compiled.params, **values}
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = re.sub(r"%\((\w+)\)s", number, str(compiled))
    arguments = ", ".join(
        f"'{params[name]}'" if isinstance(params[name], str) else str(params[name])
        for name in names
    )
    return sql, arguments


@pytest.mark.parametrize("analysed", [False, True], ids=["stale", "fresh"])
@pytest.mark.parametrize("one_queue", [True, False], ids=["claim", "claim_queues"])
def test_the_plan_walks_the_pending_index_then_finds_the_rows_by_primary_key(
    committed, one_queue, analysed
):
    """Custom and generic plans, beside one deep queue among thin ones.

    With stale statistics (the deep queue arrived after ANALYZE) the planner thinks
    it as thin as the others: shown the LIMIT, it would read and sort all of it on
    every claim. With fresh ones, and the LIMIT hidden from it, it would expect
    hundreds of rows to lease and find them by a hash join over a scan of the table.
    """
    queues = [f"q{i:03d}" for i in range(100)]
    _add(committed, [{"queue": q} for q in queues for _ in range(3)])
    with committed.connect() as conn:
        conn.execute(text("ANALYZE jobs"))
        conn.commit()
    with committed.connect() as conn, conn.begin():
        conn.execute(
            text(
                "INSERT INTO jobs (kind, queue) SELECT 'noop', 'deep' FROM generate_series(1, 5000)"
            )
        )
    if analysed:
        with committed.connect() as conn:
            conn.execute(text("ANALYZE jobs"))
            conn.commit()
    for generic in (False, True):
        with committed.connect() as conn, conn.begin():
            plan = _plan(conn, one_queue, ["deep", *queues], generic)
            conn.rollback()
        assert "Index Scan using ix_jobs_pending" in plan, plan
        assert "Index Scan using jobs_pkey" in plan, plan
        for step in ("Sort", "Seq Scan", "Hash", "Bitmap"):
            assert step not in plan, plan
