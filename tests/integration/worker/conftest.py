"""What the worker's integration tests share: the spans of a tracer provider of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sa_jobqueue import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans sa-jobqueue records meanwhile, in memory (OpenTelemetry's globals untouched)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)
    provider.shutdown()
