"""The dashboard shows durable jobs: steps, sleeps, signal waits, signals and progress."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.testing import drain
from tests.support.models import Job

starlette_testclient = pytest.importorskip("starlette.testclient")


def client_for(jobs: JobQueue[Any], engine: Any) -> Any:
    from sa_jobqueue.dashboard import make_app

    return starlette_testclient.TestClient(make_app(jobs, engine), base_url="http://127.0.0.1")


def section(page: str, element_id: str) -> str:
    """The element of `page` whose id is `element_id`, up to its closing tag."""
    found = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"no #{element_id} on the page"
    return found.group(2)


def test_the_job_page_shows_a_jobs_steps_with_their_results_cut_short(committed):
    jobs = JobQueue(Job)

    @jobs.task("report")
    def report(ctx: JobContext) -> str:
        ctx.step("fetch", lambda: {"rows": 3, "secret": "hunter2"})
        ctx.step("render", lambda: "x" * 500)
        return "mailed"

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "report", {}).id
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]

    page = client_for(jobs, committed).get(f"/jobs/{job_id}").text
    steps = section(page, "steps")
    rows = re.findall(r'<tr class="step (\w+)">\s*<td class="name">(\w+)</td>', steps)
    assert rows == [("step", "fetch"), ("step", "render")]
    assert "&#34;rows&#34;: 3" in steps
    assert "hunter2" not in page  # step results are redacted like the payload
    assert "&#34;" + "x" * 78 + "…</code>" in steps  # cut short: 80 characters of JSON
    assert 'id="sleeps"' not in page
    assert 'id="waits"' not in page
    assert 'id="parked-for"' not in page  # done: parked for nothing
    assert "has_steps" not in page  # shown as the steps, not as an "other column"


def test_the_job_page_shows_a_sleeping_jobs_sleep_and_until_when(committed):
    jobs = JobQueue(Job)

    @jobs.task("nap")
    def nap(ctx: JobContext) -> None:
        ctx.step("first", lambda: 1)
        ctx.sleep("cool_off", 3600)

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "nap", {}).id
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]

    page = client_for(jobs, committed).get(f"/jobs/{job_id}").text
    assert section(page, "parked-for") == "sleep cool_off"
    sleeps = section(page, "sleeps")
    assert "cool_off" in sleeps
    assert " until 20" in sleeps
    rows = re.findall(r'<tr class="step (\w+)">', section(page, "steps"))
    assert rows == ["step", "sleep"]


def test_the_job_page_shows_the_signal_awaited_and_the_signals_received(committed):
    jobs = JobQueue(Job)

    @jobs.task("saga")
    def saga(ctx: JobContext) -> None:
        ctx.wait_for_signal("paid")
        ctx.wait_for_signal("shipped", timeout=600)

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "saga", {}).id
        jobs.signal(session, job_id, "paid", {"amount": 5, "token": "tok_secret"})
        jobs.signal(session, job_id, "later", None)  # nobody waits for it: kept
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]

    page = client_for(jobs, committed).get(f"/jobs/{job_id}").text
    assert section(page, "parked-for") == "signal shipped"
    waits = section(page, "waits")
    assert "shipped" in waits
    assert "times out" in waits
    assert "paid" not in waits  # received: no longer waited for
    signals = section(page, "signals")
    names = re.findall(r'<tr><td class="name">(\w+)</td>', signals)
    assert names == ["paid", "later"]
    assert signals.count("kept: no wait has taken it yet") == 1
    assert "tok_secret" not in page
    kinds = re.findall(r'<tr class="step (\w+)">', section(page, "steps"))
    assert kinds == ["signal", "wait"]


def test_the_jobs_list_shows_running_jobs_progress_as_a_bar_or_a_few_words(committed):
    jobs = JobQueue(Job)
    with Session(committed) as session, session.begin():
        bar = Job(kind="k", status="running", attempts=1, progress=0.4)
        words = Job(kind="k", status="running", attempts=1, progress={"done": 5, "total": 10})
        pending = Job(kind="k", status="pending", progress=0.9)  # not running: no bar
        session.add_all([bar, words, pending])
        session.flush()
        ids = bar.id, words.id, pending.id
    client = client_for(jobs, committed)
    page = client.get("/jobs").text

    def row(job_id: int) -> str:
        found = re.search(rf'<tr data-id="{job_id}">(.*?)</tr>', page, re.S)
        assert found
        return found.group(1)

    assert '<progress max="1" value="0.4"></progress> <span class="percent">40%</span>' in row(
        ids[0]
    )
    assert '<span class="progress-text" ' in row(ids[1])
    assert ">done 5/total 10<" in row(ids[1])
    assert "<progress" not in row(ids[2])
    # The job page: the same bar, or the words and the object cut short.
    assert "40%</span>" in section(client.get(f"/jobs/{ids[0]}").text, "progress")
    shown = section(client.get(f"/jobs/{ids[1]}").text, "progress")
    assert "done 5/total 10" in shown
    assert "<code>" in shown


def test_a_job_page_costs_two_more_statements_for_its_durable_state(committed):
    jobs = JobQueue(Job)
    with Session(committed) as session, session.begin():
        job = Job(kind="k")
        session.add(job)
        session.flush()
        job_id = job.id
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    client = client_for(jobs, committed)
    client.get(f"/jobs/{job_id}")  # warm: reflection, SET statement_timeout...
    event.listen(committed, "before_cursor_execute", count)
    try:
        assert client.get(f"/jobs/{job_id}").status_code == 200
    finally:
        event.remove(committed, "before_cursor_execute", count)
    durable = [s for s in seen if "sa_jobqueue_steps_jobs" in s or "sa_jobqueue_signal_jobs" in s]
    assert len(durable) == 2, durable
