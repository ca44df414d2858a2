"""`Signaller`: ``jobs.signal``, a signal to a job, in the caller's transaction.

The job's row is locked first (``FOR NO KEY UPDATE``), then the signal is inserted and,
when the job is parked waiting for it, made due now with a ``pg_notify`` on the channel
new jobs use: all sent at the caller's COMMIT, none at a rollback. See docs/durable.md.
"""

from __future__ import annotations

from typing import Any, Generic

from sqlalchemy import Connection

from sa_jobqueue.core.validation import check_job_id, check_name, dump_payload
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.model import FINISHED, JobT
from sa_jobqueue.schema.naming import channel_name
from sa_jobqueue.statements import steps as statements

__all__ = ["Signaller"]

_FINISHED = {status.value for status in FINISHED}


class Signaller(Generic[JobT]):
    """Sends signals to jobs of `model` (statements built once)."""

    def __init__(self, model: type[JobT], max_payload_bytes: int) -> None:
        self.max_payload_bytes = max_payload_bytes
        self._table = model.__tablename__
        self._lock = statements.job_for_signal(model)
        self._send = statements.send_signal(model)
        self._wake = statements.wake_waiting(model, channel_name(model.__tablename__))

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
        status = conn.execute(self._lock, {"job_id": job_id}).scalar()
        if status is None:
            raise ValidationError(
                "job id", job_id, f"is not a job of table {self._table!r}: no job to signal"
            )
        if status in _FINISHED:
            raise ValidationError(
                "job id",
                job_id,
                f"has ended ({status}): no wait of it can take signal {name!r} any more",
            )
        signal_id: int = conn.execute(
            self._send, {"job_id": job_id, "name": name, "payload": payload}
        ).scalar_one()
        conn.execute(self._wake, {"job_id": job_id, "name": name}).all()
        return signal_id
