"""The dashboard in a real headless Chromium (Playwright), served by `sa-jobqueue dashboard`.

Debian's ``chromium`` must be installed (``.ci/run`` installs it); Playwright's own
browser download is never used. Without the browser these tests fail and say how
to install it: they never skip.

Set ``SA_JOBQUEUE_SCREENSHOTS=DIR`` to save a screenshot of each page there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue.ops import pausing
from tests.support.helpers import wait_for
from tests.support.models import Job

pytestmark = pytest.mark.slow  # each test starts `sa-jobqueue dashboard` as a subprocess

CHROMIUM = os.environ.get("SA_JOBQUEUE_CHROMIUM")
SHOTS = os.environ.get("SA_JOBQUEUE_SCREENSHOTS")
PWNED = "<script>window.__pwned = 1</script>"
PWNED_IMG = '<img src=x onerror="window.__pwned = 2">'


def _browser_or_fail() -> str:
    if CHROMIUM:  # asked for by name: that one or nothing
        found = CHROMIUM if os.path.isfile(CHROMIUM) else None
    else:
        found = "/usr/bin/chromium" if os.path.isfile("/usr/bin/chromium") else None
        found = found or shutil.which("chromium")
    if not found:
        pytest.fail(
            f"no Chromium at {CHROMIUM or '/usr/bin/chromium'}: "
            "the dashboard's browser tests need Debian's chromium "
            "(apt-get update && apt-get install -y chromium; .ci/run does this), "
            "or SA_JOBQUEUE_CHROMIUM=/path/to/chromium",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _browser_or_fail()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright: pip install -e '.[test]'", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    opened = context.new_page()
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, errors  # no script error on any page (CSP violations included)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def dashboard(database_url: str, *options: str) -> Iterator[str]:
    """Run ``sa-jobqueue dashboard`` as its own process; yield its base URL."""
    port = _free_port()
    command = [sys.executable, "-m", "sa_jobqueue.cli", "dashboard", "--port", str(port), *options]
    server = subprocess.Popen(
        command,
        env={**os.environ, "DATABASE_URL": database_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: _answers(port) or server.poll() is not None, 30, "the dashboard to listen")
        if server.poll() is not None:
            output = server.stdout.read().decode() if server.stdout else ""
            raise AssertionError(f"sa-jobqueue dashboard exited: {output}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def add(engine, **columns: Any) -> int:
    columns.setdefault("kind", "k")
    if columns.pop("finished", False):
        columns["finished_at"] = text("now()")
    with Session(engine) as session, session.begin():
        job = Job(**columns)
        session.add(job)
        session.flush()
        return job.id


def status_of(engine, job_id: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(text("SELECT status FROM jobs WHERE id = :id"), {"id": job_id}).scalar()


def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"dashboard-{name}.png"), full_page=True)


def test_overview_to_filtered_list_to_job_to_retry_changes_the_database(
    committed, database_url, page
):
    for i in range(4):
        add(committed, queue="mail", kind="send_receipt", payload={"order_id": i})
    add(committed, queue="mail", kind="send_receipt", status="done", finished=True)
    failed = add(
        committed,
        queue="mail",
        kind="send_receipt",
        payload={"order_id": 4, "to": "dave@example.com"},
        status="failed",
        attempts=5,
        max_attempts=5,
        last_error="Traceback (most recent call last):\n  ...\nConnectionError: SMTP timed out",
        finished=True,
    )
    add(
        committed,
        queue="pdf",
        kind="render_pdf",
        status="failed",
        attempts=1,
        finished=True,
        last_error="ValueError: no such template",
    )
    with dashboard(database_url, "--allow-actions") as base:
        page.goto(base + "/")
        mail = page.locator('tr[data-queue="mail"]')
        assert mail.locator("td").nth(0).inner_text() == "4"  # pending
        mail.locator("a.failed-link").click()
        page.wait_for_url("**/jobs?status=failed&queue=mail")
        rows = page.locator("#jobs tbody tr[data-id]")
        assert rows.count() == 1
        # Narrow again with the form: kind and text of the error.
        page.fill("#f-kind", "send_receipt")
        page.fill("#f-error", "smtp")
        page.click("#f-submit")
        page.wait_for_url("**/jobs?*kind=send_receipt*")
        assert page.locator("#jobs tbody tr[data-id]").count() == 1
        shot(page, "jobs")
        page.locator(f'tr[data-id="{failed}"] a.job-link').click()
        page.wait_for_url(f"**/jobs/{failed}")
        assert "SMTP timed out" in page.locator("#last-error").inner_text()
        assert '"to": "dave@example.com"' in page.locator("#payload").inner_text()
        shot(page, "job")
        page.get_by_role("button", name="Retry").click()
        page.wait_for_url(f"**/jobs/{failed}?notice=retry")
        assert page.locator("#job-status").inner_text() == "pending"
        assert "Job retried" in page.locator("#notice").inner_text()
        assert status_of(committed, failed) == "pending"
        # Pause the queue from the overview, as `sa-jobqueue pause mail` would.
        page.click("#nav-overview")
        page.locator('tr[data-queue="mail"]').get_by_role("button", name="Pause").click()
        page.wait_for_url("**/?notice=paused")
        assert page.locator('tr[data-queue="mail"] .status.paused').count() == 1
        shot(page, "overview")
    with Session(committed) as session:
        assert list(pausing.paused_queues(session, Job)) == ["mail"]


def test_payload_and_error_holding_script_render_as_text(committed, database_url, page):
    job_id = add(
        committed,
        kind="evil",
        payload={"html": PWNED, "img": PWNED_IMG},
        status="failed",
        attempts=1,
        last_error=f"ValueError: {PWNED} {PWNED_IMG}",
        finished=True,
    )
    with dashboard(database_url) as base:
        for url in (f"/jobs/{job_id}", "/jobs?status=failed", "/jobs?kind=evil"):
            page.goto(base + url)
            page.wait_for_load_state("load")
            assert page.evaluate("window.__pwned") is None, url
            assert page.locator("script:not([src])").count() == 0, url
        page.goto(f"{base}/jobs/{job_id}")
        assert PWNED in page.locator("#payload").inner_text()
        assert PWNED_IMG.replace('"', '\\"') in page.locator("#payload").inner_text()
        assert PWNED in page.locator("#last-error").inner_text()
        assert page.locator("#payload img").count() == 0


def test_actions_are_refused_read_only_and_without_the_csrf_token(committed, database_url, page):
    job_id = add(committed, status="failed", attempts=1, last_error="x", finished=True)
    post = """async (url) => {
        const r = await fetch(url, {method: "POST", body: "csrf_token=guess",
            headers: {"content-type": "application/x-www-form-urlencoded"}});
        return [r.status, await r.text()];
    }"""
    with dashboard(database_url) as base:
        page.goto(f"{base}/jobs/{job_id}")
        assert page.get_by_role("button", name="Retry").count() == 0
        assert page.locator("header .readonly").inner_text() == "read-only"
        status, body = page.evaluate(post, f"{base}/jobs/{job_id}/retry")
        assert status == 403
        assert "read-only" in body
    with dashboard(database_url, "--allow-actions") as base:
        page.goto(f"{base}/jobs/{job_id}")
        assert page.get_by_role("button", name="Retry").count() == 1
        status, body = page.evaluate(post, f"{base}/jobs/{job_id}/retry")
        assert status == 403
        assert "CSRF" in body
    assert status_of(committed, job_id) == "failed"


def test_overview_refreshes_itself_and_workers_page_shows_who_runs_what(
    committed, database_url, page
):
    add(committed, queue="mail", kind="send_receipt")
    with dashboard(database_url, "--refresh", "0.5") as base:
        page.goto(base + "/")
        assert page.locator('tr[data-queue="reports"]').count() == 0
        add(
            committed,
            queue="reports",
            kind="nightly",
            status="running",
            attempts=1,
            locked_by="host-a:4242",
            locked_until=text("now() + interval '5 minutes'"),
        )
        page.locator('tr[data-queue="reports"]').wait_for(timeout=15000)
        page.click("#nav-workers")
        page.wait_for_url("**/workers")
        # A running job's owner without a registry row is listed, as gone.
        assert "host-a:4242" in page.locator("#workers tr.worker-gone").inner_text()
        assert "nightly" in page.locator("#running").inner_text()
        shot(page, "workers")


ROOT = Path(__file__).resolve().parents[3]
LESSON_KINDS = ("send_receipt", "create_invoice", "render_pdf", "sync_crm", "import_feed")


def test_dashboard_on_the_demo_database_shows_the_lessons_jobs(server_url, page):
    port = _free_port()
    demo = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--dashboard", "--port", str(port)],
        env={**os.environ, "DATABASE_URL": server_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(demo.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(
            lambda: any("dashboard: http" in line for line in lines) or demo.poll() is not None,
            120,
            "the demo to finish and serve its dashboard",
        )
        assert demo.poll() is None, "".join(lines)
        wait_for(lambda: _answers(port), 30, "the demo's dashboard to listen")
        base = f"http://127.0.0.1:{port}"
        page.goto(base + "/")
        shot(page, "demo-overview")
        queues = page.locator("#queues tbody tr[data-queue]")
        assert queues.count() >= 2
        page.goto(base + "/jobs")
        listed = page.locator("#jobs").inner_text()
        for kind in LESSON_KINDS:
            assert kind in listed, kind
        shot(page, "demo-jobs")
        page.goto(base + "/jobs?status=failed&kind=import_feed")
        page.locator("a.job-link").first.click()
        assert "import_feed" in page.locator("#fields").inner_text()
        assert page.locator("#last-error").inner_text().strip()
        shot(page, "demo-job")
        page.click("#nav-workers")
        page.wait_for_url("**/workers")
        # Workers B to E stopped with SIGTERM: each deleted its registry row at once.
        # Worker A was killed with kill -9: worker B, on the same host, found its liveness
        # file unlocked, recovered its job and deleted its row (docs/workers-registry.md).
        listed = page.locator("#workers tbody tr")
        assert listed.count() == 1
        assert "No worker is registered" in listed.first.inner_text()
        shot(page, "demo-workers")
    finally:
        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=60)
        reader.join(timeout=10)
    assert code == 0, "".join(lines)


FILL_FAILED = """
INSERT INTO jobs (queue, kind, payload, status, attempts, max_attempts, last_error, finished_at)
SELECT 'mail', 'send_receipt', jsonb_build_object('order_id', i), 'failed', 5, 5,
       'Traceback (most recent call last):' || chr(10) || 'ConnectionError: SMTP timed out '
       || repeat('and a very long message ', 8),
       now() - make_interval(secs => i)
FROM generate_series(1, :n) AS i
"""


def count_status(engine, status: str) -> int:
    with engine.connect() as conn:
        query = text("SELECT count(*) FROM jobs WHERE status = :s")
        return int(conn.execute(query, {"s": status}).scalar_one())


def test_bulk_retry_of_500_failed_jobs_asks_then_retries_them_all(committed, database_url, page):
    with committed.begin() as conn:
        conn.execute(text(FILL_FAILED), {"n": 500})
    add(committed, queue="mail", kind="send_receipt", status="running", attempts=1, locked_by="w")
    with dashboard(database_url, "--allow-actions") as base:
        page.goto(base + "/jobs?status=failed&queue=mail")
        assert page.locator("#matching").inner_text() == "500"
        assert page.locator("#jobs tbody tr[data-id]").count() == 50  # one page of them
        # The page's own box ticks every row of the page (dashboard.js).
        page.click("#select-page")
        assert page.locator("input.pick:checked").count() == 50
        page.check("#scope-all")
        page.click("#bulk-retry")
        page.wait_for_url("**/bulk")
        assert page.locator("h1").inner_text() == "Retry 500 jobs?"
        assert count_status(committed, "failed") == 500  # asking changed nothing
        shot(page, "bulk-confirm")
        page.click("#confirm")
        page.wait_for_url("**/jobs?status=failed&queue=mail&notice=bulk_retry&n=500")
        assert page.locator("#notice").inner_text() == "Jobs retried (pending, due now): 500"
        assert page.locator("#jobs tbody tr[data-id]").count() == 0
    assert count_status(committed, "pending") == 500
    assert count_status(committed, "running") == 1


def _durable_job(engine: Any) -> int:
    """A job parked waiting for a signal after two steps (one with a long result), with
    progress reported, a signal received and one kept; and a running job with progress."""
    from sa_jobqueue import JobContext, JobQueue
    from sa_jobqueue.testing import drain

    jobs = JobQueue(Job)

    @jobs.task("order_saga_with_a_rather_long_kind_name")
    def saga(ctx: JobContext) -> None:
        ctx.step("charge_the_customers_card", lambda: {"charge_id": "ch_" + "9" * 200})
        ctx.progress(0.5)
        ctx.wait_for_signal("paid")
        ctx.step("reserve", lambda: ["sku-1", "sku-2"])
        ctx.wait_for_signal("warehouse_confirmed_the_shipment", timeout=3600)

    with Session(engine) as session, session.begin():
        job_id = jobs.enqueue(session, "order_saga_with_a_rather_long_kind_name", {"o": 1}).id
        jobs.signal(session, job_id, "paid", {"amount": 1999, "note": "n" * 300})
        jobs.signal(session, job_id, "a_signal_nobody_waits_for_yet", None)
    assert [o.outcome for o in drain(jobs, engine)] == ["parked"]
    add(engine, kind="crunch", status="running", attempts=1, progress={"done": 5, "total": 10})
    add(engine, kind="crunch", status="running", attempts=1, progress=0.75)
    return job_id


# What "the layout breaks" means, measured in the page rather than against a golden image
# (the script says it): sideways scrolling, things sticking out, an overlapping header,
# and in a wide window a table cut off in its scroll box.
LAYOUT_PROBLEMS = (Path(__file__).parent / "layout_problems.js").read_text()


def test_every_page_keeps_its_layout_in_a_narrow_and_a_wide_window(
    committed, database_url, browser
):
    with committed.begin() as conn:
        conn.execute(text(FILL_FAILED), {"n": 60})
    job_id = add(
        committed,
        queue="a-rather-long-queue-name-for-a-phone",
        kind="render_a_very_long_pdf_report_name",
        payload={"text": "x" * 400, "nested": {"key": ["v" * 120]}},
        status="failed",
        attempts=3,
        max_attempts=3,
        last_error="Traceback (most recent call last):\n" + "  File 'app.py'\n" * 5 + "E" * 300,
        finished=True,
    )
    add(committed, queue="exports", kind="export_posts", status="done", finished=True)
    add(
        committed,
        queue="reports",
        kind="nightly",
        status="running",
        attempts=1,
        locked_by="a-worker-host-with-a-long-name.example.internal:4242",
        locked_until=text("now() + interval '5 minutes'"),
    )
    with committed.begin() as conn:  # the job page's attempt history, long lines and all
        conn.execute(
            text(
                "INSERT INTO sa_jobqueue_errors_jobs (job_id, attempt, worker, error)"
                " SELECT :id, n, 'a-worker-host-with-a-long-name.example.internal:4242', :e"
                " FROM generate_series(1, 3) AS n"
            ),
            {"id": job_id, "e": "Traceback (most recent call last):\n" + "E" * 300},
        )
    durable_id = _durable_job(committed)
    pages = {
        "overview": "/",
        "overview-week": "/?range=week",
        "jobs": "/jobs",
        "jobs-failed": "/jobs?status=failed",
        "job": f"/jobs/{job_id}",
        "job-durable": f"/jobs/{durable_id}",
        "workers": "/workers",
        "no-such-job": "/lookup?id=424242",
    }
    with dashboard(database_url, "--allow-actions") as base:
        for width, height in ((390, 844), (1280, 800)):
            context = browser.new_context(viewport={"width": width, "height": height})
            try:
                opened = context.new_page()
                for name, url in pages.items():
                    opened.goto(base + url)
                    opened.wait_for_load_state("load")
                    problems = opened.evaluate(LAYOUT_PROBLEMS, width >= 1280)
                    shot(opened, f"{name}-{width}")
                    assert problems == [], (name, width, problems)
                    if name == "job":  # the plain model has no column of its own to list
                        assert opened.locator("#extra").count() == 0, width
                    if name == "job-durable":  # its steps and signals, drawn and visible
                        for element in ("#steps", "#waits", "#signals", "#progress progress"):
                            assert opened.locator(element).is_visible(), (element, width)
                # The bulk confirmation page too.
                opened.goto(base + "/jobs?status=failed")
                opened.check("#scope-all")
                opened.click("#bulk-delete")
                opened.wait_for_url("**/bulk")
                assert opened.evaluate(LAYOUT_PROBLEMS, width >= 1280) == [], ("bulk", width)
                shot(opened, f"bulk-{width}")
            finally:
                context.close()
    assert count_status(committed, "failed") == 61  # the confirmation page deleted nothing
