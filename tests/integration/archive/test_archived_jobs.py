"""Every operator path finds an archived job: wait, jobs show, the job page, retry, keys."""

from __future__ import annotations

import json
from datetime import timedelta

from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from sa_jobqueue.ops.archive import archive_now
from tests.support.archive import clock, counts
from tests.support.models import Job, new_queue
from tests.support.processes import on_databases

HOUR = timedelta(hours=1)
#: Every operator path finds archived jobs on each database with partitions.
with_partitions = on_databases("postgresql", "mariadb")


def _archived_job(engine, status: str = "done", key: str | None = None) -> int:
    jobs = new_queue()
    with Session(engine) as session, session.begin():
        job_id = jobs.enqueue(session, "report", {"n": 1}, idempotency_key=key).id
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE jobs SET status = :status, attempts = 1, max_attempts = 1,"
                " finished_at = :at, result = '{\"rows\": 3}',"
                " last_error = CASE WHEN :status = 'failed' THEN 'boom' END WHERE id = :id"
            ),
            {"status": status, "id": job_id, "at": _naive(clock(connection) - 2 * HOUR)},
        )
        if status == "failed":
            connection.execute(
                text(
                    "INSERT INTO sa_jobqueue_errors_jobs (job_id, id, attempt, worker, error)"
                    " VALUES (:id, 1, 1, 'w1', 'boom')"
                ),
                {"id": job_id},
            )
    with engine.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 1
        assert counts(connection)[0] == 0
    return job_id


def _naive(instant):
    from datetime import UTC

    return instant.astimezone(UTC).replace(tzinfo=None)


@with_partitions
def test_jobs_wait_returns_an_archived_job_at_once(archived):
    job_id = _archived_job(archived)
    job = new_queue().wait(archived, job_id, timeout=5)
    assert (job.id, job.status, job.result) == (job_id, "done", {"rows": 3})


@with_partitions
def test_jobs_show_and_the_job_page_show_an_archived_job(archived, test_database_url):
    job_id = _archived_job(archived)
    shown = CliRunner().invoke(
        main, ["jobs", "show", str(job_id), "--json"], env={"DATABASE_URL": test_database_url}
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["status"] == "done"
    page = TestClient(make_app(new_queue(), archived), base_url="http://127.0.0.1")
    body = page.get(f"/jobs/{job_id}").text
    assert "report" in body
    assert "archived_at" in body


def _failures_counted(engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(
                text(
                    "SELECT coalesce(sum(jobs), 0) FROM (SELECT jobs FROM sa_jobqueue_counts_jobs"
                    " WHERE status = 'failed' UNION ALL SELECT jobs FROM sa_jobqueue_ended_jobs"
                    " WHERE status = 'failed') AS c"
                )
            ).scalar_one()
        )


@with_partitions
def test_retry_of_an_archived_failed_job_moves_it_back_with_its_history(archived):
    job_id = _archived_job(archived, status="failed")
    failures = _failures_counted(archived)
    assert failures == 1  # its ending, counted once
    jobs = new_queue()
    with Session(archived) as session, session.begin():
        changed = jobs.retry(session, [job_id])
    assert changed.ids == [job_id]
    assert _failures_counted(archived) == failures  # coming back is not an ending
    with archived.connect() as connection:
        assert counts(connection) == (1, 0)
        row = connection.execute(
            text("SELECT status, last_error, payload FROM jobs WHERE id = :id"), {"id": job_id}
        ).one()
        history = connection.execute(
            text("SELECT error FROM sa_jobqueue_errors_jobs WHERE job_id = :id"), {"id": job_id}
        ).scalars()
        payload = json.loads(row.payload) if isinstance(row.payload, str) else row.payload
        assert (row.status, row.last_error, payload) == ("pending", "boom", {"n": 1})
        assert list(history) == ["boom"]
    jobs.task("report")(lambda ctx: {"again": True})
    assert jobs.worker(archived).drain() == 1
    assert jobs.wait(archived, job_id, timeout=5).status == "done"


@with_partitions
def test_an_archived_jobs_idempotency_key_is_free_again(archived):
    first = _archived_job(archived, key="order:9:report")
    jobs = new_queue()
    with Session(archived) as session, session.begin():
        again = jobs.enqueue(session, "report", {"n": 2}, idempotency_key="order:9:report").id
    assert again != first
    with archived.connect() as connection:
        assert counts(connection) == (1, 1)


@with_partitions
def test_jobs_list_status_done_lists_archived_jobs_with_live_ones(archived, test_database_url):
    old = _archived_job(archived)
    jobs = new_queue()
    with Session(archived) as session, session.begin():
        live = jobs.enqueue(session, "report", {"n": 5}).id
    with archived.begin() as connection:
        connection.execute(
            text("UPDATE jobs SET status = 'done', finished_at = :at WHERE id = :id"),
            {"id": live, "at": _naive(clock(connection))},
        )
    listed = CliRunner().invoke(
        main,
        ["jobs", "list", "--status", "done", "--json"],
        env={"DATABASE_URL": test_database_url},
    )
    assert listed.exit_code == 0, listed.output
    assert [job["id"] for job in json.loads(listed.stdout)] == [live, old]
    pending = CliRunner().invoke(
        main,
        ["jobs", "list", "--status", "pending", "--json"],
        env={"DATABASE_URL": test_database_url},
    )
    assert json.loads(pending.stdout) == []


@with_partitions
def test_a_new_job_after_an_archived_one_is_refused_as_after_a_pruned_one(archived):
    import pytest

    from sa_jobqueue import ValidationError

    old = _archived_job(archived)
    jobs = new_queue()
    with (
        Session(archived) as session,
        session.begin(),
        pytest.raises(ValidationError, match=f"no job with id {old}"),
    ):
        jobs.enqueue(session, "report", {}, after=[old])


@with_partitions
def test_the_dashboard_lists_archived_jobs_newest_first_page_by_page(archived):
    ids = [_archived_job(archived) for _ in range(3)]
    page = TestClient(make_app(new_queue(), archived, page_size=2), base_url="http://127.0.0.1")
    listing = page.get("/jobs?status=done").text
    assert 'id="archived-link"' in listing
    first = page.get("/archive?status=done")
    assert first.status_code == 200
    shown = [i for i in ids if f'data-id="{i}"' in first.text]
    assert shown == ids[1:]
    second = page.get(f"/archive?status=done&before={ids[1]}").text
    assert f'data-id="{ids[0]}"' in second
    assert 'id="next-page"' not in second
    assert "No archived job matches" in page.get("/archive?status=pending").text
    assert page.get("/archive?before=x").status_code == 400
