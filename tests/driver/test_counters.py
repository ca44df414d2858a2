"""Counters: every job that ends is logged once, and `counters_compact` moves the log exactly.

Run on every driver; read back through `statements.counted_by_kind` and plain reads.
"""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from sa_jobqueue import statements
from sa_jobqueue.driver import Driver
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from tests.driver.conftest import OWNER, add, claim
from tests.support.models import Job

COUNTS = counts_table_for(Job.__table__)  # type: ignore[arg-type]
ENDED = ended_table_for(Job.__table__)  # type: ignore[arg-type]


def logged(engine: Engine) -> int:
    """Jobs in the log (a row may count several: a done statement logs its batch)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.sum(ENDED.c.jobs), 0))).scalar_one())


def rows_of(engine: Engine, table: object) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def counted(engine: Engine) -> dict[tuple[str, str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(statements.counted_by_kind(Job))
        return {(r.queue, r.kind, r.status): int(r.jobs) for r in rows}


def test_each_job_that_ends_is_logged_once_and_a_claim_or_a_stale_done_logs_nothing(
    db: Engine, driver: Driver
):
    add(db, 3)
    jobs = claim(db, driver, 3)
    assert logged(db) == 0  # a claim ends nothing
    with db.begin() as conn:
        driver.job_complete(conn, jobs, OWNER)
    with db.begin() as conn:
        driver.job_complete(conn, jobs, OWNER)  # stale: fenced out, nothing ends again
    assert logged(db) == 3
    assert counted(db) == {("default", "plain", "done"): 3}


def test_counters_compact_moves_exactly_the_rows_it_adds_in_batches(db: Engine, driver: Driver):
    add(db, 5)
    for job in claim(db, driver, 5):  # one done statement each: five rows in the log
        with db.begin() as conn:
            driver.job_complete(conn, [job], OWNER)
    with db.begin() as conn:
        assert driver.counters_compact(conn, 2) == 2
    assert (rows_of(db, ENDED), rows_of(db, COUNTS)) == (3, 1)
    assert counted(db) == {("default", "plain", "done"): 5}  # rollup + log: each once
    with db.begin() as conn:
        assert driver.counters_compact(conn, 10) == 3
        assert driver.counters_compact(conn, 10) == 0
    assert rows_of(db, ENDED) == 0
    with db.connect() as conn:
        jobs, longest = conn.execute(select(COUNTS.c.jobs, COUNTS.c.max_seconds)).one()
    assert jobs == 5
    assert longest >= 0
