"""The move reads a job's attempt history only where one can exist, and keeps every row."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext, JobQueue, Retry
from sa_jobqueue.ops.archive import archive_now
from sa_jobqueue.ops.workers import attempt_history
from sa_jobqueue.statements import archive as archive_sql
from sa_jobqueue.testing import drain
from tests.support.models import Job
from tests.support.processes import on_databases

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
with_partitions = on_databases("postgresql", "mariadb")


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _archived(engine: Engine, job_id: int) -> dict[str, Any]:
    with engine.connect() as connection:
        row = connection.execute(
            text(
                "SELECT status, attempts, has_steps, steps, errors FROM jobs_archive WHERE id = :id"
            ),
            {"id": job_id},
        ).one()
    return {
        "status": row.status,
        "attempts": row.attempts,
        "has_steps": row.has_steps,
        "steps": _json(row.steps),
        "errors": _json(row.errors),
    }


def _enqueue(engine: Engine, jobs: JobQueue[Job], kind: str) -> int:
    with Session(engine) as session, session.begin():
        return int(jobs.enqueue(session, kind, {}).id)


def _due_now(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(update(Job).values(run_at=Job.created_at))


def _finished_hours_ago(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            update(Job).where(Job.finished_at.is_not(None)).values(finished_at=Job.created_at)
        )
        connection.execute(
            text(
                "UPDATE jobs SET finished_at = finished_at - INTERVAL 2 HOUR"
                if connection.dialect.name == "mariadb"
                else "UPDATE jobs SET finished_at = finished_at - interval '2 hours'"
            )
        )


@with_partitions
def test_a_retried_jobs_history_moves_whole_and_a_first_try_jobs_stays_null(archived):
    # The history's rows as the worker writes them: a failure, a Retry, then done; a
    # Discard; and beside them jobs done at their first attempt (history skipped), one
    # of them by a transactional handler whose step rows leave `has_steps` unmarked.
    jobs: JobQueue[Job] = JobQueue(Job)

    @jobs.task("flaky")
    def flaky(ctx: JobContext) -> int:
        if ctx.attempt == 1:
            raise RuntimeError("boom")
        if ctx.attempt == 2:
            raise Retry(delay=0)
        return ctx.attempt

    @jobs.task("doomed")
    def doomed(ctx: JobContext) -> None:
        raise Discard("no")

    jobs.task("plain")(lambda ctx: 1)

    @jobs.task("tx", transactional=True)
    def tx(ctx: JobContext) -> int:
        return int(ctx.step("n", lambda: 7))

    ids = {kind: _enqueue(archived, jobs, kind) for kind in ("flaky", "doomed", "plain", "tx")}
    for _ in range(3):
        drain(jobs, archived)
        _due_now(archived)
    with archived.connect() as connection:
        before = {
            kind: [(h.attempt, h.worker, h.error) for h in attempt_history(connection, Job, job)]
            for kind, job in ids.items()
        }
    assert [entry[0] for entry in before["flaky"]] == [1, 2]
    assert len(before["doomed"]) == 1
    assert before["plain"] == before["tx"] == []
    _finished_hours_ago(archived)

    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 4

    flaky_row = _archived(archived, ids["flaky"])
    assert (flaky_row["status"], flaky_row["attempts"]) == ("done", 3)
    assert [(e["attempt"], e["worker"], e["error"]) for e in flaky_row["errors"]] == before["flaky"]
    doomed_row = _archived(archived, ids["doomed"])
    assert (doomed_row["status"], doomed_row["attempts"]) == ("failed", 1)
    assert [(e["attempt"], e["worker"], e["error"]) for e in doomed_row["errors"]] == before[
        "doomed"
    ]
    assert _archived(archived, ids["plain"])["errors"] is None  # as before the skip
    tx_row = _archived(archived, ids["tx"])
    assert (tx_row["errors"], tx_row["has_steps"]) == (None, None)
    # Its step row is kept though the job is not marked has_steps: the steps' read is
    # not skipped on that mark (a transactional handler's records never set it).
    assert [(s["name"], s["result"]) for s in tx_row["steps"]] == [("n", 7)]


def test_the_move_never_reads_the_history_of_a_job_done_at_its_first_attempt(archived):
    # PostgreSQL's plan: the history's subplan runs for no row of a batch of such jobs
    # (the move read its index once per job: about 1 µs each, bench/drain-beside-results.md).
    with archived.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, finished_at)"
                " SELECT 'k', 'done', 1, '{}', now() - interval '3 hours' + n * interval '1 ms'"
                " FROM generate_series(1, 50) AS n"
            )
        )
        connection.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, finished_at)"
                " VALUES ('k', 'done', 2, '{}', now() - interval '2 hours')"
            )
        )
        compiled = archive_sql.archive_move(Job).compile(dialect=connection.dialect)
        low, high = connection.execute(
            text("SELECT min(finished_at), max(finished_at) + interval '1 ms' FROM jobs")
        ).one()
        now = connection.execute(text("SELECT now()")).scalar_one()
        day = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
        connection.execute(
            archive_sql.archive_create_partition(Job, "jobs_archive_p_test", day, day + 3 * DAY)
        )
        params = compiled.construct_params({"before": now, "low": low, "high": high, "limit": 100})
        plan = connection.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + str(compiled), params
        ).scalar_one()
        connection.rollback()
    document = plan if isinstance(plan, list) else json.loads(plan)
    loops = dict(_relation_loops(document[0]["Plan"]))
    assert loops["sa_jobqueue_errors_jobs"] == 1, loops  # the job of two attempts only
    assert loops["sa_jobqueue_steps_jobs"] == 51, loops  # the steps: every job


def _relation_loops(plan: dict[str, Any]) -> list[tuple[str, int]]:
    found = []
    if "Relation Name" in plan and plan["Node Type"] != "ModifyTable":
        found.append((plan["Relation Name"], int(plan.get("Actual Loops", 0))))
    for child in plan.get("Plans", []):
        found += _relation_loops(child)
    return found
