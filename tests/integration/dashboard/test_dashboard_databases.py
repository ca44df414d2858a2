"""The dashboard's read-only pages on every database: PostgreSQL, SQLite and MariaDB.

Each page renders (status 200) with jobs in every status, and shows the jobs it should:
the overview, the job lists by status and by filter, a job's page, the workers page and
the charts over each range.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue.dashboard import make_app, queries
from sa_jobqueue.dashboard import workers as dashboard_workers
from sa_jobqueue.dashboard.filters import JobFilter
from sa_jobqueue.dashboard.history import RANGES
from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD
from tests.support.helpers import held_running
from tests.support.models import Job, new_queue
from tests.support.processes import every_database


def _add(engine: Any, **columns: Any) -> int:
    columns.setdefault("kind", "k")
    with Session(engine) as session, session.begin():
        job = Job(**columns)
        session.add(job)
        session.flush()
        return int(job.id)


def _status(engine: Any, job_id: int) -> str | None:
    with Session(engine) as session:
        job = session.get(Job, job_id)
        return None if job is None else job.status


def _ids_on(page: str, ids: dict[str, int]) -> set[str]:
    """The names of `ids` whose job page the page links to."""
    return {name for name, job_id in ids.items() if f'/jobs/{job_id}"' in page}


@every_database
def test_every_read_page_renders_and_lists_the_expected_jobs(committed):
    now = datetime.now(timezone.utc)
    ago = now - timedelta(seconds=90)
    ids = {
        "pending": _add(committed, queue="mail", kind="send", payload={"order_id": 4}),
        "other": _add(committed, queue="mail", kind="send", payload={"order_id": 5}),
        "running": _add(
            committed,
            queue="pdf",
            kind="render",
            status="running",
            locked_by="worker-1",
            locked_until=now + timedelta(minutes=5),
            attempts=1,
        ),
        "done": _add(
            committed,
            queue="pdf",
            kind="render",
            status="done",
            finished_at=ago,
            locked_by="worker-1",
            attempts=1,
        ),
        "failed": _add(
            committed,
            queue="mail",
            kind="send",
            status="failed",
            finished_at=ago,
            last_error="SMTP Boom",
            locked_by="worker-2",
            attempts=3,
        ),
        "cancelled": _add(
            committed, queue="mail", kind="send", status="cancelled", finished_at=ago
        ),
    }
    c = TestClient(make_app(new_queue(), committed), base_url="http://127.0.0.1")

    def page(url: str) -> str:
        response = c.get(url)
        assert response.status_code == 200, (url, response.text[:2000])
        return response.text

    overview = page("/")
    assert "mail" in overview
    assert "pdf" in overview
    for chart_range in ("hour", "day", "week"):
        page(f"/?range={chart_range}")
    page("/?queue=mail")
    assert _ids_on(page("/jobs"), ids) == set(ids)
    for status in ("pending", "running", "done", "failed", "cancelled"):
        expected = {"pending", "other"} if status == "pending" else {status}
        assert _ids_on(page(f"/jobs?status={status}"), ids) == expected, status
    assert _ids_on(page("/jobs?queue=pdf"), ids) == {"running", "done"}
    assert _ids_on(page("/jobs?kind=render&status=done"), ids) == {"done"}
    assert _ids_on(page("/jobs?error=boom"), ids) == {"failed"}  # case-insensitive
    assert _ids_on(page("/jobs?payload=order_id%3D4"), ids) == {"pending"}
    assert _ids_on(page("/jobs?payload=order_id"), ids) == {"pending", "other"}
    assert _ids_on(page('/jobs?payload={"order_id":5}'), ids) == {"other"}
    for name, job_id in ids.items():
        job_page = page(f"/jobs/{job_id}")
        status = "pending" if name == "other" else name
        assert f"<h1>Job {job_id} " in job_page, name
        assert f'id="job-status">{status}<' in job_page, name
    assert _ids_on(page("/workers"), ids) == {"running"}
    # The numbers behind the overview and its charts, in each range.
    for shown in RANGES.values():
        with Session(committed) as session:
            board = queries.overview(session, Job, chart_range=shown)
        bars = [
            (m.done, m.failed, m.cancelled)
            for m in board.minutes
            if m.done + m.failed + m.cancelled
        ]
        assert bars == [(1, 1, 1)], shown  # finished 90 s ago: one bar, in any range
        assert all(m.start.tzinfo is not None for m in board.minutes)
    mail = {q.queue: q for q in board.queues}["mail"]
    assert (mail.pending, mail.due) == (2, 2)
    assert mail.lag_seconds is not None
    assert mail.lag_seconds >= 0
    assert board.totals is not None
    assert board.totals.counts["pending"] == 2
    # The workers' activity the page reads beside its registry: per locked_by.
    with Session(committed) as session:
        _, activity = dashboard_workers.workers(session, Job)
    by_name = {worker.worker: worker for worker in activity}
    assert set(by_name) == {"worker-1", "worker-2"}
    assert (by_name["worker-1"].running, by_name["worker-1"].finished) == (1, 1)
    assert by_name["worker-1"].kinds == ["render"]
    assert by_name["worker-1"].queues == ["pdf"]
    assert (by_name["worker-2"].kinds, by_name["worker-2"].queues) == ([], ["mail"])


@every_database
def test_job_actions_act_on_every_database(committed):
    """Retry, cancel and delete from the job page: done on every database, never a 500."""
    failed = _add(committed, status="failed", last_error="boom", attempts=1)
    pending = _add(committed)
    cancelled = _add(committed, status="cancelled", finished_at=datetime.now(timezone.utc))
    app = make_app(new_queue(), committed, allow_actions=True)
    c = TestClient(app, base_url="http://127.0.0.1")  # raises on a 500
    assert c.get("/").status_code == 200
    token = c.cookies.get(CSRF_COOKIE)
    for action, job_id in (("retry", failed), ("cancel", pending), ("delete", cancelled)):
        response = c.post(f"/jobs/{job_id}/{action}", data={CSRF_FIELD: token})
        assert response.status_code == 200, (action, response.status_code)
    statuses = [_status(committed, job_id) for job_id in (failed, pending, cancelled)]
    assert statuses == ["pending", "cancelled", None]  # retried, cancelled, deleted


@every_database
def test_keyset_paging_walks_each_status_list_once_in_its_order(committed):
    ago = datetime.now(timezone.utc) - timedelta(seconds=30)
    later = datetime.now(timezone.utc) + timedelta(minutes=5)
    made: dict[str | None, list[int]] = {
        "pending": [_add(committed, priority=p) for p in (2, 1, 1)],
        "running": [
            _add(
                committed,
                status="running",
                locked_by="w",
                locked_until=later + timedelta(seconds=s),
            )
            for s in (3, 1, 2)
        ],
        "done": [
            _add(committed, status="done", finished_at=ago - timedelta(seconds=s)) for s in (1, 3)
        ],
    }
    made[None] = [job_id for ids in made.values() for job_id in ids]
    for status, ids in made.items():
        seen: list[int] = []
        job_filter = JobFilter(status=status)
        with Session(committed) as session:
            while True:
                found = queries.jobs_page(session, Job, job_filter, limit=1)
                seen += [job.id for job in found.jobs]
                if found.next_cursor is None:
                    break
                job_filter = replace(job_filter, after=found.next_cursor)
        assert sorted(seen) == sorted(ids), status
        assert len(seen) == len(ids), status
    pending, running, done = made["pending"], made["running"], made["done"]
    assert seen == sorted(made[None], reverse=True)  # the whole list: newest first
    with Session(committed) as session:
        first = queries.jobs_page(session, Job, JobFilter(status="pending"), limit=3)
        assert [job.id for job in first.jobs] == [pending[1], pending[2], pending[0]]
        first = queries.jobs_page(session, Job, JobFilter(status="running"), limit=3)
        assert [job.id for job in first.jobs] == [running[1], running[2], running[0]]
        first = queries.jobs_page(session, Job, JobFilter(status="done"), limit=3)
        assert [job.id for job in first.jobs] == [done[0], done[1]]


@every_database
def test_a_job_ending_while_the_overview_reads_counts_once_running_or_done(committed):
    # The overview reads the live rows (pending, then running) and the counters of ended
    # jobs in several statements. Read in one snapshot, a job that ends after the
    # running jobs were read shows running, not running and done both.
    with held_running(committed, queue="held") as held:
        board = make_app(Job, committed).state.dashboard

        def end_the_job(conn, cursor, statement, *args) -> None:
            if "'running'" in statement and not held.ended:  # the running jobs
                held.end()

        event.listen(board.reader, "after_cursor_execute", end_the_job)
        overview = board.read(queries.overview)
    assert held.ended  # ended midway through the read, not at the block's exit
    assert _status(committed, held.id) == "done"
    held_queue = {q.queue: q for q in overview.queues}["held"]
    assert (held_queue.running, held_queue.finished["done"]) == (1, 0)
    assert overview.totals is not None
    assert (overview.totals.counts["running"], overview.totals.counts["done"]) == (1, 0)
