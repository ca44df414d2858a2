"""One attempt of a job, from its claim to its outcome, and the worker's book of them.

An attempt is named by ``(id, attempts)``: the same job claimed again is a *different*
attempt, and nothing recorded for one may touch the other (`InFlight`, every fenced
statement). See docs/architecture.md.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row

from sa_jobqueue.core.validation import MAX_DELAY_SECONDS
from sa_jobqueue.schema.lenient_json import UndecodableJSON

__all__ = [
    "MAX_ERROR_LENGTH",
    "AttemptKey",
    "Claimed",
    "InFlight",
    "Outcome",
    "Result",
    "fence_literals",
    "fence_params",
    "storable_delay",
    "storable_text",
]

#: ``last_error`` keeps at most this many characters (errors, `Retry` and `Discard` reasons).
MAX_ERROR_LENGTH = 4000

#: ``(id, attempts)``: which attempt of which job.
AttemptKey = tuple[int, int]


class Result(enum.Enum):
    """How an attempt ended."""

    DONE = "done"  # lease mode: the loop must still mark it done
    COMMITTED = "committed"  # transactional mode: done, already committed
    LOST = "lost"  # transactional mode: the fence matched no row; writes rolled back
    FAIL = "fail"  # retry with backoff, or dead-letter when attempts are used up
    RETRY = "retry"  # the handler raised Retry: snooze
    UNAVAILABLE = "unavailable"  # no connection before the handler started: retry, uncounted
    DISCARD = "discard"  # the handler raised Discard: dead-letter now
    RELEASE = "release"  # not started before shutdown: give it back
    CANCELLED = "cancelled"  # cancelled while running: the row says so already; free the slot
    ABANDONED = "abandoned"  # the late report of an attempt recorded when it timed out or
    # was cancelled: nothing to record (its `error` says which)
    PARKED = "parked"  # a sleep or a signal wait parked it: the row is pending already
    EXPIRED = "expired"  # not started: its lease expired while it waited (the worker was
    # stopped) and its row is no longer this attempt's: nothing to record


# Not frozen, as `Outcome`: a frozen dataclass's __init__ sets each field through
# object.__setattr__, at four times the cost, and one of each is made per job. Nothing
# assigns to their fields once made (and neither is hashed).
@dataclass(slots=True)
class Claimed:
    """A job as the claim returned it: what is needed to run and fence it (read-only)."""

    id: int
    kind: str
    queue: str
    payload: Any
    attempts: int
    max_attempts: int
    idempotency_key: str | None
    lease: float
    #: `time.monotonic()` when the claim returned: the heartbeat schedule starts here.
    claimed_at: float = field(default_factory=time.monotonic, compare=False)
    #: The trace context its enqueue recorded (W3C ``traceparent``...), or None.
    trace_context: Any = field(default=None, compare=False, repr=False)
    #: A rate-limited kind's stamp in the starts log, as its claim wrote it (None for
    #: other kinds): moved to the start's time when it starts (`run.rate_gate`).
    rate_stamp: Any = field(default=None, compare=False, repr=False)
    #: Whether it was enqueued ``after=`` other jobs (or is a batch callback with
    #: members): its handler's ``ctx.upstream`` is read when it starts.
    waited: bool = field(default=False, compare=False, repr=False)
    #: Whether an earlier attempt recorded durable steps (``has_steps``): the first
    #: ``ctx.step`` (or sleep, or wait) of this one reads them, once.
    has_steps: bool = field(default=False, compare=False, repr=False)
    #: ``(id, attempts)``: this attempt, as every fenced statement names it (made once:
    #: the worker looks attempts up by it several times per job).
    key: AttemptKey = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.key = (self.id, self.attempts)

    @classmethod
    def from_row(cls, row: Row[Any], lease: float) -> Claimed:
        """Build from a row of `statements.claim`."""
        return cls(
            row.id,
            row.kind,
            row.queue,
            row.payload,
            row.attempts,
            row.max_attempts,
            row.idempotency_key,
            lease,
            trace_context=_decoded(getattr(row, "trace_context", None)),
            rate_stamp=getattr(row, "rate_stamp", None),
            waited=getattr(row, "waiting_for", None) is not None,
            has_steps=bool(getattr(row, "has_steps", None)),
        )

    @classmethod
    def from_rows(
        cls, rows: Sequence[Row[Any]], leases: Mapping[str, float], default_lease: float
    ) -> list[Claimed]:
        """Build from the rows of one claim statement: `from_row` for each, cheaper.

        The rows of one statement have the same columns: which optional ones are
        there is looked up once (a missing column costs `getattr` two exceptions per
        row), the columns are read by position, and the claim's return time is read
        once for the batch. A kind's lease is ``leases.get(kind, default_lease)``.
        """
        if not rows:
            return []
        fields = rows[0]._fields
        position = {name: i for i, name in enumerate(fields)}
        at_id, at_kind, at_queue, at_payload = (position[name] for name in _REQUIRED[:4])
        at_attempts, at_max, at_key = (position[name] for name in _REQUIRED[4:])
        trace = position.get("trace_context")
        stamp = position.get("rate_stamp")
        waiting = position.get("waiting_for")
        steps = position.get("has_steps")
        claimed_at = time.monotonic()
        lease_of = leases.get
        return [
            cls(
                row[at_id],
                row[at_kind],
                row[at_queue],
                row[at_payload],
                row[at_attempts],
                row[at_max],
                row[at_key],
                lease_of(row[at_kind], default_lease),
                claimed_at,
                # `_decoded`, inline: it is one call per job.
                None if trace is None or isinstance(t := row[trace], UndecodableJSON) else t,
                None if stamp is None else row[stamp],
                waiting is not None and row[waiting] is not None,
                steps is not None and bool(row[steps]),
            )
            for row in rows
        ]


#: The columns every claim returns, in `Claimed`'s own order (`Claimed.from_rows`).
_REQUIRED = ("id", "kind", "queue", "payload", "attempts", "max_attempts", "idempotency_key")


def _decoded(value: Any) -> Any:
    """`value`, or None when the claim could not decode it (`UndecodableJSON`)."""
    return None if isinstance(value, UndecodableJSON) else value


def fence_params(jobs: Iterable[Claimed], owner: str) -> dict[str, Any]:
    """The parameters of a batched fenced statement (``ids``, ``attempt_numbers``, ``owner``)."""
    jobs = list(jobs)
    return {
        "ids": [job.id for job in jobs],
        "attempt_numbers": [job.attempts for job in jobs],
        "owner": owner,
    }


def fence_literals(jobs: Sequence[Claimed], owner: str) -> dict[str, Any]:
    """`fence_params` with each array as its text, ``'{1,2}'`` (`statements.complete`).

    One string for the driver to send per array, where a list costs it a dump of
    each element.
    """
    ids = ",".join(map(str, [job.id for job in jobs]))
    attempts = ",".join(map(str, [job.attempts for job in jobs]))
    return {"ids": f"{{{ids}}}", "attempt_numbers": f"{{{attempts}}}", "owner": owner}


@dataclass(slots=True)
class Outcome:
    """The end of one attempt, for the completer to record (read-only)."""

    job: Claimed
    result: Result
    delay: float = 0.0
    error: str | None = None
    duration: float = 0.0
    #: What the handler returned, as JSON text for the ``result`` column (None: nothing).
    returned: str | None = None


class InFlight:
    """The attempts a worker has claimed and not yet recorded, keyed by `Claimed.key`.

    Shared by the claim loop (adds and removes), the handler pool (reads) and the
    heartbeats (snapshots), hence the lock. Keying by ``(id, attempts)`` keeps an
    old attempt's late report from removing a newer attempt of the same job.

    It also keeps, for each attempt, when its lease was last confirmed (`confirmed`):
    the monotonic time just before the claim round or heartbeat that last set its
    ``locked_until``. The lease lasts at least `Claimed.lease` from then, so the
    worker can tell, before it starts a job, whether its lease may have expired
    (`worker.run.lease_check`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[AttemptKey, Claimed] = {}
        self._confirmed: dict[AttemptKey, float] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, key: object) -> bool:
        return key in self._jobs

    def count(self, keys: set[AttemptKey]) -> int:
        """How many of `keys` are booked (one set operation, not a lookup each)."""
        return len(self._jobs.keys() & keys)

    def add(self, jobs: Iterable[Claimed], confirmed: float | None = None) -> None:
        """Book claimed attempts; `confirmed`: when their claim round began (monotonic)."""
        with self._lock:
            for job in jobs:
                self._jobs[job.key] = job
                if confirmed is not None:
                    self._confirmed[job.key] = confirmed

    def remove(self, jobs: Iterable[Claimed]) -> None:
        """Forget recorded attempts (each by its own key only)."""
        with self._lock:
            for job in jobs:
                self._jobs.pop(job.key, None)
                self._confirmed.pop(job.key, None)

    def renewed(self, keys: Iterable[AttemptKey], at: float) -> None:
        """The leases of `keys` were extended by a statement sent at `at` (monotonic)."""
        with self._lock:
            for key in keys:
                if key in self._jobs and self._confirmed.get(key, -math.inf) < at:
                    self._confirmed[key] = at

    def confirmed(self, job: Claimed) -> float:
        """When `job`'s lease was last known to be set (monotonic; its claim if not booked)."""
        return self._confirmed.get(job.key, job.claimed_at)

    def snapshot(self) -> list[Claimed]:
        """The attempts in flight now."""
        with self._lock:
            return list(self._jobs.values())


def storable_text(text: object, limit: int = MAX_ERROR_LENGTH) -> str | None:
    r"""`text` as PostgreSQL ``text`` can hold it, at most `limit` characters.

    NUL characters become ``\x00`` and lone surrogates ``\udXXX`` escapes (neither
    can be stored, and either would make the fenced update fail on every round);
    anything longer than `limit` keeps its head and tail. A non-string is stored by
    its ``repr``. None stays None.

    >>> storable_text("a\x00b")
    'a\\x00b'
    >>> storable_text("x" * 10, limit=7)
    'x\n...\nx'
    """
    if text is None:
        return None
    if not isinstance(text, str):
        text = repr(text)
    text = text.replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= limit:
        return text
    head = max(1, (limit - 5) // 2)
    tail = max(1, limit - 5 - head)
    return f"{text[:head]}\n...\n{text[-tail:]}"


def storable_delay(delay: float) -> float:
    """A backoff policy's delay bounded to what ``now() + interval`` accepts (0-100 years).

    >>> storable_delay(float("inf")) == MAX_DELAY_SECONDS
    True
    >>> storable_delay(-3.0)
    0.0
    """
    if not math.isfinite(delay):
        return MAX_DELAY_SECONDS if delay > 0 else 0.0
    return min(max(delay, 0.0), MAX_DELAY_SECONDS)
