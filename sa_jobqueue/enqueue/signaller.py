"""`Signaller`: ``jobs.signal``, a signal to a job, in the caller's transaction.

The driver's `signal_send` locks the job's row first, then inserts the signal and, when
the job is parked waiting for it, makes it due now and wakes its queue's workers: all
at the caller's COMMIT, none at a rollback. A missing or ended job is refused here with
a `ValidationError`. See docs/durable.md.
"""

from __future__ import annotations

from typing import Any, Generic

from sqlalchemy import Connection

from sa_jobqueue.core.validation import check_job_id, check_name, dump_payload
from sa_jobqueue.driver import driver_for
from sa_jobqueue.driver.protocol.steps import SignalSend
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.model import JobT

__all__ = ["Signaller"]


class Signaller(Generic[JobT]):
    """Sends signals to jobs of `model`, through the driver of the caller's connection."""

    def __init__(self, model: type[JobT], max_payload_bytes: int) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.model = model
        self._table = model.__tablename__

    def check(self, job_id: object, name: object, payload: Any) -> tuple[int, str, str | None]:
        """The checked arguments, the payload as JSON text (None: no payload)."""
        checked_id = check_job_id(job_id)
        checked_name = check_name("signal name", name)
        text = None
        if payload is not None:
            text = dump_payload(payload, self.max_payload_bytes, name="signal payload")
        return checked_id, checked_name, text

    def send(self, conn: Connection, job_id: int, name: str, payload: str | None) -> int:
        """Insert the signal on `conn` (the caller's transaction); return its id.

        Raises:
            ValidationError: no job `job_id`, or it has ended.
        """
        sent = driver_for(conn, self.model).signal_send(conn, SignalSend(job_id, name, payload))
        if sent.status is None:
            raise ValidationError(
                "job id", job_id, f"is not a job of table {self._table!r}: no job to signal"
            )
        if sent.signal_id is None:
            raise ValidationError(
                "job id",
                job_id,
                f"has ended ({sent.status}): no wait of it can take signal {name!r} any more",
            )
        return sent.signal_id
