"""OpenTelemetry traces, when ``opentelemetry-api`` is installed (``sa-jobqueue[otel]``).

A PRODUCER span around `enqueue`, whose context is stored in ``trace_context``, and a
CONSUMER span per attempt whose parent is that context; a no-op without OpenTelemetry or
without an SDK. See docs/observability.md#traces.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from sa_jobqueue.handler_exceptions import Discard, Retry

__all__ = [
    "MESSAGING_SYSTEM",
    "RECHECK_SECONDS",
    "Produced",
    "available",
    "consuming",
    "producing",
    "record_failure",
    "recording",
    "use_tracer_provider",
]

#: The value of ``messaging.system`` on every span.
MESSAGING_SYSTEM = "sa_jobqueue"

#: While no provider records, the global one is looked up again at most this often.
RECHECK_SECONDS = 1.0


@functools.cache
def _otel() -> Any:
    """The OpenTelemetry API modules, or None when it is not installed."""
    try:
        from opentelemetry import context, propagate, trace
    except ImportError:
        return None

    @dataclass
    class Api:
        trace: Any
        propagate: Any
        context: Any
        tracer: Any
        #: A provider given to `use_tracer_provider` (None: the global one).
        provider: Any = None
        #: `time.monotonic()` before which the last "not recording" answer stands.
        quiet_until: float = 0.0

        def recording(self) -> bool:
            """Whether spans can record: a provider was given, or an SDK set globally."""
            if self.provider is not None:
                return True
            default = (self.trace.ProxyTracerProvider, self.trace.NoOpTracerProvider)
            return not isinstance(self.trace.get_tracer_provider(), default)

    return Api(trace, propagate, context, trace.get_tracer("sa_jobqueue", _version()))


def use_tracer_provider(provider: Any = None) -> None:
    """Make sa-jobqueue's spans with `provider` (None: the global one, the default).

    For an application (or a test) that keeps a `TracerProvider` of its own rather
    than setting OpenTelemetry's global one. Does nothing without OpenTelemetry.
    """
    otel = _otel()
    if otel is None:
        return
    otel.provider = provider
    otel.quiet_until = 0.0
    if provider is None:
        otel.tracer = otel.trace.get_tracer("sa_jobqueue", _version())
    else:
        otel.tracer = provider.get_tracer("sa_jobqueue", _version())


def _version() -> str | None:
    try:
        return metadata.version("sa-jobqueue")
    except metadata.PackageNotFoundError:
        return None


def available() -> bool:
    """Whether OpenTelemetry's API is installed (tracing then follows its configuration)."""
    return _otel() is not None


#: The variable that names a global provider OpenTelemetry loads on first lookup.
_PROVIDER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"

#: `time.monotonic()` before which "OpenTelemetry is not imported: nothing records" stands.
_unused_until = 0.0


def recording() -> bool:
    """Whether spans would record now (the API is installed and an SDK configured).

    Asked for every job enqueued and every attempt. OpenTelemetry's global provider
    lookup reads the environment each time, so while nothing records the answer is
    kept for `RECHECK_SECONDS`: a global provider set while a worker runs is used
    within a second (one given to `use_tracer_provider` at once).

    While no module has imported OpenTelemetry's trace API, no provider can have been
    set (setting one imports it) and none is named in the environment, nothing records,
    and it is not imported here either: importing it is 30 M instructions, which an
    application that has the API installed but traces nothing would pay at its first
    enqueue (bench/cost-history.md).
    """
    global _unused_until
    if "opentelemetry.trace" not in sys.modules:
        now = time.monotonic()
        if now < _unused_until:
            return False
        if _PROVIDER_VARIABLE not in os.environ:
            _unused_until = now + RECHECK_SECONDS
            return False
    otel = _otel()
    if otel is None:
        return False
    if otel.provider is not None:
        return True
    now = time.monotonic()
    if now < otel.quiet_until:
        return False
    if otel.recording():
        return True
    otel.quiet_until = now + RECHECK_SECONDS
    return False


@dataclass
class Produced:
    """What an enqueue's span gives the INSERT: the context to store, if any."""

    carrier: dict[str, str] | None = None
    span: Any = field(default=None, repr=False)

    def inserted(self, ids: Sequence[int]) -> None:
        """Name the inserted job(s) on the span (``messaging.message.id`` for one job)."""
        if self.span is None or not ids:
            return
        if len(ids) == 1:
            self.span.set_attribute("messaging.message.id", str(ids[0]))


_NOTHING = Produced()


@contextmanager
def producing(queues: Sequence[str], count: int) -> Iterator[Produced]:
    """A PRODUCER span around an enqueue of `count` jobs into `queues`.

    Yields the `Produced` whose ``carrier`` goes into the rows' ``trace_context``.
    An exception inside is recorded on the span and re-raised.
    """
    if count == 0 or not recording():
        yield _NOTHING  # no SDK: a span would record nothing and inject no context
        return
    otel = _otel()
    distinct = sorted(set(queues))
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
    }
    name = "send"
    if len(distinct) == 1:
        attributes["messaging.destination.name"] = distinct[0]
        name = f"send {distinct[0]}"
    if count > 1:
        attributes["messaging.batch.message_count"] = count
    kind = otel.trace.SpanKind.PRODUCER
    with otel.tracer.start_as_current_span(name, kind=kind, attributes=attributes) as span:
        carrier: dict[str, str] = {}
        otel.propagate.inject(carrier)
        yield Produced(carrier or None, span)


@contextmanager
def consuming(
    *,
    job_id: int,
    kind: str,
    queue: str,
    attempt: int,
    worker_id: str,
    trace_context: Mapping[str, str] | None,
) -> Iterator[Any]:
    """A CONSUMER span for one attempt: the first a child of the context its enqueue stored.

    A later attempt (a retry, a recovered lease) starts a trace of its own, linked to
    that context (awa's rule): the enqueuing request's trace ends with the first attempt.

    Yields the span (None without OpenTelemetry). An exception raised inside is
    recorded (a `Retry` only as an event) and re-raised for the caller to handle.
    """
    otel = _otel()
    if otel is None or not otel.recording():
        yield None
        return
    parent, links = None, None
    if isinstance(trace_context, Mapping) and trace_context:
        parent = otel.propagate.extract(dict(trace_context))
        if attempt > 1:
            # A retry is not part of the request that enqueued the job: a trace of its
            # own, linked to the enqueue (one request's trace does not grow with every
            # retry of its job, hours later).
            linked = otel.trace.get_current_span(parent).get_span_context()
            parent = otel.context.Context()
            links = [otel.trace.Link(linked)] if linked.is_valid else None
    attributes = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": str(job_id),
        "sa_jobqueue.job.kind": kind,
        "sa_jobqueue.job.attempt": attempt,
        "sa_jobqueue.worker.id": worker_id,
    }
    with otel.tracer.start_as_current_span(
        f"process {queue}",
        context=parent,
        links=links,
        kind=otel.trace.SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except Retry as retry:
            span.add_event("sa_jobqueue.retry", {"delay_seconds": retry.delay})
            raise
        except BaseException as error:
            record_failure(span, error)
            raise


def record_failure(span: Any, error: BaseException) -> None:
    """Mark `span` failed by `error`: the exception event, ERROR status, ``error.type``."""
    otel = _otel()
    if otel is None or span is None:
        return
    name = "discard" if isinstance(error, Discard) else type(error).__qualname__
    span.set_attribute("error.type", name)
    try:
        message = f"{name}: {error}"[:200]
        span.record_exception(error)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails must still be
        # reported as the handler's failure, not replaced by this one.
        message = f"{name}: <unprintable message>"
    span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR, message))
