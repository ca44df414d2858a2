"""The trace carried from the enqueue to a real worker process, from Python and from SQL.

The test's enqueue spans go to an in-memory exporter; the worker process
(tests/support/apps/traced.py) writes its spans to a file through the SDK's console
exporter. The first attempt of a job is a child of its enqueue's context; a retry is a
trace of its own, linked to it (docs/observability.md#traces).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, tracing
from tests.support.helpers import wait_for
from tests.support.models import Job

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


def _exported(path: Path) -> list[dict[str, Any]]:
    """The JSON documents the console exporter wrote, one per span."""
    decoder, text_, at = json.JSONDecoder(), path.read_text(), 0
    found: list[dict[str, Any]] = []
    while True:
        while at < len(text_) and text_[at].isspace():
            at += 1
        if at == len(text_):
            return found
        span, at = decoder.raw_decode(text_, at)
        found.append(span)


def _processed(path: Path, job_id: int) -> list[dict[str, Any]]:
    spans = _exported(path) if path.exists() else []
    mine = [s for s in spans if s["attributes"].get("messaging.message.id") == str(job_id)]
    return sorted(mine, key=lambda s: s["attributes"]["sa_jobqueue.job.attempt"])


def _statuses(engine: Engine) -> dict[int, str]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT id, status FROM jobs"))
        return {job_id: status for job_id, status in rows}


@pytest.mark.slow
def test_the_worker_process_continues_the_trace_of_a_python_enqueue_and_of_a_sql_traceparent(
    committed: Engine, processes: Any, spans: InMemorySpanExporter, tmp_path: Path
):
    jobs = JobQueue(Job)  # the producer's side: the kinds' names are enough
    path = tmp_path / "worker-spans.json"
    with (
        tracing._otel().tracer.start_as_current_span("POST /orders") as request,
        Session(committed) as session,
        session.begin(),
    ):
        from_python = jobs.enqueue(session, "traced", {}).id
        retried = jobs.enqueue(session, "traced_retry", {}).id
    with committed.begin() as connection:
        traceparent = f"00-{TRACE_ID}-{SPAN_ID}-01"
        from_sql = connection.execute(
            text("SELECT jobs_enqueue('traced', traceparent => :tp)"), {"tp": traceparent}
        ).scalar_one()
    processes.worker(
        "tests.support.apps.traced:jobs",
        "--poll-interval",
        "0.2",
        env={"SAJQ_TEST_SPANS": str(path)},
    )
    wait_for(
        lambda: _statuses(committed) == {from_python: "done", retried: "done", from_sql: "done"},
        what="the three jobs done",
    )
    wait_for(lambda: len(_processed(path, retried)) == 2, what="both attempts' spans exported")

    sends = {
        str((s.attributes or {})["messaging.message.id"]): s
        for s in spans.get_finished_spans()
        if s.name.startswith("send")
    }
    request_trace = f"0x{request.get_span_context().trace_id:032x}"

    (python_span,) = _processed(path, from_python)
    assert python_span["context"]["trace_id"] == request_trace
    assert python_span["parent_id"] == f"0x{sends[str(from_python)].context.span_id:016x}"

    (sql_span,) = _processed(path, from_sql)
    assert sql_span["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert sql_span["parent_id"] == f"0x{SPAN_ID}"

    first, second = _processed(path, retried)
    send = sends[str(retried)]
    assert first["context"]["trace_id"] == request_trace  # the first attempt: a child
    assert first["parent_id"] == f"0x{send.context.span_id:016x}"
    assert second["parent_id"] is None  # the retry: a trace of its own, linked
    assert second["context"]["trace_id"] != request_trace
    assert [link["context"]["span_id"] for link in second["links"]] == [
        f"0x{send.context.span_id:016x}"
    ]
