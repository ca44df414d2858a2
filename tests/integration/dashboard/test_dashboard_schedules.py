"""The dashboard's schedule actions over HTTP: pause, resume and run now, with --allow-actions."""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import JobQueue
from sa_jobqueue.dashboard import make_app
from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD
from tests.support.models import Job

jobs = JobQueue(Job)
jobs.task("report", queue="reports")(lambda ctx: None)


def _client(engine, **options):
    return TestClient(make_app(jobs, engine, **options), base_url="http://127.0.0.1")


def _token(c):
    assert c.get("/workers").status_code == 200
    token = c.cookies.get(CSRF_COOKIE)
    assert token
    return token


def _row(page, name):
    found = re.search(rf"<tr><th>{name}</th>(.*?)</tr>", page, re.S)
    assert found is not None, page
    return found.group(1)


def test_pause_resume_and_run_now_a_schedule_from_the_workers_page(committed):
    with Session(committed) as session, session.begin():
        jobs.schedule(session, "hourly", "report", every=3600, payload={"n": 1})
    c = _client(committed, allow_actions=True)
    token = _token(c)
    row = _row(c.get("/workers").text, "hourly")
    assert "runtime" in row
    assert "Pause" in row
    assert "Run now" in row

    paused = c.post("/schedules/pause", data={CSRF_FIELD: token, "schedule": "hourly"})
    assert "Schedule paused" in paused.text
    row = _row(paused.text, "hourly")
    assert "paused" in row
    assert "Resume" in row
    again = c.post("/schedules/pause", data={CSRF_FIELD: token, "schedule": "hourly"})
    assert "already paused" in again.text

    ran = c.post("/schedules/run", data={CSRF_FIELD: token, "schedule": "hourly"})
    assert "one job enqueued" in ran.text
    with Session(committed) as session:
        (job,) = session.scalars(select(Job)).all()
        assert (job.kind, job.queue, job.payload) == ("report", "reports", {"n": 1})
    assert f'href="http://127.0.0.1/jobs/{job.id}"' in _row(ran.text, "hourly")

    resumed = c.post("/schedules/resume", data={CSRF_FIELD: token, "schedule": "hourly"})
    assert "Schedule resumed" in resumed.text
    assert "Pause" in _row(resumed.text, "hourly")

    missing = c.post("/schedules/pause", data={CSRF_FIELD: token, "schedule": "nosuch"})
    assert missing.status_code == 400
    assert "no schedule of that name" in missing.text
    assert c.post("/schedules/explode", data={CSRF_FIELD: token}).status_code == 404


def test_schedule_actions_are_refused_read_only_and_without_csrf(committed):
    with Session(committed) as session, session.begin():
        jobs.schedule(session, "hourly", "report", every=3600)
    read_only = _client(committed)
    token = _token(read_only)
    assert "Pause" not in read_only.get("/workers").text
    refused = read_only.post("/schedules/pause", data={CSRF_FIELD: token, "schedule": "hourly"})
    assert refused.status_code == 403
    writable = _client(committed, allow_actions=True)
    assert writable.post("/schedules/run", data={"schedule": "hourly"}).status_code == 403
    with Session(committed) as session:
        (stored,) = jobs.stored_schedules(session)
        assert stored.paused_at is None
        assert session.scalars(select(Job)).all() == []
