"""Savepoint batches set each job's attempt aside while the batch runs, and take it back."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from tests.integration.worker.test_savepoint_batch import _claim_all, _enqueue, _executor, _queue
from tests.support.models import Job


def _budgets(engine):
    with Session(engine) as s:
        return {j.id: (j.status, j.max_attempts) for j in s.scalars(select(Job).order_by(Job.id))}


def test_a_committed_savepoint_batch_leaves_every_max_attempts_as_it_was(committed):
    jobs = _queue(committed)
    ids = _enqueue(committed, jobs, ["ok", "boom", "ok", "lease_mode"])
    _executor(committed, jobs).run_batch(_claim_all(committed, jobs))
    budgets = _budgets(committed)
    assert [budgets[i] for i in ids] == [
        ("done", 20),
        ("running", 20),  # its failure is recorded by the completer, against 20
        ("done", 20),
        ("running", 20),  # lease mode: ran alone, its done is the loop's to record
    ]


def test_a_batch_job_on_a_later_attempt_runs_alone_and_keeps_its_budget(committed):
    jobs = _queue(committed)
    ids = _enqueue(committed, jobs, ["ok", "ok", "ok"])
    claimed = _claim_all(committed, jobs)
    second = claimed[1].__class__(**{**_fields(claimed[1]), "attempts": 2})
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == ids[1]).values(attempts=2))
    outcomes = _executor(committed, jobs).run_batch([claimed[0], second, claimed[2]])
    assert [o.job.id for o in outcomes] == ids
    assert [_budgets(committed)[i] for i in ids] == [("done", 20)] * 3


def _fields(job):
    return {
        name: getattr(job, name)
        for name in (
            "id",
            "kind",
            "queue",
            "payload",
            "attempts",
            "max_attempts",
            "idempotency_key",
            "lease",
        )
    }
