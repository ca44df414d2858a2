from __future__ import annotations

import dataclasses
import threading

from sa_jobqueue.context import _NONE, JobContext
from sa_jobqueue.worker.run.contexts import new_context


def _arguments() -> dict[str, object]:
    return {
        "id": 7,
        "kind": "send_receipt",
        "queue": "mail",
        "payload": {"order_id": 4},
        "attempt": 2,
        "idempotency_key": "jobs:7",
        "max_attempts": 5,
        "worker_id": "host:1:abc",
        "session": None,
        "stop": threading.Event(),
        "engine": None,
        "steps": None,
        "has_steps": True,
    }


def test_new_context_equals_the_dataclass_constructor_field_by_field():
    given = _arguments()
    fast = new_context(**given)  # type: ignore[arg-type]
    made = JobContext(
        id=7,
        kind="send_receipt",
        queue="mail",
        payload={"order_id": 4},
        attempt=2,
        idempotency_key="jobs:7",
        max_attempts=5,
        worker_id="host:1:abc",
        _session=None,
        _stop=given["stop"],  # type: ignore[arg-type]
        _engine=None,
        _steps=None,
        _has_steps=True,
    )
    assert type(fast) is JobContext
    for f in dataclasses.fields(JobContext):
        assert getattr(fast, f.name) == getattr(made, f.name), f.name
    assert fast == made
    assert fast.upstream is _NONE
    assert fast.upstream_statuses is _NONE
    assert fast._durable is None


def test_new_context_reads_its_stop_flag():
    given = _arguments()
    ctx = new_context(**given)  # type: ignore[arg-type]
    assert ctx.cancelled is False
    given["stop"].set()  # type: ignore[attr-defined]
    assert ctx.cancelled is True


def test_job_context_defaults_need_no_per_instance_factory_or_post_init():
    # new_context copies shared defaults and skips __init__: it would be wrong for a
    # default factory that makes a fresh (mutable) value, or a __post_init__.
    assert not hasattr(JobContext, "__post_init__")
    for f in dataclasses.fields(JobContext):
        if f.default_factory is not dataclasses.MISSING:
            assert f.default_factory() is f.default_factory(), f.name
