"""How an attempt that did not simply return ends: its `Outcome` and its ``last_error``.

A handler's raise (`Retry`, `Discard`, a failure), a start refused, an undecodable payload,
no database before the handler, an attempt stopped meanwhile. See docs/workers.md.
"""

from __future__ import annotations

import time
import traceback

from sqlalchemy import exc

from sa_jobqueue.context import Parked, StepLeaseLost
from sa_jobqueue.handler_exceptions import Discard, Retry
from sa_jobqueue.retry import Backoff
from sa_jobqueue.schema.lenient_json import UndecodableJSON
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.worker.attempt import MAX_ERROR_LENGTH, Claimed, Outcome, Result
from sa_jobqueue.worker.run.lease_check import Verdict
from sa_jobqueue.worker.running import Stop

__all__ = [
    "PARKED_BY_SLEEP",
    "UNAVAILABLE_BACKOFF",
    "failed",
    "format_error",
    "refused",
    "since",
    "stopped_by_step",
    "unavailable",
    "undecodable",
    "unless_abandoned",
]

#: A job whose handler got no database connection runs again after 1 s, doubling, at most 30 s.
UNAVAILABLE_BACKOFF = Backoff(base=0.5, factor=2, cap=30.0, jitter=0)


def format_error(error: BaseException, limit: int = MAX_ERROR_LENGTH) -> str:
    """``Type: message`` and the tail of the traceback, at most `limit` characters.

    Never raises: an exception whose ``__str__`` fails is named by its type alone.
    """
    try:
        head = f"{type(error).__qualname__}: {error}"
    except Exception:  # noqa: BLE001 - a handler's exception may not even print
        head = f"{type(error).__qualname__}: <unprintable message>"
    try:
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:  # noqa: BLE001 - as above
        trace = ""
    text = f"{head}\n{trace}" if trace else head
    if len(text) <= limit:
        return text
    keep = limit - len(head) - 6
    return f"{head}\n...\n{trace[-keep:]}" if keep > 0 else head[:limit]


def unless_abandoned(outcome: Outcome, stopped: Stop | None) -> Outcome:
    """`outcome`, or `Result.ABANDONED` when the attempt was recorded as it was stopped."""
    if stopped in (Stop.CANCELLED, Stop.TIMED_OUT):
        assert stopped is not None  # noqa: S101 - for the type checker
        return Outcome(outcome.job, Result.ABANDONED, error=stopped.value)
    return outcome


def refused(job: Claimed, verdict: str) -> Outcome:
    """A job not started by `LeaseCheck`: gone to another attempt, or given back."""
    if verdict == Verdict.LOST:
        return Outcome(job, Result.EXPIRED)
    # Unknown: the fenced release gives it back if it is still ours.
    return Outcome(job, Result.RELEASE, error="released unstarted: its lease could not be checked")


def failed(task: TaskDef, job: Claimed, exc: BaseException, started: float) -> Outcome:
    """The outcome of a handler that raised: a `Retry`, a `Discard`, or a failure."""
    if isinstance(exc, Retry):
        return Outcome(job, Result.RETRY, exc.delay, exc.reason or None, since(started))
    if isinstance(exc, Discard):
        return Outcome(job, Result.DISCARD, 0.0, f"discarded: {exc.reason}", since(started))
    return Outcome(job, Result.FAIL, task.backoff(job.attempts), format_error(exc), since(started))


def stopped_by_step(job: Claimed, stop: Parked | StepLeaseLost, started: float) -> Outcome:
    """A handler unwound by its durable steps: parked (a sleep, a wait), or its lease lost.

    Either way the row needs no write from this attempt: a park wrote it, fenced
    (``pending``, later ``run_at``); a lost lease means it is another attempt's now.
    """
    if isinstance(stop, Parked):
        why = f"{PARKED_BY_SLEEP if stop.sleeping else 'signal wait'}: {stop}"
        return Outcome(job, Result.PARKED, error=why, duration=since(started))
    return Outcome(job, Result.LOST, error=str(stop), duration=since(started))


#: How a `Result.PARKED` outcome's ``error`` starts when a sleep parked the job.
PARKED_BY_SLEEP = "sleep"


def undecodable(job: Claimed, payload: UndecodableJSON) -> Outcome:
    """A payload Python cannot decode: dead-letter the job now, saying why.

    Every attempt would decode the same text, so it fails at once (as a `Discard`),
    without calling the handler; the row keeps the payload for the operator to fix
    with SQL and retry (docs/tasks.md, "Payloads").
    """
    return Outcome(job, Result.DISCARD, 0.0, payload.message)


def unavailable(job: Claimed, error: exc.SQLAlchemyError) -> Outcome:
    """No connection for the handler's transaction: not the handler's failure.

    No connection slot, a restarting server, an exhausted pool: the handler never
    started, so the attempt must not count against ``max_attempts``. The job is
    retried later (`Result.UNAVAILABLE`, recorded like a `Retry`) with a short backoff.
    """
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    delay = UNAVAILABLE_BACKOFF(job.attempts + 1)
    text = f"database unavailable before the handler started: {first}"
    return Outcome(job, Result.UNAVAILABLE, delay, text)


def since(started: float) -> float:
    """The seconds since `started`, a `time.perf_counter` reading."""
    return time.perf_counter() - started
