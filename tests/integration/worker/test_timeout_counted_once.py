"""A timed-out attempt is counted once, even when its handler's late report shares its batch."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue
from sa_jobqueue.driver.postgres import PostgresDriver
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.worker.attempt import InFlight, Outcome, Result
from sa_jobqueue.worker.completer import Completer
from sa_jobqueue.worker.running import format_timeout
from tests.integration.worker.test_savepoint_batch import OWNER, _claim_all
from tests.support.models import Job


def test_the_watchdogs_timeout_and_the_abandoned_handlers_report_count_one_attempt(committed):
    jobs = JobQueue(Job)
    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "slow", {}, max_attempts=1).id
    (claimed,) = _claim_all(committed, jobs)
    registry = CollectorRegistry()
    completer = Completer(
        PostgresDriver(Job, leases={}, default_lease=300.0), OWNER, InFlight(), Metrics(registry)
    )
    # What the worker's outbox holds when the handler returned right after the watchdog
    # gave its attempt up: the timeout (recorded), then the handler's report (ignored).
    batch = [
        Outcome(claimed, Result.FAIL, 1.0, format_timeout(1.0), 1.0),
        Outcome(claimed, Result.ABANDONED, error="timed out", duration=1.02),
    ]
    with committed.begin() as conn:
        completer.record(conn, batch)
    completer.recorded(batch)

    def count(outcome: str) -> float | None:
        labels = {"kind": "slow", "queue": "default", "outcome": outcome}
        return registry.get_sample_value("sa_jobqueue_job_attempts_total", labels)

    assert count("timeout") == 1
    assert count("failed") is None
    with Session(committed) as s:
        assert s.get_one(Job, job_id).status == "failed"
