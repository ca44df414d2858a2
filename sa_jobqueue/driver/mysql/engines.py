"""A worker's engine on MariaDB and MySQL: READ COMMITTED, so its locking reads lock no gaps.

Under InnoDB's default REPEATABLE READ a locking read (the sweeper's and the claim's
``SELECT ... FOR UPDATE SKIP LOCKED``) also locks the gaps of the index range it
scanned; a worker stopped in such a transaction (SIGSTOP, a long GC pause) then
blocks the other workers' writes into that range (a ``done`` moving a row out of
``running``) until it resumes or ``innodb_lock_wait_timeout`` (50 s) passes. READ
COMMITTED takes record locks only. Every statement of the driver holds under it:
its reads that decide a write are locking reads. See docs/notifications.md.
"""

from __future__ import annotations

from sqlalchemy import Engine

from sa_jobqueue.driver.mysql.xact_locks import release_at_end

__all__ = ["ISOLATION_LEVEL", "check_worker_engine", "snapshot_engine", "worker_engine"]

#: The isolation level of a worker's own transactions on MariaDB and MySQL.
ISOLATION_LEVEL = "READ COMMITTED"


def check_worker_engine(engine: Engine) -> None:
    """Nothing to refuse: any MariaDB or MySQL engine serves a worker."""


def worker_engine(engine: Engine) -> Engine:
    """`engine` for a worker: the same pool, its transactions READ COMMITTED.

    The level is set on each connection the worker checks out and reset when it
    goes back to the pool, so the application's own transactions keep theirs. The
    copy releases its ``GET_LOCK`` locks at each COMMIT and ROLLBACK
    (`xact_locks.release_at_end`).
    """
    worker = engine.execution_options(isolation_level=ISOLATION_LEVEL)
    release_at_end(worker)
    return worker


def snapshot_engine(engine: Engine) -> Engine:
    """`engine` for reads that must agree: the same pool, each transaction REPEATABLE READ.

    InnoDB's consistent read then takes its snapshot at the transaction's first read and
    keeps it for the others (a server or engine set to READ COMMITTED would not).
    """
    return engine.execution_options(isolation_level="REPEATABLE READ")
