"""A job's durable state for operators: its recorded steps, its signals, what it waits for.

Read by ``sa-jobqueue jobs show`` (and `OperatorAPI.durable`); see docs/durable.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.core import compensation
from sa_jobqueue.core.redaction import redact
from sa_jobqueue.ops.archived import find_archived
from sa_jobqueue.schema.model import FINISHED, JobMixin, Status
from sa_jobqueue.statements import steps as statements

__all__ = ["DurableState", "RecordedStep", "SentSignal", "durable_state"]


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One row of the steps table: a step, a sleep, or a signal wait (open or ended).

    ``kind`` is ``step``, ``sleep``, ``wait`` (open: the job is parked for it),
    ``signal`` (received; ``result`` is its payload) or ``timeout``; ``until`` is a
    sleep's end or an open wait's timeout.
    """

    name: str
    kind: str
    result: Any
    attempt: int
    recorded_at: datetime
    until: datetime | None


@dataclass(frozen=True, slots=True)
class SentSignal:
    """One signal sent to the job (``consumed_at``: when a wait took it; None: kept)."""

    name: str
    payload: Any
    sent_at: datetime
    consumed_at: datetime | None


@dataclass(frozen=True)
class DurableState:
    """A job's steps and signals, and what it is parked for (None: not parked)."""

    steps: list[RecordedStep] = field(default_factory=list)
    signals: list[SentSignal] = field(default_factory=list)
    #: ``"signal <name>"``, ``"sleep <name>"`` or ``"job <id>"`` (``ctx.wait_for_job``)
    #: while the job is parked; else None.
    parked_for: str | None = None
    #: Its compensation (docs/durable.md): ``{"state": "owed" | "finished" | "failed",
    #: "status": the status it ends with, "error": why it failed}``; None: none.
    compensation: dict[str, Any] | None = None

    def redacted(self, keys: Iterable[str]) -> DurableState:
        """As shown to people: steps' results and signals' payloads with `keys` masked."""
        keys = tuple(keys)
        return replace(
            self,
            steps=[replace(s, result=redact(s.result, keys)) for s in self.steps],
            signals=[replace(s, payload=redact(s.payload, keys)) for s in self.signals],
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (timestamps in ISO 8601)."""

        def plain(value: Any) -> Any:
            return value.isoformat() if isinstance(value, datetime) else value

        return {
            "steps": [{k: plain(v) for k, v in asdict(s).items()} for s in self.steps],
            "signals": [{k: plain(v) for k, v in asdict(s).items()} for s in self.signals],
            "parked_for": self.parked_for,
            "compensation": self.compensation,
        }


_FINISHED = frozenset(status.value for status in FINISHED)


def _archived_steps(conn: Connection, model: type[JobMixin], job_id: int) -> list[RecordedStep]:
    """The steps an archived job moved with (its archive row's ``steps``), or none.

    A finished job with no row in the steps table may have been archived: its steps
    (and its compensation marker) went with it, as JSON (`statements.archive`).
    """
    row = find_archived(conn, model, job_id)
    if row is None or not row.steps:
        return []

    def at(value: Any) -> datetime | None:
        return None if value is None else datetime.fromisoformat(value)

    return [
        RecordedStep(
            s["name"],
            s["kind"],
            s.get("result"),
            s.get("attempt", 0),
            datetime.fromisoformat(s["recorded_at"]),
            at(s.get("until")),
        )
        for s in row.steps
    ]


def durable_state(
    conn: Connection, model: type[JobMixin], job_id: int, status: str
) -> DurableState:
    """The steps and signals of job `job_id` (whose status is `status`)."""
    params = {"job_id": job_id}
    steps = [RecordedStep(*row) for row in conn.execute(statements.steps_of(model), params)]
    if not steps and status in _FINISHED:
        steps = _archived_steps(conn, model, job_id)
    signals = [SentSignal(*row) for row in conn.execute(statements.signals_of(model), params)]
    marker = next((s for s in steps if s.name == compensation.MARKER), None)
    state = None if marker is None else dict(marker.result or {})
    if state is not None:
        state.pop("reason", None)  # the job's last_error, shown with it
    parked_for = None
    compensating = state is not None and state.get("state") == "owed"
    if status == Status.PENDING.value and steps and not compensating:
        waits = [s for s in steps if s.kind == "wait"]
        last = steps[-1]
        if waits and waits[-1].name.startswith("job:"):  # ctx.wait_for_job
            parked_for = f"job {waits[-1].name.removeprefix('job:')}"
        elif waits:
            parked_for = f"signal {waits[-1].name}"
        elif last.kind == "sleep":
            parked_for = f"sleep {last.name}"
    return DurableState(steps, signals, parked_for, state)
