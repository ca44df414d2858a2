"""Due kinds no live worker takes: by the worker registry, and by what the claims stepped over.

`passed_over` merges `statements.registry.unhandled_kinds` (no live registered worker of
the queue has the kind) with `statements.passed_over` (the claims' evidence, which also
catches workers too busy for a kind); for stats and the dashboard's overview.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements.registry import unhandled_kinds

__all__ = ["NO_LIVE_WORKER", "PASSED_OVER", "PASSED_OVER_WINDOW", "PassedOver", "passed_over"]

#: `PassedOver.reason` when no live registered worker of the queue handles the kind.
NO_LIVE_WORKER = "no live worker"
#: `PassedOver.reason` when only the claims show it: jobs behind it ran, none of its own.
PASSED_OVER = "passed over"

#: Seconds of claims looked at: jobs claimed since then are the evidence.
PASSED_OVER_WINDOW = 600.0


@dataclass(frozen=True, slots=True)
class PassedOver:
    """A kind with due jobs that the claims pass over: likely no running worker handles it.

    Attributes:
        queue: the queue its due jobs are in.
        kind: the kind.
        due: how many of its jobs are due.
        waited_seconds: how long its first due job (in claim order) has been due.
        reason: `NO_LIVE_WORKER` when the worker registry shows no live worker of the
            queue with a handler for it (whatever the claims did); `PASSED_OVER` when
            live workers do handle it but the claims of the window stepped over it
            (those workers are busy, or not registered: an older release).
    """

    queue: str
    kind: str
    due: int
    waited_seconds: float
    reason: str = PASSED_OVER

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def passed_over(
    session: Session,
    model: type[JobMixin],
    *,
    limited: Iterable[str] = (),
    window: float = PASSED_OVER_WINDOW,
) -> list[PassedOver]:
    """The due kinds no live worker takes, by registry and by the claims' evidence.

    A kind is listed when the worker registry has live workers but none of them, for
    the kind's queue, has a handler for it (`NO_LIVE_WORKER`: known at once, before any
    claim); or when jobs queued behind it were claimed within the last `window` seconds
    while none of its own was (`PASSED_OVER`: those that handle it are all busy, or
    run a release without the registry). Nothing is listed by the registry while no
    worker is live at all. `limited` kinds (a limit may hold them back) are left out.
    """
    skip = set(limited)
    found: dict[tuple[str, str], PassedOver] = {}
    rows = session.execute(statements.passed_over(model), {"window": window}).all()
    for row in rows:
        found[(row.queue, row.kind)] = PassedOver(**row._asdict())
    for row in session.execute(unhandled_kinds(model)).all():
        found[(row.queue, row.kind)] = PassedOver(**row._asdict(), reason=NO_LIVE_WORKER)
    return [found[key] for key in sorted(found) if key[1] not in skip]
