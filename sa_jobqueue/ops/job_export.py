"""A job and its recorded steps as one JSON document: ``sa-jobqueue jobs export ID``.

What ``sa_jobqueue.testing.replay`` replays against today's handler code, in a test
(docs/durable.md, "Changing code under running jobs"): export a parked or finished job
from production, keep the file with the tests, replay it in CI.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue.ops.admin import get_job
from sa_jobqueue.ops.durable_state import durable_state
from sa_jobqueue.schema.model import JobMixin

__all__ = ["EXPORT_FORMAT", "job_export"]

#: The ``format`` of an export; a later layout gets a new one.
EXPORT_FORMAT = "sa-jobqueue.job-export/1"


def job_export(
    session: Session, model: type[JobMixin], job_id: int, *, redact_keys: Iterable[str] = ()
) -> dict[str, Any] | None:
    """Job `job_id` as JSON-ready data, or None when no job has that id.

    ``{"format": EXPORT_FORMAT, "job": {the row's columns}, "steps": [...], "signals":
    [...]}``: the steps are every row of the steps table for the job (name, kind,
    result, attempt, recorded_at, until), in the order they were recorded; timestamps in
    ISO 8601. `redact_keys`: payload, result and step-result keys whose values are
    masked (the command line masks the application's ``redact_keys``, as ``jobs show``).
    """
    job = get_job(session, model, job_id)
    if job is None:
        return None
    durable = durable_state(session.connection(), model, job.id, job.status)
    keys = tuple(redact_keys)
    if keys:
        job, durable = job.redacted(keys), durable.redacted(keys)
    state = durable.to_dict()
    return {
        "format": EXPORT_FORMAT,
        "job": job.to_dict(),
        "steps": state["steps"],
        "signals": state["signals"],
    }
