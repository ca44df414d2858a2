"""Seeing and repairing workflows: jobs show, cancel, retry --with-dependents, retention."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sa_jobqueue import Discard
from sa_jobqueue.cli import main
from sa_jobqueue.ops.retention import prune
from tests.support.models import Job, new_queue


@pytest.fixture
def run(committed, database_url):
    def invoke(*args: str):
        return CliRunner().invoke(main, list(args), env={"DATABASE_URL": database_url})

    return invoke


def _statuses(engine, *ids):
    with Session(engine) as session:
        rows = session.execute(select(Job.id, Job.status).where(Job.id.in_(ids)))
        found = dict(rows.all())
    return [found[i] for i in ids]


def _failing_graph(committed):
    jobs = new_queue()
    calls = {"fetch": 0}

    @jobs.task("fetch")
    def fetch(ctx):
        calls["fetch"] += 1
        if calls["fetch"] == 1:
            raise Discard("first time")
        return "ok"

    jobs.task("resize")(lambda ctx: list(ctx.upstream.values()))
    jobs.task("anyway")(lambda ctx: None)
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "fetch")
        b = jobs.enqueue(session, "resize", after=[a])
        c = jobs.enqueue(session, "resize", after=[b])
        # Held in a queue no worker drains here: d still waits for it.
        x = jobs.enqueue(session, "later", queue="held")
        d = jobs.enqueue(session, "anyway", after=[a, x], after_failure="run")
        ids = a.id, b.id, c.id, d.id
    jobs.worker(committed, listen=False, queues=["default"]).drain()
    return jobs, ids


def test_jobs_show_lists_what_a_job_waits_for_and_what_waits_for_it(run, committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "fetch")
        b = jobs.enqueue(session, "resize", after=[a])
        a_id, b_id = a.id, b.id
    shown = run("jobs", "show", str(a_id))
    assert shown.exit_code == 0, shown.output
    assert "waits for: -" in shown.output
    assert f"waited for by:\n  job {b_id} resize waiting" in shown.output
    listed = run("jobs", "list", "--status", "waiting")
    assert listed.exit_code == 0, listed.output
    assert "waiting for 1" in listed.output
    as_json = json.loads(run("jobs", "show", str(b_id), "--json").output)
    assert (as_json["waiting_for"], as_json["after_failure"]) == (1, "cancel")
    assert as_json["upstream"] == [{"id": a_id, "kind": "fetch", "status": "pending"}]
    assert as_json["dependents"] == []


def test_retry_with_dependents_lets_the_cancelled_ones_run_again(run, committed):
    jobs, (a, b, c, d) = _failing_graph(committed)
    # d waits for a and x with after_failure="run": a's failure counted, x is pending.
    assert _statuses(committed, a, b, c, d) == ["failed", "cancelled", "cancelled", "waiting"]
    result = run("retry", str(a), "--with-dependents")
    assert result.exit_code == 0, result.output
    assert f"job {b} waits again" in result.output
    assert f"job {c} waits again" in result.output
    assert _statuses(committed, a, b, c, d) == ["pending", "waiting", "waiting", "waiting"]
    jobs.worker(committed, listen=False, queues=["default"]).drain()
    assert _statuses(committed, a, b, c, d) == ["done", "done", "done", "waiting"]
    with Session(committed) as session:
        assert session.scalar(select(Job.result).where(Job.id == b)) == ["ok"]


def test_retry_with_dependents_as_json_names_the_jobs_that_wait_again(run, committed):
    _, (a, b, c, _) = _failing_graph(committed)
    result = run("retry", str(a), "--with-dependents", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert (found["ids"], sorted(found["revived"])) == ([a], sorted([b, c]))


def test_retry_without_dependents_keeps_the_counts_of_jobs_still_waiting(committed):
    jobs, (a, b, c, d) = _failing_graph(committed)
    with Session(committed) as session, session.begin():
        jobs.retry(session, [a])
    jobs.worker(committed, listen=False, queues=["default"]).drain()
    # a ran again and ended done; b and c stay cancelled; d still waits for x: a's two
    # ends were counted as one (d is not released early).
    assert _statuses(committed, a, b, c, d) == ["done", "cancelled", "cancelled", "waiting"]
    with Session(committed) as session:
        assert session.scalar(select(Job.waiting_for).where(Job.id == d)) == 1


def test_cancelling_an_upstream_job_cancels_its_dependents_and_runs_after_failure_run(committed):
    jobs = new_queue()
    jobs.task("anyway")(lambda ctx: None)
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "fetch")
        b = jobs.enqueue(session, "resize", after=[a])
        c = jobs.enqueue(session, "anyway", after=[a], after_failure="run")
        w = jobs.enqueue(session, "resize", after=[b])
        ids = a.id, b.id, c.id, w.id
    with Session(committed) as session, session.begin():
        assert jobs.cancel(session, [ids[0]]).ids == [ids[0]]
    assert _statuses(committed, *ids) == ["cancelled", "cancelled", "pending", "cancelled"]
    # A waiting job can be cancelled too.
    with Session(committed) as session, session.begin():
        x = jobs.enqueue(session, "resize", after=[ids[2]])
        x_id = x.id
    with Session(committed) as session, session.begin():
        assert jobs.cancel(session, [x_id]).ids == [x_id]


def test_retention_keeps_a_finished_job_that_an_unfinished_one_waits_for(committed):
    jobs = new_queue()
    jobs.task("fetch")(lambda ctx: "ok")
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "fetch")
        b = jobs.enqueue(session, "fetch")
        # Held in a queue no worker drains: it stays unfinished after a and b are done.
        jobs.enqueue(session, "resize", after=[a, b], queue="held")
        lone = jobs.enqueue(session, "fetch")
        ids = a.id, b.id, lone.id
    jobs.worker(committed, listen=False, queues=["default"]).drain()
    assert _statuses(committed, *ids) == ["done", "done", "done"]
    with Session(committed) as session, session.begin():
        session.execute(
            update(Job)
            .where(Job.id.in_(ids))
            .values(finished_at=Job.finished_at - timedelta(days=30))
        )
    prune(committed, Job, older_than=timedelta(days=1))
    with Session(committed) as session:
        left = set(session.scalars(select(Job.id).where(Job.id.in_(ids))))
    # a and b are awaited (their results are the unfinished job's ctx.upstream).
    assert left == {ids[0], ids[1]}


def test_deleting_a_finished_upstream_a_waiting_job_needs_keeps_it_and_names_the_dependents(
    committed,
):
    from starlette.testclient import TestClient

    from sa_jobqueue.dashboard import make_app
    from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD
    from sa_jobqueue.ops import admin, bulk

    jobs = new_queue()
    jobs.task("first")(lambda ctx: "needed")
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "first")
        held = jobs.enqueue(session, "later", queue="held")  # no worker here drains it
        b = jobs.enqueue(session, "join", after=[a, held], queue="held")
        a_id, held_id, b_id = a.id, held.id, b.id
    jobs.worker(committed, listen=False, queues=["default"]).drain()
    assert _statuses(committed, a_id, b_id) == ["done", "waiting"]

    with Session(committed) as session, session.begin():
        kept = admin.delete_finished(session, Job, [a_id])
    assert (kept.ids, kept.awaited, kept.skipped) == ([], {a_id: [b_id]}, {})
    assert kept.to_dict()["awaited"] == {str(a_id): [b_id]}
    with Session(committed) as session:
        counted = bulk.count(session, Job, "delete", ids=[a_id])
    assert (counted.changed, counted.awaited) == (0, 1)
    by_id = bulk.apply(committed, Job, "delete", ids=[a_id])
    assert (by_id.changed, by_id.awaited) == (0, 1)
    by_filter = bulk.apply(committed, Job, "delete", match=bulk.Match(status="done"))
    assert by_filter.changed == 0
    client = TestClient(make_app(jobs, committed, allow_actions=True), base_url="http://127.0.0.1")
    assert client.get("/").status_code == 200
    page = client.post(f"/jobs/{a_id}/delete", data={CSRF_FIELD: client.cookies[CSRF_COOKIE]})
    assert "Not deleted: jobs that have not ended wait for it" in page.text
    assert _statuses(committed, a_id) == ["done"]

    # Once nothing waits for it, it goes like any finished job.
    with Session(committed) as session, session.begin():
        jobs.cancel(session, [held_id])  # b is cancelled with it
    with Session(committed) as session, session.begin():
        gone = admin.delete_finished(session, Job, [a_id])
    assert (gone.ids, gone.awaited) == ([a_id], {})
