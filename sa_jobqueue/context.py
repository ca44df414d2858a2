"""`JobContext`: everything a handler receives about the job it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

__all__ = ["JobContext"]


@dataclass(frozen=True)
class JobContext:
    """The handler's only argument.

    Attributes:
        id: the job's id.
        kind: the handler's name.
        queue: the queue it was claimed from.
        payload: the JSON payload, decoded.
        attempt: this attempt's number (1 for the first run); it counts claims.
        idempotency_key: the job's idempotency key, or ``"<table>:<id>"`` when it has
            none. Pass it to downstream systems (mailers, payment APIs) so that a
            job run twice has its side effect once.
        max_attempts: attempts allowed before the job is dead-lettered.
        worker_id: the id of the worker running it (``host:pid:random``).
        session: in transactional mode, a session whose transaction also carries the
            job's ``done`` mark; writes through it commit if and only if the job
            completes. ``None`` in lease mode.
    """

    id: int
    kind: str
    queue: str
    payload: Any
    attempt: int
    idempotency_key: str
    max_attempts: int = 1
    worker_id: str = ""
    _session: Session | None = field(default=None, repr=False)

    @property
    def session(self) -> Session:
        """The handler's session (transactional mode only).

        Raises:
            AttributeError: in lease mode, where the handler runs outside any queue
                transaction; open your own session there.
        """
        if self._session is None:
            raise AttributeError(
                f"job {self.id} ({self.kind!r}) runs in lease mode and has no session; "
                "register the task with transactional=True to get one"
            )
        return self._session
