"""The dashboard over HTTP (Starlette's test client) against a real PostgreSQL.

Pages, filters, keyset paging, escaping, the read-only switch, CSRF, auth, and
that each page's statement has an index path (EXPLAIN with sequential scans off).
"""

from __future__ import annotations

import base64
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Integer, event, exc, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from sa_jobqueue import ConfigurationError, JobMixin, statements
from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from sa_jobqueue.dashboard.filters import JobFilter
from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD
from sa_jobqueue.ops import pausing
from sa_jobqueue.schema.state_tables import schedules_table_for
from sa_jobqueue.statements import steps
from tests.support.models import Job, new_queue

XSS = "<script>document.title='pwned'</script>"


def add(engine, **columns: Any) -> int:
    columns.setdefault("kind", "k")
    age = columns.pop("age", None)
    if age is not None:  # in the insert: the counters take finished_at as the job ends
        columns["finished_at"] = func.now() - timedelta(seconds=age)
    with Session(engine) as session, session.begin():
        job = Job(**columns)
        session.add(job)
        session.flush()
        job_id = job.id
    return job_id


def status_of(engine, job_id: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(text("SELECT status FROM jobs WHERE id = :id"), {"id": job_id}).scalar()


def client(engine, **options: Any) -> TestClient:
    return TestClient(make_app(new_queue(), engine, **options), base_url="http://127.0.0.1")


def csrf(c: TestClient) -> str:
    """Load a page so the cookie is set; return the token its forms carry."""
    page = c.get("/")
    assert page.status_code == 200
    token = c.cookies.get(CSRF_COOKIE)
    assert token
    return token


def test_overview_counts_live_and_recent_work_per_queue(committed):
    for _ in range(3):
        add(committed, queue="mail", kind="send")
    add(committed, queue="mail", kind="send", status="running", locked_by="w1", attempts=1)
    add(committed, queue="pdf", kind="render", status="failed", last_error="boom", age=60)
    add(committed, queue="pdf", kind="render", status="done", age=7200)  # outside the hour
    page = client(committed).get("/")
    assert page.status_code == 200
    rows = dict(re.findall(r'<tr data-queue="([^"]+)">(.*?)</tr>', page.text, re.S))
    cells = {q: re.findall(r"<td[^>]*>(?:<a [^>]*>)?([^<]*)", body) for q, body in rows.items()}
    # pending, due, lag, running, expired, done 1h, failed 1h, cancelled 1h
    assert cells["mail"][0:2] == ["3", "3"]
    assert cells["mail"][3] == "1"
    assert cells["pdf"][5:7] == ["0", "1"]
    assert 'hx-trigger="every 5.0s"' in page.text
    assert client(committed).get("/live").text.lstrip().startswith("{#") is False


def test_each_status_pages_through_every_job_once_in_its_index_order(committed):
    for i in range(23):
        add(committed, queue="q", kind="a" if i % 2 else "b", priority=i % 3)
        add(committed, queue="q", kind="a", status="done", age=i * 10)
        add(committed, queue="q", kind="a", status="running", locked_by="w", attempts=1)
    with committed.begin() as conn:  # ties in the order keys, to check the id tie-break
        conn.execute(text("UPDATE jobs SET run_at = date_trunc('hour', now())"))
        conn.execute(
            text(
                "UPDATE jobs SET locked_until = date_trunc('hour', now()) WHERE status = 'running'"
            )
        )
    expected_order = {
        "pending": "ORDER BY priority, run_at, id",
        "running": "ORDER BY locked_until, id",
        "done": "ORDER BY finished_at DESC, id DESC",
        "": "ORDER BY id DESC",
    }
    c = client(committed, page_size=5)
    for status, order in expected_order.items():
        where = f"WHERE status = '{status}'" if status else ""
        with committed.connect() as conn:
            want = [r[0] for r in conn.execute(text(f"SELECT id FROM jobs {where} {order}"))]
        seen: list[int] = []
        url = f"/jobs?status={status}"
        while url:
            page = c.get(url)
            assert page.status_code == 200, page.text
            seen += [int(i) for i in re.findall(r'<tr data-id="(\d+)">', page.text)]
            found = re.search(r'id="next-page" href="http://127.0.0.1([^"]+)"', page.text)
            url = found.group(1).replace("&amp;", "&") if found else ""
        assert seen == want, status


def test_filters_by_queue_kind_error_text_and_payload(committed):
    wanted = add(
        committed,
        queue="mail",
        kind="send",
        payload={"order_id": 4, "to": "dave"},
        status="failed",
        last_error="SMTP said 50%_off is spam",
        age=5,
    )
    add(
        committed,
        queue="mail",
        kind="send",
        payload={"order_id": 5},
        status="failed",
        last_error="SMTP said 50 percent",
        age=5,
    )
    add(
        committed,
        queue="pdf",
        kind="send",
        payload={"order_id": 4},
        status="failed",
        last_error="x",
        age=5,
    )
    c = client(committed)

    def ids(query: str) -> list[int]:
        page = c.get(f"/jobs?{query}")
        assert page.status_code == 200, page.text
        return [int(i) for i in re.findall(r'<tr data-id="(\d+)">', page.text)]

    assert ids("status=failed&queue=mail&error=50%25_off") == [wanted]
    assert ids("kind=send&payload=to") == [wanted]
    assert ids("queue=mail&payload=order_id%3D4") == [wanted]
    assert ids("payload=to%3Ddave") == [wanted]
    assert ids("payload=%7B%22order_id%22%3A4%2C%22to%22%3A%22dave%22%7D") == [wanted]
    assert ids("queue=nope") == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=lost", "status must be one of"),
        ("payload=%7Bnot+json", "payload filter is not valid JSON"),
        ("status=done&after=12", "does not fit a done list"),
        ("status=pending&after=x,y,z", "is malformed"),
        ("kind=" + "k" * 201, "longer than 200"),
    ],
)
def test_a_bad_filter_is_a_400_saying_why(committed, query, message):
    page = client(committed).get(f"/jobs?{query}")
    assert page.status_code == 400
    assert message in page.text.replace("&#39;", "'")


def test_payload_error_and_result_are_escaped_never_rendered(committed):
    job_id = add(
        committed,
        kind="k",
        payload={"html": XSS},
        status="failed",
        last_error=f"Traceback\n  {XSS}\nValueError: <img src=x onerror=alert(1)>",
        age=1,
    )
    c = client(committed)
    for url in (f"/jobs/{job_id}", "/jobs?status=failed", "/jobs"):
        body = c.get(url).text
        assert "<script>document" not in body, url
        assert "<img src=x" not in body, url
    body = c.get(f"/jobs/{job_id}").text
    assert "&lt;script&gt;document.title=" in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    csp = c.get(f"/jobs/{job_id}").headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp


def test_read_only_dashboard_refuses_actions_and_shows_none(committed):
    job_id = add(committed, status="failed", last_error="x", age=1)
    c = client(committed)
    token = csrf(c)
    page = c.get(f"/jobs/{job_id}")
    assert "Retry" not in page.text
    assert "read-only" in page.text
    refused = c.post(f"/jobs/{job_id}/retry", data={CSRF_FIELD: token})
    assert refused.status_code == 403
    assert "read-only" in refused.text
    assert status_of(committed, job_id) == "failed"


def test_actions_need_the_csrf_token_of_the_cookie(committed):
    job_id = add(committed, status="failed", last_error="x", age=1)
    c = client(committed, allow_actions=True)
    token = csrf(c)
    assert c.post(f"/jobs/{job_id}/retry", data={}).status_code == 403
    assert c.post(f"/jobs/{job_id}/retry", data={CSRF_FIELD: "forged"}).status_code == 403
    other_site = c.post(
        f"/jobs/{job_id}/retry", data={CSRF_FIELD: token}, headers={"origin": "http://evil.test"}
    )
    assert other_site.status_code == 403
    no_cookie = client(committed, allow_actions=True)
    assert no_cookie.post(f"/jobs/{job_id}/retry", data={CSRF_FIELD: token}).status_code == 403
    assert status_of(committed, job_id) == "failed"

    done = c.post(f"/jobs/{job_id}/retry", data={CSRF_FIELD: token}, follow_redirects=False)
    assert done.status_code == 303
    assert status_of(committed, job_id) == "pending"
    assert "Job retried" in c.get(done.headers["location"]).text


def test_cancel_delete_and_retry_all_failed_of_a_kind(committed):
    pending = add(committed)
    finished = add(committed, status="done", age=1)
    failed = [
        add(committed, kind="sync", queue="crm", status="failed", last_error="e", age=1)
        for _ in range(3)
    ]
    other = add(committed, kind="other", status="failed", last_error="e", age=1)
    c = client(committed, allow_actions=True)
    token = csrf(c)
    assert c.post(f"/jobs/{pending}/cancel", data={CSRF_FIELD: token}).status_code == 200
    assert status_of(committed, pending) == "cancelled"
    not_deleted = c.post(f"/jobs/{add(committed)}/delete", data={CSRF_FIELD: token})
    assert "Not deleted" in not_deleted.text
    c.post(f"/jobs/{finished}/delete", data={CSRF_FIELD: token})
    assert status_of(committed, finished) is None
    bulk = c.post("/retry-failed", data={CSRF_FIELD: token, "kind": "sync", "queue": ""})
    assert "Failed jobs retried: 3" in bulk.text
    assert [status_of(committed, i) for i in failed] == ["pending"] * 3
    assert status_of(committed, other) == "failed"
    assert c.post(f"/jobs/{other}/explode", data={CSRF_FIELD: token}).status_code == 404
    assert c.post("/retry-failed", data={CSRF_FIELD: token}).status_code == 400


def test_job_page_shows_every_column_and_missing_job_is_404(committed):
    job_id = add(
        committed,
        kind="render",
        payload={"b": 1, "a": [1, 2]},
        status="running",
        locked_by="host:1",
        attempts=2,
        max_attempts=5,
        idempotency_key="order:4",
    )
    c = client(committed)
    body = c.get(f"/jobs/{job_id}").text
    for shown in ("render", "host:1", "2 of 5", "order:4", '"a": [\n    1,'):
        assert shown in body.replace("&#34;", '"'), shown
    assert c.get("/jobs/999999").status_code == 404


def test_workers_page_lists_who_runs_what(committed):
    add(
        committed,
        kind="render",
        status="running",
        locked_by="host-a:1",
        attempts=1,
        locked_until=text("now() + interval '1 minute'"),
    )
    add(committed, kind="send", status="done", locked_by="host-b:2", age=30)
    body = client(committed).get("/workers").text
    # The registry is the list: a running job's owner without a row is gone; a worker
    # that only finished a job (no row, nothing running) is not listed any more.
    assert re.search(r'<tr class="worker-gone">\s*<th>host-a:1</th>', body)
    assert "host-b:2" not in body


def test_credentials_are_required_when_configured(committed):
    c = client(committed, basic_auth="ops:s3cret")
    assert c.get("/").status_code == 401
    assert c.get("/").headers["www-authenticate"].startswith("Basic")
    good = base64.b64encode(b"ops:s3cret").decode()
    bad = base64.b64encode(b"ops:wrong").decode()
    assert c.get("/", headers={"authorization": f"Basic {good}"}).status_code == 200
    assert c.get("/", headers={"authorization": f"Basic {bad}"}).status_code == 401
    t = client(committed, token="t" * 20)
    assert t.get("/", headers={"authorization": "Bearer " + "t" * 20}).status_code == 200
    assert t.get("/", headers={"authorization": "Bearer nope"}).status_code == 401
    assert t.get("/static/htmx.min.js").status_code == 401


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"basic_auth": "nopassword"}, "USER:PASSWORD"),
        ({"token": "short"}, "at least 16"),
        ({"token": "t" * 16, "basic_auth": "a:b"}, "not both"),
        ({"page_size": 0}, "page_size"),
        ({"statement_timeout": -1}, "statement_timeout"),
    ],
)
def test_make_app_rejects_bad_options(committed, options, message):
    with pytest.raises(ConfigurationError, match=message):
        make_app(new_queue(), committed, **options)


def test_make_app_rejects_what_is_not_a_queue_or_engine(committed):
    with pytest.raises(ConfigurationError, match="JobQueue or a mapped JobMixin"):
        make_app("jobs", committed)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="sync sqlalchemy Engine"):
        make_app(Job, "postgresql://")  # type: ignore[arg-type]
    async_engine = create_async_engine(committed.url)
    with pytest.raises(ConfigurationError, match=r"create_engine\(async_engine.url\)"):
        make_app(Job, async_engine)  # type: ignore[arg-type]


def _plan(conn, statement, params: dict[str, Any]) -> str:
    """EXPLAIN of `statement` exactly as SQLAlchemy sends it (same SQL, same parameters)."""
    sent: list[tuple[str, Any]] = []

    def capture(conn, cursor, sql, parameters, context, executemany):
        sent.append((sql, parameters))

    event.listen(conn, "before_cursor_execute", capture)
    try:
        conn.execute(statement, params).all()
    finally:
        event.remove(conn, "before_cursor_execute", capture)
    sql, parameters = sent[-1]
    cursor = conn.connection.driver_connection.cursor()
    cursor.execute("EXPLAIN " + sql, parameters)
    return "\n".join(row[0] for row in cursor.fetchall())


def test_every_page_statement_has_an_index_path(committed):
    params: dict[str, Any] = {"window": 3600.0, "queue_name": "q", "kind_name": "k", "limit": 51}
    cases: list[tuple[Any, dict[str, Any]]] = [
        (statements.pending_summary(Job), {}),
        (statements.running_summary(Job), {}),
        (statements.finished_recently(Job), params),
        (statements.finished_per_minute(Job, by_queue=True), params),
        (statements.workers_summary(Job), params),
        (statements.finished_per_bucket(Job, by_queue=True), {**params, "bucket": 1800.0}),
        (statements.finished_per_bucket(Job), {"window": 7 * 86400.0, "bucket": 10800.0}),
        (statements.last_id(Job), {}),
        # The job page's durable reading (ops.durable_state): its steps, its signals.
        (steps.steps_of(Job), {"job_id": 1}),
        (steps.signals_of(Job), {"job_id": 1}),
    ]
    for live in ("pending", "running", "failed"):
        # The totals' live counts and the "all N matching" count of a status filter.
        conditions = statements.filter_conditions(Job, status=live, by_kind=True)
        cases.append((statements.capped_count(Job, conditions=conditions), {**params, "cap": 9}))
    for statuses in (("failed", "cancelled"), ("pending", "running", "waiting")):
        # A bulk action's batches walk the primary key.
        conditions = statements.filter_conditions(Job, by_queue=True)
        batch = statements.bulk_batch(Job, statuses=statuses, conditions=conditions)
        cases.append((batch, {**params, "after_id": 0, "last_id": 10}))
    moment = "2026-12-01T00:00:00+00:00"
    cursors = {"pending": f"0,{moment},5", "running": f"{moment},5", None: "5"}
    for status in ("pending", "running", "done", "failed", "cancelled", None):
        for after in (None, cursors.get(status, f"{moment},5")):
            f = JobFilter(status=status, kind="k", after=after)
            cases.append((statements.job_page(Job, **f.flags()), {**f.bound(), "limit": 51}))
    with committed.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for statement, values in cases:
            plan = _plan(conn, statement, values)
            assert "Seq Scan" not in plan, plan
            assert "Index" in plan, plan


class ResultBase(DeclarativeBase):
    pass


class JobWithResult(JobMixin, ResultBase):
    """An application's own jobs table: a `result` column and a column of its own."""

    __tablename__ = "dash_result_jobs"
    result: Mapped[Any] = mapped_column(JSONB, nullable=True)
    order_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


def test_job_page_shows_a_result_column_and_the_apps_own_columns(engine):
    ResultBase.metadata.create_all(engine)
    try:
        with Session(engine) as session, session.begin():
            job = JobWithResult(
                kind="render",
                result={"pages": 3, "html": XSS},
                trace_context={"traceparent": "00-4bf92f3577b34da6-00f067aa0ba902b7-01"},
                order_id=42,
            )
            session.add(job)
            session.flush()
            job_id = job.id
        c = TestClient(make_app(JobWithResult, engine), base_url="http://127.0.0.1")
        body = c.get(f"/jobs/{job_id}").text
        result = re.search(r'<pre class="json" id="result">(.*?)</pre>', body, re.S)
        assert result is not None
        assert '"pages": 3' in result.group(1).replace("&#34;", '"')
        assert "&lt;script&gt;" in result.group(1)
        assert "00-4bf92f3577b34da6" in body.split('id="trace-context"')[1]
        extra = re.search(r'<table class="fields" id="extra">(.*?)</table>', body, re.S)
        assert extra is not None
        assert "order_id" in extra.group(1)
        assert "42" in extra.group(1)
        # Only the app's own: not the library's bookkeeping columns (issue 41, item 8).
        listed = re.findall(r"<th>(\w+)</th>", extra.group(1))
        assert listed == ["order_id"]
    finally:
        ResultBase.metadata.drop_all(engine)


def test_a_page_stuck_behind_a_lock_ends_at_the_statement_timeout(committed):
    c = client(committed, statement_timeout=0.3)
    with committed.connect() as blocker:
        blocker.exec_driver_sql("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        page = c.get("/jobs")
        blocker.rollback()
    assert page.status_code == 503
    assert "statement timeout" in page.text


@pytest.fixture
def cli(committed, database_url):
    def invoke(*args: str):
        return CliRunner().invoke(main, ["dashboard", *args], env={"DATABASE_URL": database_url})

    return invoke


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "192.0.2.10"], "--host 192.0.2.10 listens beyond this machine"),
        (["--basic-auth", "nopassword"], "--basic-auth must look like USER:PASSWORD"),
        (["--table", "no_such_table"], "table 'no_such_table' does not exist"),
        (["--app", "nowhere:jobs"], "cannot import 'nowhere'"),
    ],
)
def test_dashboard_command_refuses_bad_setups_in_one_line(cli, args, message):
    result = cli(*args)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]


def test_pages_read_in_transactions_that_cannot_write(committed):
    job_id = add(committed)
    board = make_app(new_queue(), committed).state.dashboard

    def write(session, model):
        session.execute(text("UPDATE jobs SET priority = 5 WHERE id = :id"), {"id": job_id})

    with pytest.raises(exc.InternalError, match="read-only transaction"):
        board.read(write)


def test_mounted_inside_an_app_every_link_and_action_follows_the_mount_path(committed):
    job_id = add(committed, status="failed", last_error="x", age=1)
    outer = Starlette(
        routes=[Mount("/admin/jobs", app=make_app(Job, committed, allow_actions=True))]
    )
    c = TestClient(outer, base_url="http://127.0.0.1")
    overview = c.get("/admin/jobs/")
    assert overview.status_code == 200
    assert 'href="http://127.0.0.1/admin/jobs/static/dashboard.css"' in overview.text
    assert c.get("/admin/jobs/static/htmx.min.js").status_code == 200
    page = c.get(f"/admin/jobs/jobs/{job_id}")
    action = re.search(r'<form method="post" action="([^"]+)"', page.text)
    assert action is not None
    assert action.group(1) == f"http://127.0.0.1/admin/jobs/jobs/{job_id}/retry"
    token = c.cookies.get(CSRF_COOKIE)
    done = c.post(action.group(1), data={CSRF_FIELD: token}, follow_redirects=False)
    assert done.status_code == 303
    assert done.headers["location"].startswith("http://127.0.0.1/admin/jobs/jobs/")
    assert status_of(committed, job_id) == "pending"
    assert c.get("/elsewhere").status_code == 404


def test_pause_and_resume_a_queue_from_the_overview(committed):
    add(committed, queue="mail")
    c = client(committed, allow_actions=True)
    token = csrf(c)
    assert "Pause" in c.get("/").text
    paused = c.post("/queues/pause", data={CSRF_FIELD: token, "queue": "mail"})
    assert "Queue paused" in paused.text
    with Session(committed) as session:
        assert list(pausing.paused_queues(session, Job)) == ["mail"]
    row = re.search(r'<tr data-queue="mail">(.*?)</tr>', c.get("/").text, re.S)
    assert row is not None
    assert ">paused<" in row.group(1)
    assert "Resume" in row.group(1)
    again = c.post("/queues/pause", data={CSRF_FIELD: token, "queue": "mail"})
    assert "already paused" in again.text
    # A paused queue with no job at all still has its row, so it can be resumed.
    c.post("/queues/pause", data={CSRF_FIELD: token, "queue": "empty"})
    assert '<tr data-queue="empty">' in c.get("/").text
    resumed = c.post("/queues/resume", data={CSRF_FIELD: token, "queue": "mail"})
    assert "Queue resumed" in resumed.text
    with Session(committed) as session:
        assert list(pausing.paused_queues(session, Job)) == ["empty"]
    bad = c.post("/queues/pause", data={CSRF_FIELD: token, "queue": "<b>"})
    assert bad.status_code == 400
    assert "queue" in bad.text
    assert c.post("/queues/explode", data={CSRF_FIELD: token, "queue": "mail"}).status_code == 404


def test_pause_is_refused_read_only_and_without_csrf(committed):
    read_only = client(committed)
    token = csrf(read_only)
    assert "Pause" not in read_only.get("/").text
    assert (
        read_only.post("/queues/pause", data={CSRF_FIELD: token, "queue": "q"}).status_code == 403
    )
    writable = client(committed, allow_actions=True)
    assert writable.post("/queues/pause", data={"queue": "q"}).status_code == 403
    with Session(committed) as session:
        assert pausing.paused_queues(session, Job) == {}


def test_schedules_on_the_workers_page_and_on_their_jobs(committed):
    schedules = schedules_table_for(Job.__table__)  # type: ignore[arg-type]
    with committed.begin() as conn:
        conn.execute(
            schedules.insert(),
            [
                {
                    "name": "nightly:report",
                    "kind": "report",
                    "spec": "cron 0 3 * * * Europe/Paris",
                    "next_run_at": datetime.now(timezone.utc) + timedelta(hours=5),
                },
                {
                    "name": "nightly",
                    "kind": "report",
                    "spec": "every 60s",
                    "next_run_at": datetime.now(timezone.utc) + timedelta(minutes=1),
                },
            ],
        )
    job_id = add(
        committed,
        kind="report",
        status="done",
        age=1,
        idempotency_key="periodic:nightly:report:2026-12-01T03:00:00+01:00",
    )
    plain = add(committed, kind="report", idempotency_key="periodic-ish")
    c = client(committed)
    workers = c.get("/workers").text
    listed = re.findall(r"<tr><th>([^<]+)</th><td>report</td>", workers)
    assert listed == ["nightly", "nightly:report"]  # soonest next run first
    job = c.get(f"/jobs/{job_id}").text
    found = re.search(r'<td id="schedule">(.*?)</td>', job, re.S)
    assert found is not None
    assert ">nightly:report<" in found.group(1)  # the longest name that prefixes the key
    assert 'id="schedule"' not in c.get(f"/jobs/{plain}").text


def test_overview_shows_running_against_each_limited_kinds_limits(committed):
    jobs = new_queue()

    @jobs.task("sync_crm", max_running=2, max_running_per_key=1)
    def sync_crm(ctx):  # pragma: no cover - never run, only its limits are read
        pass

    @jobs.task("plain")
    def plain(ctx):  # pragma: no cover
        pass

    for key in ("customer:1", "customer:2"):
        add(
            committed,
            kind="sync_crm",
            status="running",
            attempts=1,
            locked_by="w",
            concurrency_key=key,
            locked_until=text("now() + interval '1 minute'"),
        )
    body = TestClient(make_app(jobs, committed), base_url="http://127.0.0.1").get("/").text
    row = re.search(r'<tr data-kind="sync_crm">(.*?)</tr>', body, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells[0] == "2 / 2"  # at its max_running: flagged
    assert cells[1] == "1 / 1"
    assert 'data-kind="plain"' not in body
    # Without the application's JobQueue there are no task definitions, so no limits.
    assert 'id="limits"' not in client(committed).get("/").text
