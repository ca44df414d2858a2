"""`sa-jobqueue dashboard` serves only its bound address and ``--allowed-host`` names:
a page from another name that resolves to it (DNS rebinding) gets 400 and no cookie,
and its POSTs change nothing. Over HTTP, and in a real headless Chromium that resolves
``evil.example`` to 127.0.0.1."""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import ConfigurationError
from sa_jobqueue.dashboard import make_app
from tests.support.helpers import wait_for
from tests.support.models import Job

pytestmark = pytest.mark.slow  # starts `sa-jobqueue dashboard` processes


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
def dashboard(database_url: str, *options: str) -> Iterator[int]:
    """Run ``sa-jobqueue dashboard`` as its own process; yield its port."""
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
        assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _request(port: int, host: str, method: str = "GET", path: str = "/", **headers: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = headers.pop("body", None)
    conn.request(method, path, body=body, headers={"Host": host, **headers})
    response = conn.getresponse()
    response.text = response.read().decode()  # type: ignore[attr-defined]
    conn.close()
    return response


def _failed_job(engine) -> int:
    with Session(engine) as s, s.begin():
        job = Job(kind="k", status="failed", attempts=1, last_error="x")
        s.add(job)
        s.flush()
        return job.id


def _status(engine, job_id: int) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(text("SELECT status FROM jobs WHERE id = :i"), {"i": job_id}).scalar()
        )


def test_dashboard_refuses_a_forged_host_and_its_posts_change_nothing(committed, database_url):
    job_id = _failed_job(committed)
    with dashboard(database_url, "--allow-actions") as port:
        ok = _request(port, f"127.0.0.1:{port}")
        assert ok.status == 200
        assert _request(port, f"localhost:{port}").status == 200
        forged = _request(port, f"evil.example:{port}")
        assert forged.status == 400
        assert "--allowed-host" in forged.text
        assert forged.getheader("set-cookie") is None
        # The rebinding page's POST, with an Origin that matches its forged Host.
        cookie = ok.getheader("set-cookie").split(";")[0]
        token = cookie.split("=", 1)[1]
        post = _request(
            port,
            f"evil.example:{port}",
            "POST",
            f"/jobs/{job_id}/retry",
            Origin=f"http://evil.example:{port}",
            Cookie=cookie,
            body=f"csrf_token={token}",
            **{"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert post.status == 400
        assert post.getheader("location") is None
    assert _status(committed, job_id) == "failed"


def test_dashboard_serves_an_allowed_host(committed, database_url):
    with dashboard(database_url, "--allowed-host", "jobs.internal") as port:
        assert _request(port, "jobs.internal").status == 200
        assert _request(port, f"JOBS.internal:{port}").status == 200
        assert _request(port, "other.internal").status == 400


def test_make_app_allowed_hosts_refuses_others_and_none_serves_any(committed):
    guarded = TestClient(make_app(Job, committed, allowed_hosts=["*.example.com"]))
    assert guarded.get("/", headers={"Host": "jobs.example.com"}).status_code == 200
    assert guarded.get("/", headers={"Host": "example.org"}).status_code == 400
    mounted = TestClient(make_app(Job, committed))
    assert mounted.get("/", headers={"Host": "anything.example"}).status_code == 200
    with pytest.raises(ConfigurationError, match="allowed host 'http://x'"):
        make_app(Job, committed, allowed_hosts=["http://x"])


def _chromium() -> str:
    found = "/usr/bin/chromium" if os.path.isfile("/usr/bin/chromium") else shutil.which("chromium")
    if not found:
        pytest.fail("the browser test needs Debian's chromium (apt-get install -y chromium)")
    return found


def test_browser_on_a_rebound_name_gets_no_dashboard_and_no_cookie(committed, database_url):
    from playwright.sync_api import sync_playwright

    job_id = _failed_job(committed)
    with dashboard(database_url, "--allow-actions") as port, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=_chromium(),
            headless=True,
            # What DNS rebinding achieves: evil.example now resolves to this machine.
            args=["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"],
        )
        try:
            context = browser.new_context()
            page = context.new_page()
            response = page.goto(f"http://evil.example:{port}/jobs/{job_id}")
            assert response is not None
            assert response.status == 400
            assert "this Host is not served" in page.content()
            assert context.cookies() == []
            # The same browser on the bound address gets the page (and its cookie).
            page.goto(f"http://127.0.0.1:{port}/jobs/{job_id}")
            assert page.locator("#job-status").inner_text() == "failed"
            assert [c["name"] for c in context.cookies()] == ["sajq_csrf"]
        finally:
            browser.close()
    assert _status(committed, job_id) == "failed"
