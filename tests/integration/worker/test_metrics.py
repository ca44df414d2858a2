"""`sa_jobqueue.metrics`: the series, the table gauges' one cached query, serving."""

from __future__ import annotations

import urllib.request
from datetime import datetime, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import update
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue
from sa_jobqueue.metrics import Metrics
from tests.support.helpers import wait_for
from tests.support.models import Job
from tests.support.processes import every_database


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_attempts_and_durations_by_queue_kind_and_outcome():
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for _ in range(5):
        metrics.attempt("mail", "send_receipt", "done", 0.02)
    metrics.attempt("mail", "send_receipt", "failed", 1.5)
    metrics.attempt("mail", "send_receipt", "released", None)
    metrics.claim_round()
    metrics.database_error()
    labels = {"queue": "mail", "kind": "send_receipt"}
    assert _value(registry, "sa_jobqueue_job_attempts_total", **labels, outcome="done") == 5
    assert _value(registry, "sa_jobqueue_job_attempts_total", **labels, outcome="failed") == 1
    assert _value(registry, "sa_jobqueue_job_duration_seconds_count", **labels) == 6
    assert _value(registry, "sa_jobqueue_job_duration_seconds_bucket", **labels, le="0.025") == 5
    assert _value(registry, "sa_jobqueue_claim_rounds_total") == 1
    assert _value(registry, "sa_jobqueue_database_errors_total") == 1
    assert "sa_jobqueue_handlers_busy 0.0" in metrics.text()


def test_one_registry_holds_one_metrics():
    registry = CollectorRegistry()
    Metrics(registry)
    with pytest.raises(ConfigurationError, match="share one Metrics"):
        Metrics(registry)


@every_database
def test_table_gauges_count_live_jobs_and_lag_with_one_cached_query(committed):
    jobs = JobQueue(Job)
    past = datetime.now(timezone.utc) - timedelta(minutes=2)
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "a", queue="mail", run_at=past)
        jobs.enqueue(session, "a", queue="mail")
        jobs.enqueue(session, "a", queue="mail", delay=3600)
        running = jobs.enqueue(session, "b")
        session.flush()
        session.execute(update(Job).where(Job.id == running.id).values(status="running"))
        jobs.enqueue(session, "c", queue="ops").status = "done"
    registry = CollectorRegistry()
    gauges = Metrics(registry).watch(committed, jobs, interval=3600)

    assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") == 3
    assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="running") == 0
    assert _value(registry, "sa_jobqueue_jobs", queue="default", status="running") == 1
    assert _value(registry, "sa_jobqueue_jobs", queue="ops", status="pending") is None  # done
    lag = _value(registry, "sa_jobqueue_queue_lag_seconds", queue="mail")
    assert lag is not None
    assert 110 < lag < 3600
    assert _value(registry, "sa_jobqueue_queue_lag_seconds", queue="default") == 0
    for _ in range(5):
        registry.collect()
        list(gauges.collect())
    assert gauges.queries == 1  # every scrape within the interval reuses the reading
    gauges.close()
    assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") is None


@every_database
def test_a_queue_that_empties_reports_zero_instead_of_vanishing(committed):
    jobs = JobQueue(Job)
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "a", queue="mail")
    registry = CollectorRegistry()
    gauges = Metrics(registry).watch(committed, jobs, interval=0.01)
    assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") == 1
    with Session(committed) as session, session.begin():
        session.execute(update(Job).values(status="done"))
    wait_for(
        lambda: _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") == 0,
        what="the emptied queue to read 0",
    )
    assert gauges.queries >= 2


def test_a_failing_query_counts_a_database_error_and_reports_no_gauge(database_url):
    from sqlalchemy import create_engine

    engine = create_engine(database_url.rsplit("/", 1)[0] + "/no_such_database")
    registry = CollectorRegistry()
    Metrics(registry).watch(engine, Job, interval=3600)
    assert _value(registry, "sa_jobqueue_jobs", queue="mail", status="pending") is None
    assert _value(registry, "sa_jobqueue_database_errors_total") == 1
    engine.dispose()


def test_watch_wants_a_jobs_model():
    with pytest.raises(ConfigurationError, match="JobQueue or a JobMixin model"):
        Metrics(CollectorRegistry()).watch(None, object())  # type: ignore[arg-type]


def test_serve_answers_on_127_0_0_1():
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.attempt("q", "k", "done", 0.1)
    server = metrics.serve(0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            body = answer.read().decode()
        assert 'sa_jobqueue_job_attempts_total{kind="k",outcome="done",queue="q"} 1.0' in body
    finally:
        server.shutdown()
        server.server_close()
