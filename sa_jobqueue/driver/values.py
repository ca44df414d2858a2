"""The values a `Driver` takes and returns: `Claimed`, `AttemptKey`, `Result`, `Held`...

An attempt is named by ``(id, attempts)`` (`AttemptKey`): the same job claimed again is
a *different* attempt, and nothing recorded for one may touch the other. A claim returns
`Claimed` jobs; the fenced ``done`` returns the attempts it `Held`; a failure is recorded
by its `Result`. `sa_jobqueue.driver` re-exports them. See docs/reference/runtime.md.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import Row

from sa_jobqueue.schema.lenient_json import UndecodableJSON

__all__ = [
    "AttemptKey",
    "Claimed",
    "Held",
    "NextDue",
    "Result",
    "Swept",
    "Upstream",
]

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
    COMPENSATED = "compensated"  # its compensations ran (or failed for good: `error`):
    # end it with its final status (`CompensationOps.compensation_end`)


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
        """Build from a row of `claims.claim`."""
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


class Held(set[AttemptKey]):
    """The attempts a fenced ``done`` still held, and which of those jobs others wait for.

    A `set` of `AttemptKey`; `with_dependents` lists the ids (of jobs in it) that
    have dependents, for `Driver.dependents_release` in the same transaction; `locked`
    names the limited kinds whose locks the same statement took (``lock_kinds``).
    """

    #: The kinds whose locks the ``done`` took for this transaction (a class default:
    #: most acknowledgements take none, and pay nothing for it).
    locked: frozenset[str] = frozenset()

    def __init__(self, keys: Iterable[AttemptKey] = (), with_dependents: Iterable[int] = ()):
        super().__init__(keys)
        self.with_dependents: list[int] = list(with_dependents)

    @classmethod
    def from_rows(cls, rows: Sequence[Any]) -> Held:
        """From the ``(id, attempts, has_dependents)`` rows of a fenced ``done``.

        As fast as the plain set of keys it replaced: no job has dependents, usually,
        and the columns are read by C iterators, not by a Python loop per row.
        """
        ids = list(map(_ID, rows))
        held = cls(zip(ids, map(_ATTEMPTS, rows), strict=True))
        if any(map(_HAS_DEPENDENTS, rows)):
            held.with_dependents = list(compress(ids, map(_HAS_DEPENDENTS, rows)))
        return held


_ID, _ATTEMPTS, _HAS_DEPENDENTS = itemgetter(0), itemgetter(1), itemgetter(2)


class Upstream(NamedTuple):
    """A job that a starting job waited for: its id, final status and stored result.

    A tuple: a batch callback reads one per member (10,000 of them, say) as it starts.
    """

    id: int
    status: str
    result: Any


@dataclass(frozen=True, slots=True)
class NextDue:
    """When the earliest pending job is due, by the database's clock.

    Attributes:
        seconds: from now until it is due (<= 0: due already), or None when no job
            of the queues is pending.
        now: the database clock, Unix seconds.
    """

    seconds: float | None
    now: float


@dataclass(frozen=True, slots=True)
class Swept:
    """A job whose expired lease the sweeper recovered (``queue``: where it is claimed)."""

    id: int
    kind: str
    attempts: int
    status: str
    queue: str
