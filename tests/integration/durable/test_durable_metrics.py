"""The metrics' durable gauges: parked jobs by queue, kind and reason; running jobs' progress."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, Retry
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.testing import drain
from tests.support.helpers import wait_for
from tests.support.models import Job
from tests.support.processes import every_database


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def _queue() -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("nap")
    def nap(ctx: JobContext) -> None:
        ctx.step("first", lambda: 1)
        ctx.sleep("cool_off", 3600)

    @jobs.task("saga")
    def saga(ctx: JobContext) -> None:
        ctx.wait_for_signal("paid")

    @jobs.task("flaky")
    def flaky(ctx: JobContext) -> None:
        ctx.step("first", lambda: 1)
        raise Retry(delay=3600)  # pending, not due, with steps: backing off, not parked

    return jobs


@every_database
def test_parked_jobs_are_counted_by_queue_kind_and_reason_and_read_zero_once_woken(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "nap", {}, queue="mail")
        waiting = [jobs.enqueue(session, "saga", {}, queue="mail").id for _ in range(2)]
        jobs.enqueue(session, "flaky", {}, queue="mail")
    outcomes = sorted(o.outcome for o in drain(jobs, committed, queues=["mail"]))
    assert outcomes == ["parked", "parked", "parked", "retried"]
    registry = CollectorRegistry()
    gauges = Metrics(registry).watch(committed, jobs, interval=0.01)

    def parked(kind: str, reason: str) -> float | None:
        return _value(registry, "sa_jobqueue_jobs_parked", queue="mail", kind=kind, reason=reason)

    assert parked("nap", "sleep") == 1
    assert parked("nap", "signal") == 0  # both reasons of a (queue, kind) seen
    assert parked("saga", "signal") == 2
    assert parked("flaky", "sleep") is None  # a Retry's backoff is not a park
    assert parked("flaky", "signal") is None
    assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") == 4

    with Session(committed) as session, session.begin():
        jobs.signal(session, waiting[0], "paid")  # due now: no longer parked
    wait_for(lambda: parked("saga", "signal") == 1, what="the woken job to leave the gauge")
    with Session(committed) as session, session.begin():
        jobs.signal(session, waiting[1], "paid")
    wait_for(lambda: parked("saga", "signal") == 0, what="the gauge to read 0, not vanish")
    gauges.close()


@every_database
def test_running_jobs_progress_is_a_mean_and_a_count_per_queue_and_kind(committed):
    with Session(committed) as session, session.begin():
        session.add_all(
            [
                Job(kind="crunch", queue="batch", status="running", attempts=1, progress=0.2),
                Job(kind="crunch", queue="batch", status="running", attempts=1, progress=0.6),
                Job(kind="crunch", queue="batch", status="running", attempts=1, progress={"n": 1}),
                Job(kind="crunch", queue="batch", status="running", attempts=1),
                Job(kind="crunch", queue="batch", status="pending", progress=0.9),
                Job(kind="other", queue="batch", status="done", progress=1),
            ]
        )
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    gauges = metrics.watch(committed, Job, interval=3600)
    labels = {"queue": "batch", "kind": "crunch"}
    assert _value(registry, "sa_jobqueue_jobs_reporting_progress", **labels) == 2
    mean = _value(registry, "sa_jobqueue_jobs_progress_ratio", **labels)
    assert mean is not None
    assert abs(mean - 0.4) < 1e-9
    assert _value(registry, "sa_jobqueue_jobs_progress_ratio", queue="batch", kind="other") is None
    for _ in range(3):
        registry.collect()
    assert gauges.queries == 1  # one reading (both queries) per interval
    assert "# TYPE sa_jobqueue_jobs_parked gauge" in metrics.text()


def test_a_failing_durable_statement_counts_an_error_and_leaves_the_other_gauges(
    jobqueue_server_url,
):
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    from sa_jobqueue import migration
    from sa_jobqueue.testing import scratch_database

    with scratch_database(jobqueue_server_url, prefix="sa_jobqueue_gauges_durable") as url:
        migration.upgrade(url)
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as conn:  # its own database: the durable statement fails
                conn.execute(text("DROP TABLE sa_jobqueue_steps_jobs"))
                conn.execute(
                    text("INSERT INTO jobs (queue, kind, payload) VALUES ('mail', 'k', '{}')")
                )
            registry = CollectorRegistry()
            metrics = Metrics(registry)
            metrics.watch(engine, Job, interval=3600)
            assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") == 1
            assert _value(registry, "sa_jobqueue_database_errors_total") == 1
            text_format = metrics.text()
            assert "sa_jobqueue_jobs_parked" not in text_format  # no steps table: no series
            assert "sa_jobqueue_workers_live" in text_format
        finally:
            engine.dispose()


def test_a_table_older_than_the_registry_still_exports_its_live_counts(jobqueue_server_url):
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    from sa_jobqueue import migration
    from sa_jobqueue.testing import scratch_database

    with scratch_database(jobqueue_server_url, prefix="sa_jobqueue_gauges_0007") as url:
        migration.upgrade(url, revision="sajq_0007")  # durable steps, no worker registry
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                conn.execute(
                    text("INSERT INTO jobs (queue, kind, payload) VALUES ('mail', 'k', '{}')")
                )
            registry = CollectorRegistry()
            metrics = Metrics(registry)
            metrics.watch(engine, Job, interval=3600)
            assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") == 1
            # The registry and the counters of ended jobs (sajq_0012) are missing.
            assert _value(registry, "sa_jobqueue_database_errors_total") == 2
            text_format = metrics.text()
            assert "sa_jobqueue_workers_live" not in text_format  # no registry: no series
            assert "sa_jobqueue_jobs_ended" not in text_format
            assert "sa_jobqueue_queue_lag_seconds" in text_format
        finally:
            engine.dispose()
