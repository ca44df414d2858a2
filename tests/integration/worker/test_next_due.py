"""The next-due probe walks the pending index by level and answers what min(run_at) does."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from sa_jobqueue.driver.postgres import PostgresDriver, claims
from tests.support.models import Job

ROWS = """
INSERT INTO jobs (queue, kind, payload, status, priority, run_at) VALUES
  ('mail', 'k', '{}', 'pending', 0, now() + interval '1 hour'),
  ('mail', 'k', '{}', 'pending', 5, now() + interval '2 minutes'),
  ('mail', 'k', '{}', 'pending', -3, now() + interval '3 hours'),
  ('mail', 'k', '{}', 'done', 9, now() - interval '1 day'),
  ('mail', 'k', '{}', 'running', 0, now() - interval '1 day'),
  ('pdf', 'k', '{}', 'pending', 1, now() - interval '5 seconds'),
  ('pdf', 'k', '{}', 'failed', 1, now() - interval '9 days'),
  ('empty', 'k', '{}', 'cancelled', 0, now())
"""

REFERENCE = text(
    "SELECT EXTRACT(epoch FROM min(run_at) - now()) FROM jobs "
    "WHERE status = 'pending' AND queue = ANY(:queues)"
)


@pytest.mark.parametrize(
    "queues",
    [
        ["mail"],
        ["pdf"],
        ["mail", "pdf"],
        ["empty"],
        ["nothing", "mail"],
        [f"q{i}" for i in range(claims.LEVEL_WALK_MAX_QUEUES)] + ["mail"],  # the walk
        [f"q{i}" for i in range(claims.LEVEL_WALK_MAX_QUEUES + 5)] + ["mail"],  # the min
    ],
    ids=["one", "due", "two", "none pending", "unknown", "walk at the limit", "many"],
)
def test_the_probe_finds_the_earliest_pending_run_at_of_its_queues(session, queues):
    session.execute(text(ROWS))
    driver = PostgresDriver(Job, leases={}, default_lease=300.0)
    got = driver.queue_next_due(session.connection(), queues)
    want = session.execute(REFERENCE, {"queues": queues}).scalar()
    if want is None:
        assert got.seconds is None
    else:
        assert got.seconds == pytest.approx(float(want), abs=1e-6)


def test_a_later_priority_level_with_an_earlier_run_at_is_found(session):
    # Priority 7 holds the earliest run_at although priority 0 comes first in claim order.
    session.execute(
        text(
            "INSERT INTO jobs (queue, kind, payload, priority, run_at) VALUES "
            "('q', 'k', '{}', 0, now() + interval '10 minutes'), "
            "('q', 'k', '{}', 7, now() + interval '1 minute')"
        )
    )
    got = PostgresDriver(Job, leases={}, default_lease=300.0).queue_next_due(
        session.connection(), ["q"]
    )
    assert got.seconds == pytest.approx(60, abs=1)
