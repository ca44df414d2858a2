"""The operator commands, run through click against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, statements
from sa_jobqueue.cli import main
from tests.support.models import Job

APP = JobQueue(Job)


@APP.task("app_task", queue="app_q", max_attempts=3)
def app_task(ctx):  # pragma: no cover - never run, only its defaults are used
    pass


@pytest.fixture
def run(committed, database_url):
    def invoke(*args: str):
        runner = CliRunner()
        return runner.invoke(main, list(args), env={"DATABASE_URL": database_url})

    return invoke


def one_line_error(result, code: int) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sa-jobqueue: ")
    assert "Traceback" not in result.stderr
    return str(lines[0])


def seed(engine, **columns) -> int:
    columns.setdefault("kind", "k")
    if "age" in columns:
        columns["finished_at"] = text(f"now() - make_interval(secs => {columns.pop('age')})")
    with Session(engine) as session, session.begin():
        job = Job(**columns)
        session.add(job)
        session.flush()
        return job.id


def row(engine, job_id: int) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


def test_enqueue_prints_the_id_and_passes_every_option(run, committed):
    result = run(
        "enqueue",
        "send_receipt",
        '{"order_id": 4}',
        "--queue",
        "mail",
        "--priority",
        "-3",
        "--delay",
        "1h",
        "--max-attempts",
        "5",
        "--idempotency-key",
        "order:4",
    )
    assert result.exit_code == 0, result.stderr
    job_id = int(result.stdout)
    job = row(committed, job_id)
    assert (job.kind, job.payload, job.queue, job.priority) == (
        "send_receipt",
        {"order_id": 4},
        "mail",
        -3,
    )
    assert (job.max_attempts, job.idempotency_key) == (5, "order:4")
    with committed.connect() as conn:
        due_in = conn.scalar(
            select(func.extract("epoch", Job.run_at - func.now())).where(Job.id == job_id)
        )
    assert 3500 < float(due_in) <= 3600
    again = run("enqueue", "send_receipt", '{"order_id": 5}', "--idempotency-key", "order:4")
    assert (again.exit_code, int(again.stdout)) == (0, job_id)
    assert "already had idempotency key" in again.stderr
    at = run("enqueue", "later", "--run-at", "2030-01-02T03:04:05+00:00")
    assert row(committed, int(at.stdout)).run_at.year == 2030
    assert row(committed, int(at.stdout)).payload == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["k", "{bad"], "PAYLOAD is not valid JSON"),
        (["k", "{}", "--delay", "5 fortnights"], "is not a duration"),
        (["k", "{}", "--run-at", "2030-01-01T00:00"], "needs a UTC offset"),
        (["k", "{}", "--priority", "x"], "'x' is not a valid integer"),
        (["k", "{}", "--priority", "40000"], "priority=40000"),
        (["bad kind!", "{}"], "kind='bad kind!'"),
        (["k", "{}", "--delay", "1s", "--run-at", "2030-01-01T00:00Z"], "either run_at or delay"),
    ],
)
def test_enqueue_rejects_bad_input_in_one_line_with_exit_2(run, committed, args, message):
    line = one_line_error(run("enqueue", *args), 2)
    assert message in line
    with committed.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Job)) == 0


def test_stats_prints_an_aligned_table_json_and_watches(run, committed):
    seed(committed, queue="mail")
    seed(committed, queue="mail", status="failed", attempts=1, age=10)
    seed(committed, queue="default", status="done", attempts=1, age=10)
    result = run("stats")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("table 'jobs' at ")
    header, *body = lines[1:]
    assert header.split() == [
        "queue", "pending", "due", "running", "expired", "done", "failed", "failed/1h",
        "cancelled", "retrying", "lag",
    ]  # fmt: skip
    assert [line.split()[0] for line in body] == ["default", "mail", "TOTAL"]
    assert len({len(line) for line in lines[1:]}) == 1  # right-aligned columns end together
    assert body[1].split()[1:10] == ["1", "1", "0", "0", "0", "1", "1", "0", "0"]
    data = json.loads(run("stats", "--json").stdout)
    assert data["total"]["failed_last_hour"] == 1
    assert [q["queue"] for q in data["queues"]] == ["default", "mail"]
    watched = run("stats", "--watch", "--json", "--count", "2", "--interval", "0.1")
    snapshots = [json.loads(line) for line in watched.stdout.splitlines()]
    assert [s["total"]["pending"] for s in snapshots] == [1, 1]


def test_jobs_list_filters_and_show_prints_everything(run, committed):
    error = "Traceback (most recent call last):\n  File x\nValueError: card declined"
    a = seed(
        committed, kind="charge", queue="pay", status="failed", attempts=3, age=5, last_error=error
    )
    b = seed(committed, kind="charge", queue="pay")
    seed(committed, kind="email", queue="mail")
    listed = run("jobs", "list", "--queue", "pay", "--status", "failed,pending")
    assert listed.exit_code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:4] == ["id", "queue", "kind", "status"]
    assert [line.split()[0] for line in lines[1:]] == [str(b), str(a)]
    assert "ValueError: card declined" in lines[2]
    as_json = json.loads(run("jobs", "list", "--kind", "email", "--json").stdout)
    assert [(j["kind"], j["queue"]) for j in as_json] == [("email", "mail")]
    assert len(json.loads(run("jobs", "list", "--limit", "2", "--json").stdout)) == 2
    assert run("jobs", "list", "--kind", "nothing").stdout.strip() == "no jobs match"
    assert "unknown status" in one_line_error(run("jobs", "list", "--status", "finished"), 2)

    shown = run("jobs", "show", str(a))
    assert shown.exit_code == 0, shown.stderr
    assert "status           failed" in shown.stdout
    assert "attempts         3 of 20" in shown.stdout
    assert "  File x" in shown.stdout  # last_error in full
    assert json.loads(run("jobs", "show", str(a), "--json").stdout)["last_error"] == error
    assert one_line_error(run("jobs", "show", "424242"), 1) == "sa-jobqueue: no job 424242"


def test_retry_by_id_and_by_failed_with_filters(run, committed):
    dead = seed(committed, status="failed", attempts=20, age=5, last_error="boom", queue="q1")
    pending = seed(committed)
    result = run("retry", str(dead), str(pending), "777777")
    assert result.exit_code == 1
    assert result.stdout.strip() == f"retried job {dead}"
    assert result.stderr.splitlines() == [
        f"sa-jobqueue: job {pending} is pending, not failed or cancelled; not retried",
        "sa-jobqueue: no job 777777",
    ]
    job = row(committed, dead)
    assert (job.status, job.max_attempts, job.last_error, job.finished_at) == (
        "pending",
        21,
        "boom",
        None,
    )

    in_q1 = seed(committed, status="failed", attempts=1, age=5, queue="q1", kind="a")
    in_q2 = seed(committed, status="failed", attempts=1, age=5, queue="q2", kind="a")
    out = run("retry", "--failed", "--queue", "q1", "--json")
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["ids"] == [in_q1]
    assert row(committed, in_q2).status == "failed"
    assert run("retry", "--failed", "--kind", "a").stdout.strip() == f"retried job {in_q2}"
    assert run("retry", "--failed").stdout.strip() == "no failed jobs match"
    assert "not both" in one_line_error(run("retry", str(dead), "--failed"), 2)
    assert "not both" in one_line_error(run("retry"), 2)
    assert "go with --failed" in one_line_error(run("retry", str(dead), "--queue", "q1"), 2)


def test_cancel_says_a_running_job_may_still_be_finishing(run, committed):
    waiting = seed(committed)
    running = seed(committed, status="running", attempts=1, locked_by="w")
    done = seed(committed, status="done", attempts=1, age=1)
    result = run("cancel", str(waiting), str(running), str(done))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"cancelled job {waiting}"
    assert "its handler may still be finishing" in result.stdout.splitlines()[1]
    assert "will not be retried" in result.stdout.splitlines()[1]
    assert (
        result.stderr.strip() == f"sa-jobqueue: job {done} is done, already finished; not cancelled"
    )
    assert {row(committed, i).status for i in (waiting, running)} == {"cancelled"}
    again = run("cancel", str(waiting), "--json")
    assert json.loads(again.stdout)["skipped"] == {str(waiting): "cancelled"}
    assert again.exit_code == 1
    assert "give job ids or --all" in one_line_error(run("cancel"), 2)


def test_prune_deletes_old_finished_jobs_only(run, committed):
    day = 86400
    old_done = [seed(committed, status="done", attempts=1, age=8 * day) for _ in range(3)]
    kept = [
        seed(committed, status="done", attempts=1, age=6 * day),
        seed(committed, status="failed", attempts=1, age=8 * day),
        seed(committed, finished_at=text("now() - interval '30 days'")),  # pending
    ]
    result = run("prune", "--older-than", "7d", "--status", "done", "--batch-size", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "deleted 3 jobs finished more than 7d ago (done 3) in 2 batches"
    with committed.connect() as conn:
        assert set(conn.scalars(select(Job.id))) == set(kept)
    assert old_done
    as_json = json.loads(run("prune", "--older-than", "7d", "--json").stdout)
    assert as_json["deleted"] == {"done": 0, "failed": 1, "cancelled": 0}
    assert "cannot be pruned" in one_line_error(
        run("prune", "--older-than", "1d", "--status", "running"), 2
    )
    assert "is not a duration" in one_line_error(run("prune", "--older-than", "soon"), 2)
    assert "Missing option '--older-than'" in one_line_error(run("prune"), 2)
    with committed.connect() as holder:
        holder.execute(statements.try_advisory_lock(Job, "prune"))
        holder.commit()
        line = one_line_error(run("prune", "--older-than", "0s"), 1)
        assert "another prune of table 'jobs' is running" in line
        holder.execute(statements.advisory_unlock(Job, "prune"))  # pooled: release it
        holder.commit()


def test_app_option_uses_the_applications_queue_and_task_defaults(run, committed):
    result = run(
        "enqueue", "app_task", '{"x": 1}', "--app", "tests.integration.cli.test_cli_ops:APP"
    )
    assert result.exit_code == 0, result.stderr
    job = row(committed, int(result.stdout))
    assert (job.queue, job.max_attempts) == ("app_q", 3)
    listed = json.loads(
        run("jobs", "list", "--app", "tests.integration.cli.test_cli_ops:APP", "--json").stdout
    )
    assert [j["id"] for j in listed] == [job.id]
    line = one_line_error(run("stats", "--app", "tests.integration.cli.test_cli_ops:NOPE"), 2)
    assert "has no attribute" in line


def test_database_problems_are_one_line_errors(run, database_url):
    assert one_line_error(run("stats", "--table", "no_such_table"), 1) == (
        "sa-jobqueue: table 'no_such_table' does not exist "
        "(run: sa-jobqueue migrate --table no_such_table)"
    )
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"
    line = one_line_error(run("jobs", "list", "--database-url", unreachable), 1)
    assert line.startswith("sa-jobqueue: cannot reach the database:")
    assert "must be letters" in one_line_error(run("stats", "--table", "jobs; drop"), 2)


@pytest.mark.slow
def test_the_installed_entry_point_exits_without_a_traceback(committed, database_url):
    env = {**os.environ, "DATABASE_URL": database_url}
    exe = os.path.join(os.path.dirname(sys.executable), "sa-jobqueue")
    done = subprocess.run(
        [exe, "jobs", "show", "424242"], capture_output=True, text=True, env=env, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "sa-jobqueue: no job 424242\n")
    enqueued = subprocess.run(
        [exe, "enqueue", "k", '{"a": 1}', "--delay", str(timedelta(0).total_seconds())],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert enqueued.returncode == 0, enqueued.stderr
    assert row(committed, int(enqueued.stdout)).payload == {"a": 1}


@pytest.mark.slow
def test_worker_command_prunes_with_the_given_retention(committed, database_url):
    import signal
    import time

    kept = seed(committed, status="failed", attempts=1, age=60)
    gone = seed(committed, status="done", attempts=1, age=60)
    assert "status must be among" in one_line_error(
        CliRunner().invoke(
            main,
            ["worker", "tests.support.apps.lesson:jobs", "--retention", "running=1d"],
            env={"DATABASE_URL": database_url},
        ),
        2,
    )
    args = ["--retention", "done=30s", "--prune-interval", "0.2", "--sweep-interval", "0.2"]
    exe = os.path.join(os.path.dirname(sys.executable), "sa-jobqueue")
    worker = subprocess.Popen(
        [exe, "worker", "tests.support.apps.lesson:jobs", *args],
        env={**os.environ, "DATABASE_URL": database_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with committed.connect() as conn:
                if conn.scalar(select(func.count()).where(Job.id == gone)) == 0:
                    break
            time.sleep(0.1)
        else:
            pytest.fail("the worker did not prune the old done job")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert row(committed, kept).status == "failed"
    assert "pruned 1 finished jobs (done 1)" in stderr
