"""Invariants that no other test names directly: each test tries to break one.

Invariant 2: no claim transaction stays open while a handler runs (lease mode),
and in transactional mode only the handler's own transaction is open.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Job

# Backends of this database, other than `pid`, whose transaction began before `:t0`.
OPEN_SINCE = text(
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> :pid "
    "AND xact_start IS NOT NULL AND xact_start < :t0"
)


def _open_transactions_during_handler(engine, *, transactional: bool) -> list[int]:
    jobs: JobQueue[Job] = JobQueue(Job)
    seen: list[int] = []
    done = threading.Event()

    @jobs.task("probe", transactional=transactional, lease=timedelta(seconds=30))
    def probe(ctx: JobContext) -> None:
        with engine.connect() as probe_conn:
            t0 = probe_conn.execute(text("SELECT clock_timestamp()")).scalar_one()
            probe_conn.rollback()
            # Any transaction open since before t0 is still open after this pause.
            done.wait(0.5)
            own = ctx.session.connection() if transactional else None
            pid = own.execute(text("SELECT pg_backend_pid()")).scalar_one() if own else -1
            probe_pid = probe_conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            exclude = pid if transactional else probe_pid
            count = probe_conn.execute(OPEN_SINCE, {"pid": exclude, "t0": t0}).scalar_one()
            # The probe connection's own transaction began after t0, so it never counts.
            seen.append(int(count))

    with Session(engine) as session, session.begin():
        jobs.enqueue(session, "probe")
    assert jobs.worker(engine, queues=["default"]).drain() == 1
    return seen


def test_no_claim_transaction_is_open_while_a_lease_mode_handler_runs(committed):
    assert _open_transactions_during_handler(committed, transactional=False) == [0]


def test_only_the_handlers_own_transaction_is_open_in_transactional_mode(committed):
    assert _open_transactions_during_handler(committed, transactional=True) == [0]
