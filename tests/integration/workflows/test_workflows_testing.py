"""The testing toolkit follows workflows: `drain`, run-on-commit and `assert_enqueued(after=)`."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from sa_jobqueue.testing import assert_enqueued, drain, refute_enqueued, run_on_commit
from tests.support.models import new_queue


def test_drain_in_the_rolled_back_tier_follows_dependencies_with_results(session):
    jobs = new_queue()
    seen: list[object] = []
    jobs.task("fetch")(lambda ctx: {"bytes": 10})

    @jobs.task("resize")
    def resize(ctx):
        seen.append(dict(ctx.upstream))
        return 5

    jobs.task("publish")(lambda ctx: seen.append(sorted(ctx.upstream_statuses.values())))
    a = jobs.enqueue(session, "fetch")
    batch = jobs.batch(session, callback=("publish", {}))
    batch.enqueue_many([{"kind": "resize", "payload": {}, "after": [a]}] * 3)
    outcomes = drain(jobs, session)
    assert [o.kind for o in outcomes] == ["fetch", "resize", "resize", "resize", "publish"]
    assert seen == [{a.id: {"bytes": 10}}] * 3 + [["done", "done", "done"]]


def test_assert_enqueued_matches_what_a_job_waits_for(session):
    jobs = new_queue()
    a = jobs.enqueue(session, "fetch")
    b = jobs.enqueue(session, "fetch")
    c = jobs.enqueue(session, "resize", after=[a, b])
    assert assert_enqueued(session, "resize", after=[a, b.id], model=jobs) == [c]
    assert_enqueued(session, "fetch", after=[], count=2, model=jobs)
    refute_enqueued(session, "resize", after=[a], model=jobs)
    with pytest.raises(AssertionError, match=r"after=\[\d+\]; found none"):
        assert_enqueued(session, "resize", after=[b], model=jobs)


def test_run_on_commit_runs_a_chain_to_its_end(committed):
    jobs = new_queue()
    ran: list[str] = []
    for kind in ("a", "b", "c"):
        jobs.task(kind)(lambda ctx: ran.append(ctx.kind))
    with run_on_commit(jobs, committed), Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "a")
        b = jobs.enqueue(session, "b", after=[a])
        jobs.enqueue(session, "c", after=[b])
    assert ran == ["a", "b", "c"]
