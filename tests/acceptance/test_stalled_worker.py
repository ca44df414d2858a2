"""A worker stopped (SIGSTOP) while it holds jobs claimed ahead must not start them late.

A job that never started never starts after its lease may have expired (the check
before each start, `worker.run.lease_check`). Worker A (concurrency 1, claims ahead)
holds one long job and 128 jobs claimed ahead of its one slot; it is stopped; worker B
starts; the sweeper makes A's expired leases ``pending`` and B runs them; then A
resumes. The effects table says which attempts started: only B's may have, for every
job A never started.
"""

from __future__ import annotations

import signal

import pytest

from tests.acceptance.conftest import count_jobs, effects, enqueue_many
from tests.support.apps.held import jobs
from tests.support.helpers import wait_for
from tests.support.models import Job

pytestmark = pytest.mark.slow

HELD = 128


def test_stalled_worker_does_not_start_expired_claims(committed, spawn):
    # A long wait before held jobs are given back (docs/workers.md): this test is
    # about the stall, not about that policy.
    a = spawn("--ahead-wait", "600")
    # Warm up: after a few hundred no-ops, A's handlers are known to be short, so
    # it claims up to `prefetch` (128) jobs ahead of its free slot.
    enqueue_many(committed, jobs, [("noop", {})] * 300)
    wait_for(lambda: count_jobs(committed, Job.status == "done") == 300, what="warm-up")

    specs = [("effect", {"sleep": 5, "only_attempt": 1, "note": "long"})]
    specs += [("effect", {"note": "held"})] * HELD
    long_id, *held = enqueue_many(committed, jobs, specs)
    mine = (Job.status == "running", Job.locked_by == a.worker_id)
    wait_for(lambda: count_jobs(committed, *mine) == HELD + 1, what="A holding 129 jobs")
    a.signal(signal.SIGSTOP)
    assert effects(committed, held) == []  # none of the held jobs started before the stop

    b = spawn()
    # The sweeper (B's) recovers A's expired leases; B runs the jobs.
    wait_for(lambda: count_jobs(committed, *mine) == 0, what="A's leases recovered")
    a.signal(signal.SIGCONT)
    wait_for(
        lambda: count_jobs(committed, Job.status == "done") == 300 + HELD + 1,
        timeout=90,
        what="every job done",
    )
    # A deals with each held job once resumed: refuses it (fixed) or runs it (the fault).
    refused = "not started: its lease expired"
    wait_for(
        lambda: (
            a.count_log(refused) + len([e for e in effects(committed, held) if e[1] == 1]) >= HELD
        ),
        timeout=60,
        what="A to handle its held jobs",
    )
    a.signal(signal.SIGTERM)
    assert a.wait() == 0
    b.signal(signal.SIGTERM)
    assert b.wait() == 0

    got = effects(committed, held)
    ran_twice = len(got) - len({job_id for job_id, _ in got})
    assert ran_twice == 0, f"{ran_twice} jobs A never started ran twice"
    assert sorted(job_id for job_id, _ in got) == sorted(held)  # each ran once, on B
    assert {attempt for _, attempt in got} == {2}
    # The long job usually started on A before the stop (at-least-once allows its rerun);
    # when the stop came between its claim and its start, A refused it too.
    long_started = (long_id, 1) in effects(committed, [long_id])
    assert a.count_log(refused) == HELD + (0 if long_started else 1)
    assert (long_id, 2) in effects(committed, [long_id])
