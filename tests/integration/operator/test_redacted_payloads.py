"""Secrets in payloads are masked where people see them; the row keeps them."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import JobQueue
from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from tests.support.models import Job

PAYLOAD = {"email": "new@example.com", "password": "hunter2", "auth": {"api_key": "k-123"}}


def _job(engine) -> int:
    with Session(engine) as s, s.begin():
        job = JobQueue(Job).enqueue(s, "send_new_account", PAYLOAD)
        return job.id


def _cli(database_url, *args):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return CliRunner().invoke(main, list(args), env=env | {"DATABASE_URL": database_url})


def test_jobs_show_and_list_mask_secret_keys_and_the_row_keeps_them(committed, database_url):
    job_id = _job(committed)
    shown = _cli(database_url, "jobs", "show", str(job_id))
    assert shown.exit_code == 0, shown.stderr
    assert "hunter2" not in shown.stdout
    assert "k-123" not in shown.stdout
    assert '"password": "[redacted]"' in shown.stdout
    assert "new@example.com" in shown.stdout
    as_json = json.loads(_cli(database_url, "jobs", "show", str(job_id), "--json").stdout)
    assert as_json["payload"] == {
        "email": "new@example.com",
        "password": "[redacted]",
        "auth": {"api_key": "[redacted]"},
    }
    listed = json.loads(_cli(database_url, "jobs", "list", "--json").stdout)
    assert listed[0]["payload"]["password"] == "[redacted]"  # noqa: S105
    with Session(committed) as s:
        assert s.scalar(select(Job.payload).where(Job.id == job_id)) == PAYLOAD


def test_the_dashboards_job_page_masks_the_queues_keys(committed):
    job_id = _job(committed)
    jobs = JobQueue(Job, redact_keys=["email"])  # the app's own list replaces the default
    page = TestClient(make_app(jobs, committed), base_url="http://127.0.0.1").get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert "new@example.com" not in page.text
    assert "hunter2" in page.text  # not in this queue's list
    default = TestClient(make_app(Job, committed), base_url="http://127.0.0.1").get(
        f"/jobs/{job_id}"
    )
    assert "hunter2" not in default.text
    assert "[redacted]" in default.text


PROGRESS = {"done": 3, "total": 10, "api_token": "tok-s3cret"}


def _running_with_progress(engine) -> int:
    job_id = _job(engine)
    with engine.begin() as conn:
        conn.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status="running", attempts=1, locked_by="w", progress=PROGRESS)
        )
    return job_id


def test_progress_objects_are_redacted_like_payloads_everywhere_they_are_shown(
    committed, database_url
):
    job_id = _running_with_progress(committed)
    shown = _cli(database_url, "jobs", "show", str(job_id))
    assert shown.exit_code == 0, shown.stderr
    assert "tok-s3cret" not in shown.stdout
    assert '"api_token": "[redacted]"' in shown.stdout
    as_json = json.loads(_cli(database_url, "jobs", "show", str(job_id), "--json").stdout)
    assert as_json["progress"] == {"done": 3, "total": 10, "api_token": "[redacted]"}
    listed = json.loads(_cli(database_url, "jobs", "list", "--json").stdout)
    assert listed[0]["progress"]["api_token"] == "[redacted]"  # noqa: S105
    client = TestClient(make_app(Job, committed), base_url="http://127.0.0.1")
    for page in (f"/jobs/{job_id}", "/jobs?status=running", "/jobs"):
        answer = client.get(page)
        assert answer.status_code == 200
        assert "tok-s3cret" not in answer.text, page
    assert "[redacted]" in client.get(f"/jobs/{job_id}").text
    with Session(committed) as s:
        assert s.scalar(select(Job.progress).where(Job.id == job_id)) == PROGRESS
