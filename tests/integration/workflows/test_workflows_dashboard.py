"""The dashboard draws a job's workflow (server-side SVG) and retries with dependents."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import Discard
from sa_jobqueue.dashboard import make_app
from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD
from tests.support.models import Job, new_queue


def test_a_job_page_draws_its_graph_and_counts_a_batch(committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "fetch")
        batch = jobs.batch(session, callback=("publish", {}))
        members = batch.enqueue_many([{"kind": "resize", "after": [a]} for _ in range(15)])
        ids = a.id, batch.id, members[0].id
    c = TestClient(make_app(jobs, committed), base_url="http://127.0.0.1")
    fetch = c.get(f"/jobs/{ids[0]}").text
    assert '<svg class="graph" id="graph"' in fetch
    assert f'href="http://127.0.0.1/jobs/{ids[2]}"' in fetch  # a dependent, linked
    assert "and 3 more" in fetch  # 15 dependents: 12 drawn, the rest counted
    callback = c.get(f"/jobs/{ids[1]}").text
    assert 'id="upstream-counts"' in callback
    assert '<span class="status waiting">waiting</span> 15' in callback
    plain = c.get(f"/jobs/{jobs_enqueue_plain(jobs, committed)}").text
    assert 'id="graph"' not in plain


def jobs_enqueue_plain(jobs, engine) -> int:
    with Session(engine) as session, session.begin():
        return int(jobs.enqueue(session, "plain").id)


def test_retry_with_dependents_from_the_dashboard(committed):
    jobs = new_queue()
    jobs.task("bad")(lambda ctx: (_ for _ in ()).throw(Discard("once")))
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "bad")
        b = jobs.enqueue(session, "next", after=[a])
        a_id, b_id = a.id, b.id
    jobs.worker(committed, listen=False).drain()
    c = TestClient(make_app(jobs, committed, allow_actions=True), base_url="http://127.0.0.1")
    page = c.get(f"/jobs/{a_id}")
    assert "Retry with dependents" in page.text
    token = c.cookies.get(CSRF_COOKIE)
    done = c.post(f"/jobs/{a_id}/retry-with-dependents", data={CSRF_FIELD: token})
    assert done.status_code == 200
    assert "wait for it again" in done.text
    with Session(committed) as session:
        statuses = dict(session.execute(select(Job.id, Job.status)).all())
    assert statuses == {a_id: "pending", b_id: "waiting"}
