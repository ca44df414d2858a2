"""Jobs claimed ahead must not wait behind a long job while another worker is idle.

docs/workers.md#claiming-ahead: a job that waited longer than `ahead_wait` for a
free slot goes back to ``pending`` (no attempt used), and the other workers of its
queue are notified. Two real workers at concurrency 1, both warmed up on no-ops so
that they claim up to 128 jobs ahead; then one long job (it runs until the test ends
it) and 400 no-ops: the worker that claims the long job holds no-ops behind it.
"""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.acceptance.conftest import count_jobs, enqueue_many, scalar
from tests.support.apps.held import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job

pytestmark = pytest.mark.slow


def test_jobs_held_ahead_behind_a_long_job_go_to_an_idle_worker(committed, spawn):
    a, b = spawn(), spawn()
    enqueue_many(committed, jobs, [("noop", {})] * 3000)
    wait_for(lambda: count_jobs(committed, Job.status == "done") == 3000, 120, "warm-up")

    long_id, *short = enqueue_many(
        committed, jobs, [("wait_for_row", {"until": "end"})] + [("noop", {})] * 400
    )
    # The fault: up to 128 no-ops wait in the long job's worker until it ends.
    wait_for(
        lambda: count_jobs(committed, Job.id.in_(short), Job.status == "done") == len(short),
        timeout=60,
        what="all 400 short jobs done while the long one runs",
    )
    assert scalar(committed, select(Job.status).where(Job.id == long_id)) == "running"
    holder_id = scalar(committed, select(Job.locked_by).where(Job.id == long_id))
    holder = a if a.worker_id == holder_id else b
    assert holder.worker_id == holder_id
    assert "jobs claimed ahead back to pending" in holder.output()  # it held some, gave them

    with Session(committed) as s, s.begin():
        s.add(Effect(job_id=0, attempt=0, note="end"))
    wait_for(lambda: count_jobs(committed, Job.status == "done") == 3401, what="the long job")
    assert count_jobs(committed, Job.status != "done") == 0
    # Given back without using an attempt: none of them came near max_attempts.
    attempts = scalar(committed, select(Job.attempts).where(Job.id == long_id))
    assert attempts == 1
    for worker in (a, b):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0
