"""The worker registry and the attempt history against a real PostgreSQL.

Registration, heartbeat and clean stop; expiry by the sweeper (rows only, never the
jobs); the history each failed attempt writes, fenced, bounded and pruned with the job;
what `jobs show`, `workers` and the dashboard show of both.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import JobQueue
from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from sa_jobqueue.driver.postgres import PostgresDriver
from sa_jobqueue.ops.workers import attempt_history, list_workers, live_worker_count
from sa_jobqueue.retry import Backoff
from sa_jobqueue.schema.registry_tables import HISTORY_LIMIT
from sa_jobqueue.worker import liveness
from sa_jobqueue.worker.attempt import Claimed, Result
from sa_jobqueue.worker.registration import Registration
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue

NOW = Backoff(base=0.0, factor=1, cap=0, jitter=0)


#: The registrations a test made, deregistered at its end (`_deregistered`).
_MADE: list[tuple[Registration, Engine]] = []


@pytest.fixture(autouse=True)
def _deregistered():
    """Each test's registrations give back their liveness files at its end.

    Registering an id takes its file for this process; a later test registering the same
    id while an earlier one still held it would wait `liveness.HOLD_WAIT` (10 s) for it.
    """
    yield
    while _MADE:
        registration, engine = _MADE.pop()
        registration.deregister(engine)


def register(engine, worker_id: str, *, kinds=("k",), queues=("default",), gone_after=60.0):
    registration = Registration(
        Job, worker_id, queues=list(queues), kinds=list(kinds), concurrency=2, gone_after=gone_after
    )
    registration.register(engine)
    _MADE.append((registration, engine))
    return registration


def expire(engine, worker_id: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE sa_jobqueue_worker_jobs SET expires_at = now() - interval '1 second'"
                " WHERE id = :id"
            ),
            {"id": worker_id},
        )


def add(engine, **columns) -> int:
    columns.setdefault("kind", "k")
    with Session(engine) as session, session.begin():
        job = Job(**columns)
        session.add(job)
        session.flush()
        return job.id


def rows(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(text(sql), params).all()


def failing_three_times(committed) -> int:
    """A job whose handler fails on each of its three attempts (dead letter at the third)."""
    jobs = JobQueue(Job)

    @jobs.task("flaky", max_attempts=3, backoff=NOW)
    def flaky(ctx):
        raise ValueError(f"attempt {ctx.attempt} broke")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "flaky", {}).id
    ran = 0
    while ran < 3:
        ran += jobs.worker(committed, listen=False).drain()
    return job_id


def test_a_worker_registers_while_it_runs_and_its_row_goes_when_it_stops(committed):
    jobs = new_queue()
    seen: list[list[tuple[str, str, int]]] = []

    @jobs.task("look")
    def look(ctx):
        with Session(committed) as session:
            seen.append([(w.id, w.state, w.running) for w in list_workers(session, Job)])

    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "look", {})
    worker = jobs.worker(committed, listen=False, worker_id="w-look", concurrency=3)
    assert worker.drain() == 1
    assert seen == [[("w-look", "live", 1)]]
    (row,) = rows(committed, "SELECT * FROM sa_jobqueue_worker_jobs") or [None]
    assert row is None  # a clean stop deletes the row


def test_registration_records_what_the_worker_runs_and_heartbeats_move_its_expiry(committed):
    registration = register(committed, "w1", kinds=("b", "a"), queues=("mail", "default"))
    (row,) = rows(committed, "SELECT * FROM sa_jobqueue_worker_jobs")
    assert (row.id, row.kinds, row.queues, row.concurrency) == (
        "w1",
        ["a", "b"],
        ["default", "mail"],
        2,
    )
    assert row.pid > 0
    assert row.host
    assert row.version
    with committed.connect() as conn:
        registration.beat(conn)
        conn.commit()
    (after,) = rows(committed, "SELECT * FROM sa_jobqueue_worker_jobs")
    assert after.started_at == row.started_at
    assert after.expires_at > row.expires_at
    # A row deleted meanwhile (expired while the worker was cut off) comes back.
    with committed.begin() as conn:
        conn.execute(text("DELETE FROM sa_jobqueue_worker_jobs"))
    with committed.connect() as conn:
        registration.beat(conn)
        conn.commit()
    assert [r.id for r in rows(committed, "SELECT id FROM sa_jobqueue_worker_jobs")] == ["w1"]


def test_a_second_worker_with_a_live_workers_id_is_warned_about(committed, caplog, monkeypatch):
    # Each register() below holds "w-twin"'s liveness file in this one process: a later one
    # waits for it (as a second process of this id would) before going on without it.
    monkeypatch.setattr(liveness, "HOLD_WAIT", 0.2)
    first = register(committed, "w-twin")
    with committed.begin() as conn:  # the row as another process on another host left it
        conn.execute(text("UPDATE sa_jobqueue_worker_jobs SET host = 'elsewhere', pid = 4242"))
    with caplog.at_level("WARNING", logger="sa_jobqueue.worker"):
        register(committed, "w-twin")
    (warning,) = [r.getMessage() for r in caplog.records if "w-twin" in r.getMessage()]
    assert "registered by a live worker on host elsewhere, pid 4242" in warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="sa_jobqueue.worker"):
        register(committed, "w-twin")  # the row is this process's now: no warning
        expire(committed, "w-twin")
        with committed.begin() as conn:
            conn.execute(text("UPDATE sa_jobqueue_worker_jobs SET pid = 4242"))
        register(committed, "w-twin")  # another pid, but its row expired: no warning
    assert [r for r in caplog.records if "w-twin" in r.getMessage()] == []
    assert first.worker_id == "w-twin"


def test_expired_rows_are_gone_and_the_sweeper_deletes_them_but_never_their_jobs(committed):
    register(committed, "alive")
    register(committed, "paused")
    job_id = add(
        committed,
        status="running",
        attempts=1,
        locked_by="paused",
        locked_until=text("now() + interval '5 minutes'"),
    )
    add(
        committed,
        status="running",
        attempts=1,
        locked_by="never-registered",
        locked_until=text("now() + interval '5 minutes'"),
    )
    expire(committed, "paused")
    with Session(committed) as session:
        states = [(w.id, w.state, w.running) for w in list_workers(session, Job)]
        live_only = [w.id for w in list_workers(session, Job, include_gone=False)]
        assert live_worker_count(session, Job) == 1
    assert states == [("alive", "idle", 0), ("never-registered", "gone", 1), ("paused", "gone", 1)]
    assert live_only == ["alive"]
    sweeper = register(committed, "sweeper")
    with committed.begin() as conn:
        assert sweeper.expire(conn) == ["paused"]
    assert {r.id for r in rows(committed, "SELECT id FROM sa_jobqueue_worker_jobs")} == {
        "alive",
        "sweeper",
    }
    # Its job keeps its lease: the worker may only be paused (docs/workers-registry.md).
    (job,) = rows(committed, "SELECT status, locked_by FROM jobs WHERE id = :id", id=job_id)
    assert tuple(job) == ("running", "paused")


def test_a_job_that_failed_three_times_has_three_history_entries_in_the_cli_and_dashboard(
    committed, database_url
):
    job_id = failing_three_times(committed)
    with Session(committed) as session:
        history = attempt_history(session, Job, job_id)
    assert [(e.attempt, e.error.splitlines()[-1]) for e in history] == [
        (1, "ValueError: attempt 1 broke"),
        (2, "ValueError: attempt 2 broke"),
        (3, "ValueError: attempt 3 broke"),
    ]
    assert all(e.worker for e in history)

    runner = CliRunner()
    env = {"DATABASE_URL": database_url}
    shown = runner.invoke(main, ["jobs", "show", str(job_id)], env=env)
    assert shown.exit_code == 0, shown.output
    assert "last_error (attempt 3):" in shown.output
    for n in (1, 2, 3):
        assert f"  attempt {n}  " in shown.output
        assert f"ValueError: attempt {n} broke" in shown.output
    as_json = json.loads(
        runner.invoke(main, ["jobs", "show", str(job_id), "--json"], env=env).output
    )
    assert [e["attempt"] for e in as_json["attempt_history"]] == [1, 2, 3]

    page = TestClient(make_app(new_queue(), committed), base_url="http://127.0.0.1").get(
        f"/jobs/{job_id}"
    )
    table = re.search(r'<table class="grid" id="attempt-history">(.*?)</table>', page.text, re.S)
    assert table is not None
    assert re.findall(r"<tr><td>(\d+)</td>", table.group(1)) == ["1", "2", "3"]
    assert "(attempt 3)" in page.text


def test_a_stale_workers_failure_writes_no_history(committed):
    # The job was reclaimed: attempt 2 is w-new's. w-old still reports attempt 1.
    job_id = add(
        committed,
        status="running",
        attempts=2,
        locked_by="w-new",
        locked_until=text("now() + interval '5 minutes'"),
    )
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)

    def fail(owner: str, attempt: int) -> str | None:
        job = Claimed(job_id, "k", "default", {}, attempt, 20, None, 60.0)
        with committed.begin() as conn:
            return driver.job_fail(conn, job, owner, Result.FAIL, 0.0, f"{owner} failed")

    assert fail("w-old", 1) is None
    assert rows(committed, "SELECT * FROM sa_jobqueue_errors_jobs") == []
    assert fail("w-new", 2) == "pending"
    got = rows(committed, "SELECT job_id, attempt, worker, error FROM sa_jobqueue_errors_jobs")
    assert [tuple(r) for r in got] == [(job_id, 2, "w-new", "w-new failed")]


def test_an_expired_lease_swept_writes_its_history_entry(committed):
    job_id = add(
        committed,
        status="running",
        attempts=1,
        locked_by="w-dead",
        locked_until=text("now() - interval '1 second'"),
    )
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    with committed.begin() as conn:
        assert [s.id for s in driver.job_sweep(conn, 10)] == [job_id]
    got = rows(committed, "SELECT attempt, worker, error FROM sa_jobqueue_errors_jobs")
    assert [tuple(r) for r in got] == [
        (1, "w-dead", "lease expired (worker w-dead stopped reporting)")
    ]


def test_the_history_keeps_the_newest_entries_up_to_its_bound(committed):
    job_id = add(committed, status="running", attempts=0, locked_by="w", max_attempts=100)
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    for attempt in range(1, HISTORY_LIMIT + 6):
        with committed.begin() as conn:
            conn.execute(
                text("UPDATE jobs SET status = 'running', attempts = :n WHERE id = :id"),
                {"n": attempt, "id": job_id},
            )
            job = Claimed(job_id, "k", "default", {}, attempt, 100, None, 60.0)
            assert driver.job_fail(conn, job, "w", Result.FAIL, 0.0, f"e{attempt}")
    kept = [
        r.attempt
        for r in rows(committed, "SELECT attempt FROM sa_jobqueue_errors_jobs ORDER BY id")
    ]
    assert kept == list(range(6, HISTORY_LIMIT + 6))


def test_deleting_a_job_deletes_its_history(committed):
    job_id = failing_three_times(committed)
    with committed.begin() as conn:
        conn.execute(text("DELETE FROM jobs WHERE id = :id"), {"id": job_id})
    assert rows(committed, "SELECT * FROM sa_jobqueue_errors_jobs") == []


def test_workers_command_lists_live_and_idle_workers_with_running_counts(committed, database_url):
    register(committed, "w-busy")
    register(committed, "w-idle")
    register(committed, "w-gone")
    expire(committed, "w-gone")
    for _ in range(2):
        add(
            committed,
            status="running",
            attempts=1,
            locked_by="w-busy",
            locked_until=text("now() + interval '5 minutes'"),
        )
    runner = CliRunner()
    env = {"DATABASE_URL": database_url}
    listed = runner.invoke(main, ["workers"], env=env)
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0] == "2 live workers (1 gone: --all lists it) on table 'jobs'"
    assert re.search(r"^w-busy\s+live\s+2\s", listed.output, re.M)
    assert re.search(r"^w-idle\s+idle\s+0\s", listed.output, re.M)
    assert "w-gone" not in listed.output
    with_gone = runner.invoke(main, ["workers", "--all"], env=env).output
    assert with_gone.splitlines()[0] == "2 live workers and 1 gone on table 'jobs'"
    assert re.search(r"^w-gone\s+gone\s+0\s", with_gone, re.M)
    everyone = json.loads(runner.invoke(main, ["workers", "--all", "--json"], env=env).output)
    assert [(w["id"], w["state"], w["running"]) for w in everyone] == [
        ("w-busy", "live", 2),
        ("w-idle", "idle", 0),
        ("w-gone", "gone", 0),
    ]
    assert everyone[0]["kinds"] == ["k"]
    assert everyone[0]["concurrency"] == 2
    live_only = json.loads(runner.invoke(main, ["workers", "--json"], env=env).output)
    assert [w["id"] for w in live_only] == ["w-busy", "w-idle"]


def test_workers_command_says_when_no_worker_is_live(committed, database_url):
    register(committed, "w-gone")
    expire(committed, "w-gone")
    listed = CliRunner().invoke(main, ["workers"], env={"DATABASE_URL": database_url})
    assert listed.exit_code == 0, listed.output
    assert listed.output == "no live worker on table 'jobs' (1 gone: --all lists it)\n"


@pytest.mark.parametrize("state", ["idle", "gone"])
def test_the_dashboard_workers_page_shows_each_registry_state(committed, state):
    register(committed, "w-x")
    if state == "gone":
        expire(committed, "w-x")
    body = (
        TestClient(make_app(new_queue(), committed), base_url="http://127.0.0.1")
        .get("/workers")
        .text
    )
    assert re.search(rf'<tr class="worker-{state}">\s*<th>w-x</th>', body)


def test_the_live_workers_gauge_counts_live_registry_rows_only(committed):
    from prometheus_client import CollectorRegistry

    from sa_jobqueue.metrics import Metrics

    registry = CollectorRegistry()
    Metrics(registry).watch(committed, Job, interval=0.01)
    assert registry.get_sample_value("sa_jobqueue_workers_live") == 0
    register(committed, "w1")
    register(committed, "w2")
    register(committed, "w3")
    expire(committed, "w3")
    wait_for(
        lambda: registry.get_sample_value("sa_jobqueue_workers_live") == 2,
        what="the gauge to count the two live workers",
    )


def test_a_worker_under_run_async_is_registered_while_it_serves_and_deregistered_after(
    committed,
):
    import asyncio

    jobs = new_queue()
    jobs.task("k")(lambda ctx: None)
    worker = jobs.worker(committed, listen=False, worker_id="w-async", poll_interval=0.2)

    async def serve() -> list[tuple[str, str, int]]:
        serving = asyncio.create_task(worker.run_async())
        try:
            for _ in range(3000):  # a minute at most
                if await asyncio.to_thread(
                    lambda: rows(committed, "SELECT id FROM sa_jobqueue_worker_jobs")
                ):
                    break
                await asyncio.sleep(0.02)
            with Session(committed) as session:
                return [(w.id, w.state, w.running) for w in list_workers(session, Job)]
        finally:
            worker.stop()
            await serving

    assert asyncio.run(serve()) == [("w-async", "idle", 0)]
    assert rows(committed, "SELECT id FROM sa_jobqueue_worker_jobs") == []


def test_stats_and_the_overview_count_the_live_workers(committed, database_url):
    register(committed, "w1")
    register(committed, "w2")
    register(committed, "w-gone")
    expire(committed, "w-gone")
    runner = CliRunner()
    env = {"DATABASE_URL": database_url}
    shown = runner.invoke(main, ["stats"], env=env)
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0].endswith(", 2 live workers")
    assert json.loads(runner.invoke(main, ["stats", "--json"], env=env).output)["live_workers"] == 2
    page = TestClient(make_app(new_queue(), committed), base_url="http://127.0.0.1").get("/")
    assert re.search(r'id="live-workers">2 live workers</a>', page.text)
