"""OpenTelemetry: the enqueue span, the context stored in the row, the worker's span.

The spans go to an in-memory exporter of a `TracerProvider` of the test's own
(`tracing.use_tracer_provider`), so OpenTelemetry's global state stays untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, tracing
from tests.support.models import Job


def test_enqueue_runs_in_a_producer_span_and_stores_its_context(session, spans):
    jobs = JobQueue(Job)
    with tracing._otel().tracer.start_as_current_span("POST /orders") as request:
        job = jobs.enqueue(session, "send_receipt", {"order_id": 4}, queue="mail")
    (send, outer) = spans.get_finished_spans()
    assert outer.name == "POST /orders"
    assert send.name == "send mail"
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None
    assert send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "sa_jobqueue",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "mail",
        "messaging.message.id": str(job.id),
    }
    stored = session.scalar(select(Job.trace_context).where(Job.id == job.id))
    context = send.get_span_context()
    assert set(stored) == {"traceparent"}
    assert stored["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


def test_enqueue_many_is_one_span_for_the_batch(session, spans):
    jobs = JobQueue(Job)
    rows = jobs.enqueue_many(session, [("a", {}), {"kind": "b", "queue": "mail"}])
    (send,) = spans.get_finished_spans()
    assert send.name == "send"
    assert send.attributes is not None
    assert send.attributes["messaging.batch.message_count"] == 2
    assert "messaging.destination.name" not in send.attributes
    contexts = {str(row.trace_context) for row in rows}
    assert len(contexts) == 1
    assert "traceparent" in contexts.pop()


def test_a_failed_insert_is_recorded_on_the_span(engine, spans):
    with engine.connect() as connection:
        connection.begin()
        with pytest.raises(DBAPIError):
            connection.exec_driver_sql("SELECT 1 / 0")
        # The transaction is aborted now: the INSERT fails inside the span.
        with Session(bind=connection) as session, pytest.raises(DBAPIError):
            JobQueue(Job).enqueue(session, "k")
    (send,) = spans.get_finished_spans()
    assert send.status.status_code is StatusCode.ERROR
    assert [event.name for event in send.events] == ["exception"]


def test_without_a_recording_provider_nothing_is_stored(session):
    # The global provider is the API's no-op one: spans do not record, nothing is injected.
    job = JobQueue(Job).enqueue(session, "k")
    assert session.scalar(select(Job.trace_context).where(Job.id == job.id)) is None


@pytest.mark.slow
def test_without_opentelemetry_nothing_imports_it_and_enqueue_works(database_url):
    script = textwrap.dedent(
        f"""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked: " + name)

        sys.meta_path.insert(0, Block())
        from sqlalchemy import create_engine
        from sqlalchemy.orm import Session
        from sa_jobqueue import JobQueue, tracing
        from tests.support.models import Job

        engine = create_engine({database_url!r})
        with Session(engine) as session, session.begin():
            job = JobQueue(Job).enqueue(session, "k")
            assert job.trace_context is None
            session.rollback()
        assert not tracing.available()
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], sys.modules
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


#: An enqueue in a child process with OpenTelemetry installed (API and SDK) and not
#: imported by anyone: it is still not imported after the enqueue; then (unless the
#: environment names a provider) the application sets a global SDK provider, and the
#: next enqueue records its span at once.
_UNIMPORTED = """
import sys
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from sa_jobqueue import JobQueue
from tests.support.models import Job

engine = create_engine(sys.argv[1])
jobs = JobQueue(Job)
with Session(engine) as session, session.begin():
    first = jobs.enqueue(session, "k").trace_context
    imported = "opentelemetry.trace" in sys.modules
    if not imported:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        trace.set_tracer_provider(TracerProvider())
    second = jobs.enqueue(session, "k").trace_context
    session.rollback()
print(imported, first is not None, second is not None)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("environment", "printed"),
    [
        ({}, "False False True"),
        # The global provider named in the environment: looked up, and recording.
        ({"OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}, "True True True"),
    ],
)
def test_enqueue_imports_opentelemetry_only_once_something_could_record(
    database_url, environment, printed
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | environment
    done = subprocess.run(
        [sys.executable, "-c", _UNIMPORTED, database_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == printed


def test_enqueue_many_ids_only_stores_the_spans_context_in_every_row(session, spans):
    jobs = JobQueue(Job)
    ids = jobs.enqueue_many(session, [("a", {}), {"kind": "b", "queue": "mail"}], ids_only=True)
    (send,) = spans.get_finished_spans()
    assert send.attributes is not None
    assert send.attributes["messaging.batch.message_count"] == 2
    stored = session.scalars(select(Job.trace_context).where(Job.id.in_(ids))).all()
    context = send.get_span_context()
    assert len(stored) == 2
    for row in stored:
        assert row["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
