"""`ops.counts.status_totals` with the live counts the overview already has: not counted twice."""

from __future__ import annotations

from sqlalchemy import insert, text

from sa_jobqueue.dashboard import queries
from sa_jobqueue.ops.counts import status_totals
from tests.support.models import Job


def _fill(session):
    rows = [
        {"kind": "k", "queue": queue, "status": status, "payload": {}}
        for queue, status, n in (
            ("mail", "pending", 3),
            ("pdf", "pending", 2),
            ("mail", "running", 1),
        )
        for _ in range(n)
    ]
    session.execute(insert(Job), rows)
    session.execute(text("ANALYZE jobs"))


def test_a_big_tables_totals_take_pending_and_running_from_the_callers_live_counts(session):
    _fill(session)
    totals = status_totals(session, Job, exact_below=0, live={"pending": 40, "running": 2})
    assert (totals.counts["pending"], totals.counts["running"]) == (40, 2)
    assert not totals.exact
    assert "pending" not in totals.estimated


def test_the_overviews_totals_are_the_sums_of_its_queues_and_match_a_count(session):
    _fill(session)
    counted = status_totals(session, Job, exact_below=0)
    assert (counted.counts["pending"], counted.counts["running"]) == (5, 1)
    page = queries.overview(session, Job)
    assert page.totals is not None
    assert page.totals.counts["pending"] == page.total.pending == 5
    assert page.totals.counts["running"] == page.total.running == 1
