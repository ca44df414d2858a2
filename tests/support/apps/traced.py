"""Tasks for the trace test's worker process, its spans written to a file.

``SAJQ_TEST_SPANS`` names the file: the process sets an OpenTelemetry SDK provider whose
exporter writes each finished span there as one JSON document (the SDK's console
exporter), for the test to read. ``DATABASE_URL`` names the database.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from sa_jobqueue import JobContext, JobQueue, Retry
from tests.support.models import Job

if "SAJQ_TEST_SPANS" in os.environ:  # the worker process (pytest imports it too, to collect)
    _spans = open(os.environ["SAJQ_TEST_SPANS"], "a")  # noqa: SIM115 - for the process's life
    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=_spans)))
    trace.set_tracer_provider(_provider)

jobs = JobQueue(Job)


@jobs.task("traced")
def traced(ctx: JobContext) -> None:
    """Runs once."""


@jobs.task("traced_retry")
def traced_retry(ctx: JobContext) -> None:
    """Asks for a second attempt at once, then ends."""
    if ctx.attempt == 1:
        raise Retry(delay=0)
