"""Bulk retry, cancel and delete (`ops.bulk`): by ids or by filter, in batches, with dry runs."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError
from sa_jobqueue.ops import bulk
from sa_jobqueue.ops.bulk import Match
from tests.support.models import Job

FILL = """
INSERT INTO jobs (queue, kind, status, attempts, max_attempts, last_error, finished_at,
                  locked_by, locked_until)
SELECT :queue, :kind, :status, 1, 1, :error,
       CASE WHEN :status IN ('done', 'failed', 'cancelled') THEN now() END,
       CASE WHEN :status = 'running' THEN 'w1' END,
       CASE WHEN :status = 'running' THEN now() + interval '5 minutes' END
FROM generate_series(1, :n)
"""


def fill(engine, n: int, status: str, *, queue: str = "q", kind: str = "k", error: str = "boom"):
    with engine.begin() as conn:
        conn.execute(
            text(FILL), {"n": n, "status": status, "queue": queue, "kind": kind, "error": error}
        )


def counts(engine) -> dict[tuple[str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT queue, status, count(*) FROM jobs GROUP BY 1, 2"))
        return {(queue, status): n for queue, status, n in rows}


def ids_of(engine, status: str) -> list[int]:
    with engine.connect() as conn:
        query = text("SELECT id FROM jobs WHERE status = :s ORDER BY id")
        return list(conn.execute(query, {"s": status}).scalars())


def test_retry_all_matching_a_filter_goes_in_batches_and_reports_each(committed):
    fill(committed, 2500, "failed", queue="mail")
    fill(committed, 10, "failed", queue="pdf")
    fill(committed, 5, "done", queue="mail")
    seen: list[int] = []
    result = bulk.apply(
        committed, Job, "retry", match=Match(queue="mail"), batch_size=1000, progress=seen.append
    )
    assert (result.changed, result.batches, seen) == (2500, 3, [1000, 1000, 500])
    assert counts(committed) == {
        ("mail", "pending"): 2500,
        ("pdf", "failed"): 10,
        ("mail", "done"): 5,
    }


def test_a_dry_run_counts_what_would_change_and_changes_nothing(committed):
    fill(committed, 30, "failed", kind="a", error="SMTP timed out")
    fill(committed, 20, "failed", kind="a", error="ValueError")
    fill(committed, 7, "cancelled", kind="a")
    fill(committed, 4, "running", kind="a")
    with Session(committed) as session:
        assert bulk.count(session, Job, "retry", match=Match(kind="a")).changed == 57
        smtp = Match(kind="a", error="smtp")
        assert bulk.count(session, Job, "retry", match=smtp).changed == 30
        assert bulk.count(session, Job, "cancel", match=Match(kind="a")).changed == 4
        assert bulk.count(session, Job, "delete", match=Match(status="cancelled")).changed == 7
    assert counts(committed)[("q", "failed")] == 50
    result = bulk.apply(committed, Job, "retry", match=Match(kind="a", error="smtp"))
    assert result.changed == 30
    assert counts(committed)[("q", "failed")] == 20


def test_by_ids_reports_the_ones_left_alone_by_status_and_the_missing(committed):
    fill(committed, 3, "failed")
    fill(committed, 2, "running")
    failed, running = ids_of(committed, "failed"), ids_of(committed, "running")
    wanted = [*failed, *running, 999_999]
    with Session(committed) as session:
        dry = bulk.count(session, Job, "retry", ids=wanted)
    assert (dry.changed, dry.skipped, dry.missing, dry.dry_run) == (3, {"running": 2}, 1, True)
    result = bulk.apply(committed, Job, "retry", ids=wanted, batch_size=2)
    assert (result.changed, result.skipped, result.missing, result.batches) == (
        3,
        {"running": 2},
        1,
        3,
    )
    assert ids_of(committed, "pending") == failed


def test_cancel_by_filter_counts_the_running_jobs_it_took(committed):
    fill(committed, 3, "running", queue="mail")
    fill(committed, 4, "pending", queue="mail")
    result = bulk.apply(committed, Job, "cancel", match=Match(queue="mail"))
    assert (result.changed, result.was_running) == (7, 3)
    assert counts(committed) == {("mail", "cancelled"): 7}


def test_delete_by_filter_deletes_finished_jobs_only(committed):
    fill(committed, 5, "done")
    fill(committed, 5, "pending")
    result = bulk.apply(committed, Job, "delete", match=Match(), batch_size=2)
    assert (result.changed, result.batches) == (5, 3)
    assert counts(committed) == {("q", "pending"): 5}


def test_jobs_enqueued_while_a_bulk_action_walks_are_left_alone(committed):
    fill(committed, 5, "failed")

    def enqueue_another(_: int) -> None:
        fill(committed, 1, "failed", queue="late")

    result = bulk.apply(
        committed, Job, "retry", match=Match(), batch_size=2, progress=enqueue_another
    )
    assert result.changed == 5
    assert counts(committed) == {("q", "pending"): 5, ("late", "failed"): 3}


@pytest.mark.parametrize(
    ("action", "options", "message"),
    [
        ("retry", {"match": Match(status="lost")}, "status must be one of pending"),
        ("retry", {"match": Match(status="running")}, "cannot retry running jobs"),
        ("delete", {"match": Match(status="pending")}, "cannot delete pending jobs"),
        ("cancel", {"match": Match(status="done")}, "cannot cancel done jobs"),
        ("retry", {"ids": []}, "no job ids given"),
        ("retry", {}, "give job ids or a filter"),
        ("retry", {"ids": [1], "match": Match()}, "give job ids or a filter"),
        ("retry", {"ids": ["7"]}, "job ids must be ints"),
        ("requeue", {"match": Match()}, "bulk action must be one of retry, cancel, delete"),
        ("retry", {"match": Match(), "batch_size": 0}, "batch_size must be a positive int"),
    ],
)
def test_bad_bulk_requests_get_a_clear_error(committed, action, options, message):
    fill(committed, 2, "failed")
    with pytest.raises(ConfigurationError, match=message):
        bulk.apply(committed, Job, action, **options)
    if "batch_size" not in options:
        with Session(committed) as session, pytest.raises(ConfigurationError, match=message):
            bulk.count(session, Job, action, **options)
    assert counts(committed) == {("q", "failed"): 2}
