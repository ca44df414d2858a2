"""Locks and transactions: `lock_try`, `lock_write`, `commit_asynchronously`, the capabilities.

Each capability a caller asks (`supports_writing_ctes`, `supports_statement_timeout`,
`supports_row_estimates`) is pinned here to what the database does: what the callers
run when it is true runs, and fails when it is false.
"""

from __future__ import annotations

from typing import cast

import pytest
from sqlalchemy import Engine, Table, exc, select, text, update

from sa_jobqueue import statements
from sa_jobqueue.driver import Driver
from tests.driver.conftest import OWNER, add, claim, row, writing_beside
from tests.support.models import Job


def test_lock_try_is_taken_by_one_transaction_at_a_time(db: Engine, driver: Driver):
    if not driver.supports_advisory_locks:
        # Writers take turns (SQLite): the lock is the write lock, one for every
        # purpose; a second taker waits for the holder's COMMIT, then holds it alone.
        def take() -> bool:
            with db.begin() as two:
                return driver.lock_try(two, "prune")

        with db.connect() as one, one.begin():
            assert driver.lock_try(one, "sweep") is True
            assert writing_beside(driver, one, take) is True
        return
    with db.connect() as one, db.connect() as two:
        with one.begin():
            assert driver.lock_try(one, "sweep") is True
            with two.begin():
                assert driver.lock_try(two, "sweep") is False  # never waits
                assert driver.lock_try(two, "prune") is True  # another purpose: free
        with two.begin():
            assert driver.lock_try(two, "sweep") is True  # `one` committed: free again


def test_commit_asynchronously_still_commits_the_transaction(db: Engine, driver: Driver):
    add(db)
    with db.begin() as conn:
        driver.commit_asynchronously(conn)
        [job] = driver.job_claim(conn, "default", 1, OWNER)
    assert row(db, job.id).status == "running"
    assert claim(db, driver) == []


def test_capabilities_are_named_booleans(driver: Driver):
    capabilities = {
        "supports_listen_notify": driver.supports_listen_notify,
        "supports_skip_locked": driver.supports_skip_locked,
        "supports_returning": driver.supports_returning,
        "supports_partial_indexes": driver.supports_partial_indexes,
        "supports_advisory_locks": driver.supports_advisory_locks,
        "supports_asynchronous_commit": driver.supports_asynchronous_commit,
        "supports_writing_ctes": driver.supports_writing_ctes,
        "supports_statement_timeout": driver.supports_statement_timeout,
        "supports_row_estimates": driver.supports_row_estimates,
        "supports_cascading_deletes": driver.supports_cascading_deletes,
        "supports_partitions": driver.supports_partitions,
        "supports_one_statement_steps": driver.supports_one_statement_steps,
    }
    assert all(isinstance(value, bool) for value in capabilities.values()), capabilities


def test_partitions_are_postgresqls_and_mariadbs(db: Engine, driver: Driver):
    # The archive (ops.archive) runs on PostgreSQL's and MariaDB's range partitions.
    assert driver.supports_partitions is (db.dialect.name in ("postgresql", "mariadb"))


def test_lock_write_waits_for_the_writer_then_the_transaction_reads_and_writes(
    db: Engine, driver: Driver
):
    first, second = add(db, 2)

    def repair() -> str:
        with db.begin() as two:
            driver.lock_write(two)  # SQLite: waits for `one`'s COMMIT; elsewhere: nothing
            status: str = two.execute(select(Job.status).where(Job.id == second)).scalar_one()
            two.execute(update(Job).where(Job.id == second).values(priority=1))
            return status

    with db.connect() as one:
        one.execute(update(Job).where(Job.id == first).values(priority=2))  # a writer, open
        assert writing_beside(driver, one, repair) == "pending"
        one.commit()  # where the write ran beside it (SQLite: committed already)
    assert (row(db, first).priority, row(db, second).priority) == (2, 1)


def test_writing_ctes_run_where_the_driver_says_so(db: Engine, driver: Driver):
    [job_id] = add(db)
    touched = (
        update(Job).where(Job.id == job_id).values(priority=3).returning(Job.id).cte("touched")
    )
    if driver.supports_writing_ctes:
        with db.begin() as conn:
            assert conn.execute(select(touched.c.id)).scalars().all() == [job_id]
        assert row(db, job_id).priority == 3
        return
    with pytest.raises((exc.DBAPIError, exc.CompileError)), db.begin() as conn:
        conn.execute(select(touched.c.id)).all()


#: A statement that runs for seconds on every database (a count to 10**8).
SLOW = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
    "SELECT count(*) FROM n"
)


def test_statement_timeout_bounds_statements_where_the_driver_says_so(db: Engine, driver: Driver):
    timeout = statements.set_statement_timeout()
    if not driver.supports_statement_timeout:
        with pytest.raises(exc.DBAPIError), db.begin() as conn:
            conn.execute(timeout, {"timeout": "10ms"})
        return
    with db.connect() as conn:
        conn.execute(timeout, {"timeout": "10ms"})
        with pytest.raises(exc.OperationalError, match="timeout"):
            conn.execute(text(SLOW))
        conn.rollback()


def test_row_estimates_are_read_where_the_driver_says_so(db: Engine, driver: Driver):
    table = cast(Table, Job.__table__)
    where = {"table": table.name, "schema": table.schema}
    if not driver.supports_row_estimates:
        with pytest.raises(exc.DBAPIError), db.connect() as conn:
            conn.execute(statements.status_estimates(), where).all()
        return
    with db.connect() as conn:
        estimates: dict[str, int] = {
            status: jobs for status, jobs in conn.execute(statements.status_estimates(), where)
        }
    assert all(isinstance(status, str) and jobs >= 0 for status, jobs in estimates.items())
