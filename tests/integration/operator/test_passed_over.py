"""`stats` and the dashboard name the due kinds that the claims step over."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import JobQueue
from sa_jobqueue.dashboard import make_app
from tests.support.models import Job


def _job(engine, kind, status, *, due_ago, priority=0, finished_ago=None):
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, priority, run_at, updated_at, attempts,"
                " finished_at) VALUES (:kind, :status, :priority,"
                " now() - make_interval(secs => :due_ago), now() - make_interval(secs => :due_ago),"
                " :attempts, now() - make_interval(secs => :finished_ago))"
            ),
            {
                "kind": kind,
                "status": status,
                "priority": priority,
                "due_ago": due_ago,
                "attempts": 0 if status == "pending" else 1,
                "finished_ago": finished_ago,
            },
        )


def _passed_over(engine, jobs):
    with Session(engine) as s:
        return [(k.queue, k.kind, k.due) for k in jobs.stats(s).passed_over]


def test_kind_overtaken_by_jobs_behind_it_is_passed_over_in_stats_and_dashboard(committed):
    jobs = JobQueue(Job)
    _job(committed, "new_kind", "pending", due_ago=60)
    _job(committed, "new_kind", "pending", due_ago=50)
    _job(committed, "old_kind", "done", due_ago=30, finished_ago=29)  # behind, yet it ran
    assert _passed_over(committed, jobs) == [("default", "new_kind", 2)]
    page = TestClient(make_app(jobs, committed)).get("/")
    assert page.status_code == 200
    assert 'id="passed-over"' in page.text
    assert 'data-kind="new_kind"' in page.text


def test_a_backlog_waiting_its_turn_is_not_passed_over(committed):
    jobs = JobQueue(Job)
    _job(committed, "slow", "pending", due_ago=60, priority=5)
    _job(committed, "urgent", "done", due_ago=30, priority=0, finished_ago=29)  # ahead of it
    _job(committed, "queued", "pending", due_ago=60)
    _job(committed, "queued", "running", due_ago=70)  # one of its own runs
    _job(committed, "early", "done", due_ago=90, finished_ago=10)  # due before it
    assert _passed_over(committed, jobs) == []
    assert 'id="passed-over"' not in TestClient(make_app(jobs, committed)).get("/").text


def _register(engine, worker_id, *, kinds, queues=("default",)):
    from sa_jobqueue.worker.registration import Registration

    Registration(
        Job, worker_id, queues=list(queues), kinds=list(kinds), concurrency=1, gone_after=60.0
    ).register(engine)


def _reasons(engine, jobs):
    with Session(engine) as s:
        return [(k.queue, k.kind, k.due, k.reason) for k in jobs.stats(s).passed_over]


def test_a_due_kind_no_live_worker_handles_is_named_at_once_from_the_registry(committed):
    jobs = JobQueue(Job)
    _job(committed, "new_kind", "pending", due_ago=5)
    _job(committed, "old_kind", "pending", due_ago=5)
    _job(committed, "mail_kind", "pending", due_ago=5)
    # No worker is live: the registry names nothing (and no claim has run either).
    assert _reasons(committed, jobs) == []
    _register(committed, "w-old", kinds=["old_kind", "mail_kind"])
    _register(committed, "w-mail", kinds=["new_kind"], queues=["mail"])  # another queue
    assert _reasons(committed, jobs) == [("default", "new_kind", 1, "no live worker")]
    page = TestClient(make_app(jobs, committed)).get("/").text
    assert 'data-kind="new_kind"' in page
    assert '<td class="why">no live worker</td>' in page
    # A live worker of the queue with the handler: it is handled.
    _register(committed, "w-new", kinds=["new_kind"])
    assert _reasons(committed, jobs) == []


def test_the_claims_evidence_still_names_a_kind_its_live_workers_leave(committed):
    jobs = JobQueue(Job)
    _register(committed, "w-busy", kinds=["new_kind", "old_kind"])
    _job(committed, "new_kind", "pending", due_ago=60)
    _job(committed, "old_kind", "done", due_ago=30, finished_ago=29)  # behind, yet it ran
    assert _reasons(committed, jobs) == [("default", "new_kind", 1, "passed over")]
