"""The operator's repairs on every database: retry, retry_failed, delete and a bulk action.

The same rows (plain Core inserts) give the same `Changed` on PostgreSQL, a SQLite
file and MariaDB (ids ``[postgresql]``, ``[sqlite]``, ``[mariadb]``); on SQLite and
MariaDB each repair is a locking read then a change by id (`statements.repairs`).
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from click.testing import CliRunner
from sqlalchemy import Table, func, insert, select
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.cli import main
from sa_jobqueue.ops import admin, bulk
from sa_jobqueue.statements import workflows
from sa_jobqueue.statements.cascades import cascading_columns
from tests.support.models import Job

JOBS = cast(Table, Job.__table__)

COMMITTED = {
    "postgresql": "committed",
    "sqlite": "sqlite_committed",
    "mariadb": "mariadb_committed",
}


@pytest.fixture(params=sorted(COMMITTED))
def engine_of(request):
    return request.getfixturevalue(COMMITTED[request.param])


def _insert(engine, **columns: Any) -> int:
    with Session(engine) as session, session.begin():
        now = session.execute(statements.db_now()).scalar_one()
        row = {"kind": "k", "queue": "mail", "payload": {}, "run_at": now, **columns}
        if row["status"] in ("done", "failed", "cancelled"):
            row.setdefault("finished_at", now)
        return session.execute(insert(Job).returning(Job.id), [row]).scalar_one()


def _row(engine, job_id: int) -> Any:
    with Session(engine) as session:
        return session.execute(select(Job.__table__).where(Job.id == job_id)).one()


def test_retry_puts_a_failed_job_back_with_one_more_attempt_and_skips_the_others(engine_of):
    failed = _insert(engine_of, status="failed", attempts=3, max_attempts=3, last_error="boom")
    done = _insert(engine_of, status="done", attempts=1)
    with Session(engine_of) as session, session.begin():
        result = admin.retry(session, Job, [failed, done, 10**9])
    assert (result.ids, result.skipped, result.missing) == ([failed], {done: "done"}, [10**9])
    row = _row(engine_of, failed)
    assert (row.status, row.max_attempts, row.attempts, row.last_error) == (
        "pending",
        4,
        3,
        "boom",
    )
    assert (row.finished_at, row.locked_until) == (None, None)
    assert _row(engine_of, done).status == "done"


def test_a_retried_dependent_waits_again_for_its_unfinished_upstream_job(engine_of):
    upstream = _insert(engine_of, status="running", attempts=1)
    dependent = _insert(engine_of, status="cancelled", attempts=0)
    with engine_of.begin() as conn:
        conn.execute(
            insert(workflows.edges_of(Job)), [{"job_id": dependent, "upstream_id": upstream}]
        )
    with Session(engine_of) as session, session.begin():
        result = admin.retry(session, Job, [dependent])
    assert (result.ids, result.waiting) == ([dependent], [dependent])
    row = _row(engine_of, dependent)
    assert (row.status, row.waiting_for) == ("waiting", 1)


def test_retry_failed_retries_every_failed_job_of_a_queue(engine_of):
    mail = _insert(engine_of, status="failed", attempts=1, max_attempts=5)
    other = _insert(engine_of, status="failed", queue="other", attempts=1)
    cancelled = _insert(engine_of, status="cancelled")
    with Session(engine_of) as session, session.begin():
        result = admin.retry_failed(session, Job, queue="mail")
    assert (result.ids, result.skipped, result.missing) == ([mail], {}, [])
    assert _row(engine_of, mail).max_attempts == 5  # enough attempts left: unchanged
    assert [_row(engine_of, i).status for i in (mail, other, cancelled)] == [
        "pending",
        "failed",
        "cancelled",
    ]


def test_delete_removes_finished_jobs_but_keeps_one_that_a_job_waits_for(engine_of):
    done = _insert(engine_of, status="done")
    awaited = _insert(engine_of, status="failed")
    pending = _insert(engine_of, status="pending")
    waiting = _insert(engine_of, status="waiting", waiting_for=1)
    with engine_of.begin() as conn:
        conn.execute(insert(workflows.edges_of(Job)), [{"job_id": waiting, "upstream_id": awaited}])
    with Session(engine_of) as session, session.begin():
        result = admin.delete_finished(session, Job, [done, awaited, pending])
    assert result.ids == [done]
    assert result.skipped == {pending: "pending"}
    assert result.awaited == {awaited: [waiting]}
    with Session(engine_of) as session:
        left = set(session.execute(select(Job.id)).scalars())
    assert left == {awaited, pending, waiting}


def test_delete_leaves_no_row_that_referenced_the_job(engine_of):
    # SQLite cascades only under PRAGMA foreign_keys (off here, as by default): a
    # step left behind would be read as recorded by a later job given the same id.
    done = _insert(engine_of, status="done")
    upstream = _insert(engine_of, status="done")
    columns = {c.table.name.split("_")[2]: c for c in cascading_columns(JOBS)}
    with engine_of.begin() as conn:
        conn.execute(insert(workflows.edges_of(Job)), [{"job_id": done, "upstream_id": upstream}])
        rows = {
            "steps": {"job_id": done, "name": "one", "kind": "step", "attempt": 1},
            "signal": {"job_id": done, "name": "ping"},
            "errors": {"job_id": done, "id": 1, "attempt": 1, "error": "boom"},
        }
        for name, values in rows.items():
            conn.execute(insert(columns[name].table), [values])

    def referencing() -> int:
        with engine_of.connect() as conn:
            return sum(
                conn.execute(
                    select(func.count()).select_from(c.table).where(c.in_([done, upstream]))
                ).scalar_one()
                for c in cascading_columns(JOBS)
            )

    assert referencing() == 5  # the edge counts twice: it names both jobs
    with Session(engine_of) as session, session.begin():
        assert admin.delete_finished(session, Job, [done, upstream]).ids == sorted([done, upstream])
    assert referencing() == 0


def test_a_bulk_retry_by_filter_and_a_bulk_delete_by_ids(engine_of):
    failed = [_insert(engine_of, status="failed", attempts=1) for _ in range(3)]
    other = _insert(engine_of, status="failed", kind="other", attempts=1)
    with Session(engine_of) as session:
        counted = bulk.count(session, Job, "retry", match=bulk.Match(kind="k"))
    assert counted.changed == 3
    result = bulk.apply(engine_of, Job, "retry", match=bulk.Match(kind="k"), batch_size=2)
    assert (result.changed, result.batches) == (3, 2)
    assert [_row(engine_of, i).status for i in [*failed, other]] == [
        "pending",
        "pending",
        "pending",
        "failed",
    ]
    deleted = bulk.apply(engine_of, Job, "delete", ids=[*failed, other])
    assert (deleted.changed, deleted.skipped) == (1, {"pending": 3})


def test_the_command_line_retries_on_a_sqlite_file(sqlite_committed, sqlite_url):
    # (The command line has no ``jobs delete``: deleting by id is `JobQueue`'s and the dashboard's.)
    first = _insert(sqlite_committed, status="failed", attempts=1)
    second = _insert(sqlite_committed, status="failed", attempts=1)
    env = {"DATABASE_URL": sqlite_url}
    retried = CliRunner().invoke(main, ["retry", str(first), "--json"], env=env)
    assert retried.exit_code == 0, retried.output
    assert json.loads(retried.output)["ids"] == [first]
    counted = CliRunner().invoke(main, ["retry", "--all", "--dry-run", "--json"], env=env)
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.output)["changed"] == 1
    every = CliRunner().invoke(main, ["retry", "--failed", "--json"], env=env)
    assert every.exit_code == 0, every.output
    assert json.loads(every.output)["ids"] == [second]
    assert [_row(sqlite_committed, i).status for i in (first, second)] == ["pending", "pending"]


def test_retry_with_dependents_lets_the_jobs_its_failure_cancelled_wait_again(engine_of):
    failed = _insert(engine_of, status="failed", attempts=1)
    why = f"cancelled: upstream job {failed} failed"
    child = _insert(engine_of, status="cancelled", last_error=why)
    grandchild = _insert(
        engine_of, status="cancelled", last_error=f"cancelled: upstream job {child}"
    )
    edges = [{"job_id": child, "upstream_id": failed}, {"job_id": grandchild, "upstream_id": child}]
    with engine_of.begin() as conn:
        conn.execute(insert(workflows.edges_of(Job)), edges)
    with Session(engine_of) as session, session.begin():
        result = admin.retry(session, Job, [failed], with_dependents=True)
    assert (result.ids, result.revived, result.waiting) == ([failed], [child, grandchild], [])
    rows = [_row(engine_of, i) for i in (failed, child, grandchild)]
    assert [(r.status, r.waiting_for) for r in rows] == [
        ("pending", None),
        ("waiting", 1),
        ("waiting", 1),
    ]
    assert rows[1].finished_at is None


def test_the_payload_filters_of_bulk_actions_select_the_same_jobs_on_every_database(engine_of):
    payloads = [{"to": "a"}, {"to": "b"}, {"cc": "a"}, {"to": "a", "n": {"x": 1}}, {}]
    ids = [_insert(engine_of, status="failed", attempts=1, payload=p) for p in payloads]
    by_key, by_value = bulk.Match(payload_key="to"), bulk.Match(payload_value={"to": "a"})
    with Session(engine_of) as session:
        assert bulk.count(session, Job, "retry", match=by_key).changed == 3
        assert bulk.count(session, Job, "retry", match=by_value).changed == 2
    assert bulk.apply(engine_of, Job, "retry", match=by_value).changed == 2
    assert [_row(engine_of, i).status for i in ids] == [
        "pending",
        "failed",
        "failed",
        "pending",
        "failed",
    ]
