"""Due kinds that the workers' claims step over (`statements.passed_over`): stats, dashboard."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.schema.model import JobMixin

__all__ = ["PASSED_OVER_WINDOW", "PassedOver", "passed_over"]

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
    """

    queue: str
    kind: str
    due: int
    waited_seconds: float

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
    """The due kinds that jobs queued behind them overtook, while none of theirs ran.

    There is no registry of the kinds each worker handles: this is what the claims
    of the last `window` seconds show. A worker claims only kinds it has handlers
    for, so the usual cause is that no running worker of the queue handles the kind
    (a deploy in flight, a worker of an older release); the workers that do may
    also all be busy. `limited` kinds (a limit may hold them back) are left out.
    """
    skip = set(limited)
    rows = session.execute(statements.passed_over(model), {"window": window}).all()
    return [PassedOver(**row._asdict()) for row in rows if row.kind not in skip]
