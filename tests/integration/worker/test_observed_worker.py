"""The worker's side of issue 15: results, middleware, ctx.engine, spans, metrics, logs.

In-process workers (``drain``) for the library API; real worker processes for the
command line's ``--metrics-port`` (a scrape of /metrics) and ``--log-format json``.
"""

from __future__ import annotations

import json
import logging
import socket
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext, JobQueue, Retry, tracing
from sa_jobqueue.metrics import Metrics
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job

ROOT = Path(__file__).resolve().parents[3]


def _job(engine: Engine, job_id: int) -> Job:
    with Session(engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        session.expunge(job)
        return job


def _enqueue(engine: Engine, jobs: JobQueue[Job], *items: Any) -> list[int]:
    with Session(engine) as session, session.begin():
        return [row.id for row in jobs.enqueue_many(session, list(items))]


# --- results -------------------------------------------------------------------------


@pytest.mark.parametrize("transactional", [False, True])
def test_a_returned_dict_is_stored_in_result(committed, transactional):
    jobs = JobQueue(Job)

    @jobs.task("invoice", transactional=transactional)
    def invoice(ctx: JobContext) -> Any:
        return {
            "invoice_id": ctx.id * 10,
            "lines": [1, 2],
            "mode": "tx" if transactional else "lease",
        }

    @jobs.task("nothing", transactional=transactional)
    def nothing(ctx: JobContext) -> None:
        return None

    first, second = _enqueue(committed, jobs, ("invoice", {}), ("nothing", {}))
    assert jobs.worker(committed).drain() == 2
    done = _job(committed, first)
    assert done.status == "done"
    assert done.result == {
        "invoice_id": first * 10,
        "lines": [1, 2],
        "mode": "tx" if transactional else "lease",
    }
    assert _job(committed, second).result is None  # None stores nothing


@pytest.mark.parametrize("transactional", [False, True])
def test_a_value_json_cannot_hold_fails_the_attempt_with_a_clear_error(committed, transactional):
    jobs = JobQueue(Job)

    @jobs.task("dated", max_attempts=1, transactional=transactional)
    def dated(ctx: JobContext) -> Any:
        if transactional:
            ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="rolled back"))
        return {"when": datetime(2026, 12, 1, tzinfo=timezone.utc)}

    (job_id,) = _enqueue(committed, jobs, ("dated", {}))
    jobs.worker(committed).drain()
    job = _job(committed, job_id)
    assert job.status == "failed"
    assert job.result is None
    assert job.last_error is not None
    assert job.last_error.startswith(
        "PayloadError: result['when']=datetime.datetime(2026, 12, 1, 0, 0, "
        "tzinfo=datetime.timezone.utc): datetime is not JSON-serialisable"
    )
    with Session(committed) as session:
        assert session.scalars(select(Effect)).all() == []  # the handler's writes went too


def test_jobs_show_prints_the_result(committed):
    from click.testing import CliRunner

    from sa_jobqueue.cli import main

    jobs = JobQueue(Job)
    jobs.task("invoice")(lambda ctx: {"invoice_id": 17})
    (job_id,) = _enqueue(committed, jobs, ("invoice", {}))
    jobs.worker(committed).drain()
    url = committed.url.render_as_string(hide_password=False)
    runner = CliRunner()
    shown = runner.invoke(main, ["jobs", "show", str(job_id), "--database-url", url])
    assert 'result:\n  {\n    "invoice_id": 17\n  }' in shown.output
    as_json = runner.invoke(main, ["jobs", "show", str(job_id), "--json", "--database-url", url])
    assert json.loads(as_json.output)["result"] == {"invoice_id": 17}


# --- middleware and ctx.engine -------------------------------------------------------


@pytest.mark.parametrize("transactional", [False, True])
def test_middleware_wraps_every_handler_call_and_ctx_engine_is_the_workers(
    committed, transactional
):
    jobs = JobQueue(Job)
    seen: list[tuple[str, int]] = []

    @jobs.middleware
    def outer(ctx: JobContext, call_next: Any) -> Any:
        seen.append(("outer", ctx.id))
        return {"outer": call_next(ctx)}

    @jobs.middleware
    def snooze_once(ctx: JobContext, call_next: Any) -> Any:
        if ctx.payload.get("snooze") and ctx.attempt == 1:
            raise Retry(0)
        if ctx.payload.get("discard"):
            raise Discard("refused by middleware")
        return call_next(ctx)

    @jobs.task("work", transactional=transactional)
    def work(ctx: JobContext) -> Any:
        engine = ctx.engine
        assert engine is committed
        assert isinstance(engine, Engine)
        with Session(engine) as session:
            return {
                "attempt": ctx.attempt,
                "jobs": session.scalar(select(Job.id).limit(1)) is not None,
            }

    plain, snoozed, refused = _enqueue(
        committed, jobs, ("work", {}), ("work", {"snooze": True}), ("work", {"discard": True})
    )
    jobs.worker(committed).drain()
    assert _job(committed, plain).result == {"outer": {"attempt": 1, "jobs": True}}
    assert _job(committed, snoozed).result == {"outer": {"attempt": 2, "jobs": True}}
    dead = _job(committed, refused)
    assert (dead.status, dead.last_error) == ("failed", "discarded: refused by middleware")
    assert [job_id for _, job_id in seen].count(snoozed) == 2


# --- traces --------------------------------------------------------------------------


def test_the_enqueue_span_and_the_workers_span_are_one_trace(committed, spans):
    jobs = JobQueue(Job)

    @jobs.task("greet", queue="mail")
    def greet(ctx: JobContext) -> None:
        with tracing._otel().tracer.start_as_current_span("inside the handler"):
            pass

    @jobs.task("explode", max_attempts=1)
    def explode(ctx: JobContext) -> None:
        raise RuntimeError("kaboom")

    tracer = tracing._otel().tracer
    with (
        tracer.start_as_current_span("POST /signup"),
        Session(committed) as session,
        session.begin(),
    ):
        greeted = jobs.enqueue(session, "greet", {}).id
        exploded = jobs.enqueue(session, "explode", {}).id
    jobs.worker(committed, worker_id="w-1").drain()

    by_name: dict[str, list[Any]] = {}
    for span in spans.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    (request,) = by_name["POST /signup"]
    send_mail, send_default = by_name["send mail"][0], by_name["send default"][0]
    process, failed = by_name["process mail"][0], by_name["process default"][0]
    trace_id = request.context.trace_id
    assert {s.context.trace_id for s in (send_mail, send_default, process, failed)} == {trace_id}
    assert process.kind is SpanKind.CONSUMER
    assert process.parent is not None
    assert process.parent.span_id == send_mail.context.span_id  # child of the enqueue
    assert dict(process.attributes or {}) == {
        "messaging.system": "sa_jobqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "mail",
        "messaging.message.id": str(greeted),
        "sa_jobqueue.job.kind": "greet",
        "sa_jobqueue.job.attempt": 1,
        "sa_jobqueue.worker.id": "w-1",
    }
    (inside,) = by_name["inside the handler"]
    assert inside.parent is not None
    assert inside.parent.span_id == process.context.span_id
    assert process.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "RuntimeError"
    assert failed.attributes["messaging.message.id"] == str(exploded)
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes is not None
    assert event.attributes["exception.message"] == "kaboom"


# --- metrics, in process -------------------------------------------------------------


def test_metrics_count_outcomes_by_kind(committed):
    from tests.support.apps.observed import jobs

    registry = CollectorRegistry()
    metrics = Metrics(registry)
    _enqueue(committed, jobs, *[("greet", {"name": str(i)}) for i in range(5)], ("explode", {}))
    assert jobs.worker(committed, metrics=metrics, concurrency=2).drain() == 6

    def attempts(kind: str, queue: str, outcome: str) -> float | None:
        labels = {"kind": kind, "queue": queue, "outcome": outcome}
        return registry.get_sample_value("sa_jobqueue_job_attempts_total", labels)

    assert attempts("greet", "mail", "done") == 5
    assert attempts("explode", "default", "failed") == 1
    assert attempts("greet", "mail", "failed") is None
    count = registry.get_sample_value(
        "sa_jobqueue_job_duration_seconds_count", {"kind": "greet", "queue": "mail"}
    )
    assert count == 5
    rounds = registry.get_sample_value("sa_jobqueue_claim_rounds_total")
    assert rounds is not None
    assert rounds >= 1
    assert registry.get_sample_value("sa_jobqueue_handlers_busy") == 0
    assert registry.get_sample_value("sa_jobqueue_handlers") == 0  # the worker has stopped


# --- worker processes: --metrics-port and --log-format json ---------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def worker_process(processes) -> Any:
    def start(*extra: str) -> Any:
        proc = processes.worker(
            "tests.support.apps.observed:jobs",
            *("--poll-interval", "0.2", *extra),
            concurrency=2,
            ready=False,
        )
        return proc.log_path

    return start


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


@pytest.mark.slow
def test_a_worker_process_reports_5_done_and_1_failed_on_its_metrics_port(
    committed, worker_process
):
    from tests.support.apps.observed import jobs

    port = _free_port()
    log = worker_process("--metrics-port", str(port))
    wait_for(lambda: "serving metrics" in log.read_text(), what="the metrics server")
    _enqueue(committed, jobs, *[("greet", {"name": str(i)}) for i in range(5)], ("explode", {}))

    done = 'sa_jobqueue_job_attempts_total{kind="greet",outcome="done",queue="mail"} 5.0'
    failed = 'sa_jobqueue_job_attempts_total{kind="explode",outcome="failed",queue="default"} 1.0'
    wait_for(lambda: done in (text := _scrape(port)) and failed in text, what="5 done, 1 failed")
    # The gauges are read at most every 5 s: wait for a reading after the work.
    empty = 'sa_jobqueue_jobs{queue="mail",status="pending"} 0.0'
    wait_for(lambda: empty in _scrape(port), what="the pending gauge to read 0")
    scrape = _scrape(port)
    assert "sa_jobqueue_handlers 2.0" in scrape
    print(scrape)  # the note shows one (pytest -s)
    with Session(committed) as session:
        results = session.scalars(select(Job.result).where(Job.kind == "greet")).all()
    assert sorted(r["hello"] for r in results) == ["0", "1", "2", "3", "4"]
    assert {r["wrapped"] for r in results} == {True}  # the app's middleware ran


@pytest.mark.slow
def test_log_format_json_writes_only_json_lines_with_the_job_fields(committed, worker_process):
    from tests.support.apps.observed import jobs

    log = worker_process("--log-format", "json")
    wait_for(lambda: "started" in log.read_text(), what="the worker to start")
    greet, explode = _enqueue(committed, jobs, ("greet", {}), ("explode", {}))
    wait_for(lambda: '"event": "dead"' in log.read_text(), what="the dead letter line")
    wait_for(lambda: '"event": "done"' in log.read_text(), what="the done line")

    lines = [json.loads(line) for line in log.read_text().splitlines()]  # every line parses
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    job_lines = [line for line in lines if "job_id" in line]
    events = {(line["job_id"], line["event"]) for line in job_lines}
    assert {(greet, "claimed"), (greet, "done"), (explode, "claimed"), (explode, "dead")} <= events
    for line in job_lines:
        assert {"job_id", "kind", "queue", "attempt", "worker_id", "event"} <= set(line)
        assert line["kind"] == {greet: "greet", explode: "explode"}[line["job_id"]]
    (dead,) = [line for line in job_lines if line["event"] == "dead"]
    assert dead["error"] == f"RuntimeError: job {explode} exploded"
    assert dead["level"] == logging.getLevelName(logging.ERROR)
    (done,) = [line for line in job_lines if line["event"] == "done"]
    assert done["duration_ms"] >= 0


def test_an_unprintable_exception_is_still_the_handlers_failure_on_a_recording_span(
    committed, spans
):
    class WeirdError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    jobs = JobQueue(Job)

    @jobs.task("weird", max_attempts=1)
    def weird(ctx: JobContext) -> None:
        raise WeirdError

    (job_id,) = _enqueue(committed, jobs, ("weird", {}))
    jobs.worker(committed).drain()
    job = _job(committed, job_id)
    assert job.status == "failed"
    assert job.last_error is not None
    assert job.last_error.split("\n")[0].endswith("WeirdError: <unprintable message>")
    (process,) = [s for s in spans.get_finished_spans() if s.name == "process default"]
    assert process.status.status_code is StatusCode.ERROR
    assert process.status.description is not None
    assert process.status.description.endswith("WeirdError: <unprintable message>")


def test_async_handlers_get_their_middleware_results_and_an_async_engine(committed):
    from sqlalchemy.ext.asyncio import AsyncEngine

    jobs = JobQueue(Job)
    seen: list[str] = []

    @jobs.middleware
    async def tag(ctx: JobContext, call_next: Any) -> Any:
        seen.append(f"async {ctx.kind}")
        return {"wrapped": await call_next(ctx)}

    @jobs.middleware
    def sync_only(ctx: JobContext, call_next: Any) -> Any:
        seen.append(f"sync {ctx.kind}")
        return call_next(ctx)

    @jobs.task("fetch")
    async def fetch(ctx: JobContext) -> Any:
        engine = ctx.engine
        assert isinstance(engine, AsyncEngine)
        async with engine.connect() as connection:
            one = (await connection.execute(select(Job.id).where(Job.id == ctx.id))).scalar()
        return {"id": one}

    (job_id,) = _enqueue(committed, jobs, ("fetch", {}))
    assert jobs.worker(committed).drain() == 1
    assert _job(committed, job_id).result == {"wrapped": {"id": job_id}}
    assert seen == ["async fetch"]  # the sync middleware wraps sync handlers only


def test_a_timed_out_attempt_and_a_cancelled_one_are_counted_as_such(committed):
    import threading
    import time
    from datetime import timedelta

    jobs = JobQueue(Job)

    @jobs.task("slow", timeout=timedelta(seconds=1), max_attempts=1)
    def slow(ctx: JobContext) -> None:
        deadline = time.monotonic() + 20
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)

    @jobs.task("long")
    def long(ctx: JobContext) -> None:
        deadline = time.monotonic() + 20
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)

    registry = CollectorRegistry()
    worker = jobs.worker(
        committed, metrics=Metrics(registry), concurrency=2, poll_interval=0.2, sweep_interval=0.5
    )
    runner = threading.Thread(target=worker.run, daemon=True)
    timed, cancelled = _enqueue(committed, jobs, ("slow", {}), ("long", {}))

    def count(kind: str, outcome: str) -> float | None:
        labels = {"kind": kind, "queue": "default", "outcome": outcome}
        return registry.get_sample_value("sa_jobqueue_job_attempts_total", labels)

    runner.start()
    try:
        wait_for(lambda: _job(committed, cancelled).status == "running", what="long to run")
        with Session(committed) as session, session.begin():
            jobs.cancel(session, [cancelled])
        wait_for(lambda: count("slow", "timeout") == 1, what="the timeout to be counted")
        wait_for(lambda: count("long", "cancelled") == 1, what="the cancel to be counted")
    finally:
        worker.stop()
        runner.join(30)
    assert _job(committed, timed).status == "failed"
    assert count("slow", "failed") is None  # counted once, as a timeout
