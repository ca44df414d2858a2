"""The dashboard's bulk actions, totals per status, chart ranges and job lookup, over HTTP."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import text
from starlette.testclient import TestClient

from sa_jobqueue.dashboard import make_app
from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD
from tests.support.models import new_queue

FILL = """
INSERT INTO jobs (queue, kind, status, attempts, max_attempts, last_error, finished_at,
                  locked_by, locked_until)
SELECT :queue, :kind, :status, 1, 1, 'boom',
       CASE WHEN :status IN ('done', 'failed', 'cancelled') THEN now() - interval '1 minute' END,
       CASE WHEN :status = 'running' THEN 'w1' END,
       CASE WHEN :status = 'running' THEN now() + interval '5 minutes' END
FROM generate_series(1, :n)
"""


def fill(engine, n: int, status: str, *, queue: str = "q", kind: str = "k") -> None:
    with engine.begin() as conn:
        conn.execute(text(FILL), {"n": n, "status": status, "queue": queue, "kind": kind})


def statuses(engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT status, count(*) FROM jobs GROUP BY status"))
        return {status: n for status, n in rows}


def ids(engine, status: str) -> list[int]:
    with engine.connect() as conn:
        query = text("SELECT id FROM jobs WHERE status = :s ORDER BY id")
        return list(conn.execute(query, {"s": status}).scalars())


def client(engine, **options: Any) -> TestClient:
    return TestClient(make_app(new_queue(), engine, **options), base_url="http://127.0.0.1")


def token_of(c: TestClient) -> str:
    assert c.get("/").status_code == 200
    token = c.cookies.get(CSRF_COOKIE)
    assert token
    return token


def test_overview_and_jobs_page_show_totals_per_status(committed):
    fill(committed, 3, "failed")
    fill(committed, 2, "pending", queue="mail")
    fill(committed, 1, "running")
    overview = client(committed).get("/").text
    totals = dict(re.findall(r'data-status="(\w+)">.*?class="n">([^<]*)<', overview, re.S))
    assert totals == {
        "pending": "2",
        "running": "1",
        "done": "0",
        "failed": "3",
        "cancelled": "0",
        "waiting": "0",
    }
    page = client(committed).get("/jobs?queue=mail").text
    assert 'href="http://127.0.0.1/jobs?status=failed&amp;queue=mail"' in page


def test_the_charts_cover_the_range_chosen_on_the_page(committed):
    fill(committed, 4, "done")
    c = client(committed)
    hour = c.get("/").text
    assert 'aria-label="jobs finished, last hour, per minute"' in hour
    assert 'id="range-hour" class="current"' in hour
    week = c.get("/?range=week&queue=q").text
    assert 'aria-label="jobs finished, last week, per 3 hours"' in week
    assert 'id="range-week" class="current"' in week
    assert "/live?range=week&amp;queue=q" in week  # the refresh keeps the range
    bars = re.findall(r'<rect class="done"[^>]*><title>([^<]*)</title>', week)
    assert len(bars) == 1
    assert bars[0].endswith(": 4 done")
    assert "last day, per 30 minutes" in c.get("/live?range=day").text
    bad = c.get("/?range=year")
    assert bad.status_code == 400
    assert "range must be one of hour, day, week, not &#39;year&#39;" in bad.text


def test_job_lookup_goes_to_the_job_or_says_there_is_none(committed):
    fill(committed, 1, "failed")
    (job_id,) = ids(committed, "failed")
    c = client(committed)
    found = c.get(f"/lookup?id={job_id}", follow_redirects=False)
    assert (found.status_code, found.headers["location"]) == (
        303,
        f"http://127.0.0.1/jobs/{job_id}",
    )
    assert c.get(f"/lookup?id=%23{job_id}", follow_redirects=False).status_code == 303
    missing = c.get("/lookup?id=999999")
    assert missing.status_code == 404
    assert "There is no job 999999." in missing.text
    assert c.get(f"/lookup?id={2**63}").status_code == 404
    word = c.get("/lookup?id=abc")
    assert word.status_code == 400
    assert "is not a job id: ids are whole numbers" in word.text
    assert 'id="lookup-id"' in c.get("/jobs").text  # the box is on every page


def test_bulk_retry_of_ticked_jobs_asks_first_then_retries(committed):
    fill(committed, 3, "failed")
    fill(committed, 1, "running")
    failed, running = ids(committed, "failed"), ids(committed, "running")
    c = client(committed, allow_actions=True)
    token = token_of(c)
    page = c.get("/jobs?status=failed").text
    assert page.count('class="pick"') == 3
    form = {CSRF_FIELD: token, "action": "retry", "scope": "selected"}
    picked = {**form, "id": [str(i) for i in [*failed[:2], *running]]}
    ask = c.post("/bulk", data=picked)
    assert ask.status_code == 200
    assert "Retry 2 jobs?" in ask.text
    assert "left alone: 1 running" in ask.text
    assert statuses(committed) == {"failed": 3, "running": 1}  # asking changes nothing
    done = c.post("/bulk", data={**picked, "confirm": "yes"}, follow_redirects=False)
    assert done.status_code == 303
    assert done.headers["location"].endswith("/jobs?notice=bulk_retry&n=2")
    assert statuses(committed) == {"failed": 1, "pending": 2, "running": 1}
    shown = c.get(done.headers["location"]).text
    assert "Jobs retried (pending, due now): 2" in shown


def test_bulk_delete_of_all_matching_the_filter(committed):
    fill(committed, 12, "done", kind="a")
    fill(committed, 5, "done", kind="b")
    c = client(committed, allow_actions=True)
    token = token_of(c)
    page = c.get("/jobs?kind=a").text
    assert re.search(r'<span id="matching">12</span>', page)
    form = {CSRF_FIELD: token, "action": "delete", "scope": "all", "kind": "a"}
    ask = c.post("/bulk", data=form)
    assert "Delete 12 jobs?" in ask.text
    assert "kind=a" in ask.text
    done = c.post("/bulk", data={**form, "confirm": "yes"}, follow_redirects=False)
    assert done.headers["location"].endswith("/jobs?kind=a&notice=bulk_delete&n=12")
    assert statuses(committed) == {"done": 5}


def test_bulk_requests_that_make_no_sense_get_a_clear_refusal(committed):
    fill(committed, 2, "running")
    c = client(committed, allow_actions=True)
    token = token_of(c)
    base = {CSRF_FIELD: token}
    cases = [
        ({"action": "retry", "scope": "selected"}, 400, "Select at least one job"),
        ({"action": "requeue", "scope": "all"}, 400, "There is no bulk action"),
        (
            {"action": "retry", "scope": "all", "status": "running"},
            400,
            "cannot retry running jobs",
        ),
        ({"action": "retry", "scope": "all", "status": "lost"}, 400, "status must be one of"),
        ({"action": "cancel", "scope": "selected", "id": "x1"}, 400, "not a job id"),
    ]
    for fields, code, message in cases:
        answer = c.post("/bulk", data={**base, **fields})
        assert answer.status_code == code, fields
        assert message in answer.text, fields
    nothing = c.post("/bulk", data={**base, "action": "delete", "scope": "all"})
    assert "Nothing to delete" in nothing.text
    assert 'id="confirm"' not in nothing.text
    forged = c.post("/bulk", data={CSRF_FIELD: "guess", "action": "cancel", "scope": "all"})
    assert forged.status_code == 403
    read_only = client(committed)
    assert read_only.post("/bulk", data={"action": "cancel", "scope": "all"}).status_code == 403
    assert 'class="pick"' not in read_only.get("/jobs").text
    assert statuses(committed) == {"running": 2}


def test_charts_that_run_past_the_statement_timeout_leave_the_rest_of_the_overview(
    committed, monkeypatch
):
    from sqlalchemy import func, select

    from sa_jobqueue import statements

    fill(committed, 2, "failed")
    # A range whose rows take longer than the page's budget.
    slow = select(func.pg_sleep(30).label("bucket"))
    monkeypatch.setattr(statements, "counted_per_bucket", lambda model, by_queue: slow)
    page = client(committed, statement_timeout=1.0).get("/?range=week")
    assert page.status_code == 200
    assert 'id="charts-timed-out"' in page.text
    assert 'data-status="failed"' in page.text  # the totals and the queues still show
    assert 'id="throughput"' not in page.text
