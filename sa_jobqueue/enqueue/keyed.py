"""Debounced and throttled enqueues: jobs that share a key within a window collapse into one.

``debounce=(key, window)``: the enqueues of one key fold into its pending job, which
runs once `window` has passed since the last of them, with the last payload.
``throttle=(key, window)``: at most one job of the key is due per window; the
enqueues in between return that job and insert nothing. Both run in the caller's
transaction and never commit (docs/flow-control.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic

from sqlalchemy.orm import Session

from sa_jobqueue.core.validation import check_delay, check_key
from sa_jobqueue.driver.protocol.enqueue import DebouncedJob
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.model import JobT

__all__ = ["KeyedEnqueue", "KeyedInserter", "check_keyed"]


@dataclass(frozen=True)
class KeyedEnqueue:
    """A validated ``debounce=`` or ``throttle=`` option."""

    option: str  # "debounce" or "throttle"
    key: str
    window: float


def _pair(option: str, value: object) -> tuple[str, float]:
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ValidationError(
            option, value, "must be a (key, window) pair, e.g. ('cart:7', timedelta(seconds=5))"
        )
    key = check_key(value[0], f"{option} key")
    assert key is not None  # noqa: S101 - check_key returns None only for None
    return key, check_delay(f"{option} window", value[1])


def check_keyed(
    debounce: object, throttle: object, *, run_at: object, delay: object, keys: Mapping[str, object]
) -> KeyedEnqueue | None:
    """Validate ``debounce=`` / ``throttle=`` against the other options of one enqueue.

    `keys` are the enqueue's idempotency and unique keys, which neither combines
    with; nor do ``run_at``/``delay`` (a debounced job is due a window after the last
    enqueue, a throttled one now).
    """
    if debounce is None and throttle is None:
        return None
    if debounce is not None and throttle is not None:
        raise ValidationError("throttle", throttle, "give either debounce= or throttle=, not both")
    option = "debounce" if debounce is not None else "throttle"
    key, window = _pair(option, debounce if debounce is not None else throttle)
    if option == "throttle" and window <= 0:
        raise ValidationError("throttle window", window, "must be more than 0 seconds")
    for name, value in (("run_at", run_at), ("delay", delay), *keys.items()):
        if value is not None:
            raise ValidationError(name, value, f"does not combine with {option}=")
    return KeyedEnqueue(option, key, window)


class KeyedInserter(Generic[JobT]):
    """Runs debounced and throttled enqueues for one model, through its session's driver."""

    def __init__(self, inserter: Inserter[JobT]) -> None:
        self.inserter = inserter
        self.model = inserter.model

    def insert(
        self,
        session: Session,
        spec: JobSpec,
        keyed_enqueue: KeyedEnqueue,
        *,
        trace_context: Mapping[str, str] | None = None,
    ) -> JobT:
        """Enqueue `spec` under `keyed_enqueue`; the job it made or folded into."""
        driver = self.inserter.driver_of(session)
        if keyed_enqueue.option == "throttle":
            found: Any = driver.job_throttle(session, keyed_enqueue.key, keyed_enqueue.window)
            if found is not None:
                job: JobT = found
                return job
            columns = tuple(sorted((*spec.columns, ("throttle_key", keyed_enqueue.key))))
            return self.inserter.insert_one(
                session, replace(spec, columns=columns), trace_context=trace_context
            )
        debounced = DebouncedJob(spec, keyed_enqueue.key, keyed_enqueue.window, trace_context)
        folded: Any = driver.job_debounce(session, debounced)
        if folded is None:
            raise ValidationError(
                "debounce key",
                keyed_enqueue.key,
                "is held by a pending job of another kind (debounce keys are shared by "
                "every kind of the table: put the kind in the key)",
            )
        return folded  # type: ignore[no-any-return]
