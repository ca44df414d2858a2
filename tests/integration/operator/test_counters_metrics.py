"""The metrics' counter of ended jobs reads the counters, not the table."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobQueue
from sa_jobqueue.metrics import Metrics
from tests.support.models import Job


def test_ended_jobs_are_a_counter_per_queue_kind_and_status(committed):
    jobs = JobQueue(Job)
    jobs.task("ok")(lambda ctx: None)

    @jobs.task("bad")
    def bad(ctx):
        raise Discard("no")

    with Session(committed) as session, session.begin():
        for _ in range(3):
            jobs.enqueue(session, "ok", {}, queue="mail")
        jobs.enqueue(session, "bad", {}, queue="mail")
    jobs.worker(committed, queues=["mail"]).drain()
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    gauges = metrics.watch(committed, jobs, interval=3600)

    def ended(kind: str, status: str) -> float | None:
        labels = {"queue": "mail", "kind": kind, "status": status}
        return registry.get_sample_value("sa_jobqueue_jobs_ended_total", labels)

    assert ended("ok", "done") == 3
    assert ended("bad", "failed") == 1
    assert "counter" in [
        line.split()[-1]
        for line in metrics.text().splitlines()
        if line.startswith("# TYPE sa_jobqueue_jobs_ended")
    ]
    gauges.close()
