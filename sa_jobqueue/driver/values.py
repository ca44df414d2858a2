"""The small values a `Driver` returns: `Held`, `Upstream`, `NextDue` and `Swept`.

Plain data over the attempt keys of `sa_jobqueue.worker.attempt`; `sa_jobqueue.worker.driver`
re-exports them. See docs/reference/runtime.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter
from typing import Any, NamedTuple

from sa_jobqueue.worker.attempt import AttemptKey

__all__ = ["Held", "NextDue", "Swept", "Upstream"]


class Held(set[AttemptKey]):
    """The attempts a fenced ``done`` still held, and which of those jobs others wait for.

    A `set` of `AttemptKey`; `with_dependents` lists the ids (of jobs in it) that
    have dependents, for `Driver.release_dependents` in the same transaction.
    """

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
    """A job whose expired lease the sweeper recovered."""

    id: int
    kind: str
    attempts: int
    status: str
