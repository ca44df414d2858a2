"""The overview's and stats' live statements bind no status, number or window.

psycopg prepares a statement after a few runs, and PostgreSQL may then plan it once
for any parameters (a generic plan): a bound status can no longer prove a partial
index's predicate, and `passed_over` became a scan of the whole table (0.3 s on
1 M rows). Written into the SQL as literals, they keep their index plans.
"""

from __future__ import annotations

import pytest
from sqlalchemy.dialects.postgresql import psycopg

from sa_jobqueue import statements
from tests.support.models import Job


@pytest.mark.parametrize(
    ("name", "bound"),
    [("passed_over", {"window"}), ("pending_summary", set()), ("running_summary", set())],
)
def test_live_statements_write_their_statuses_into_the_sql(name, bound):
    compiled = getattr(statements, name)(Job).compile(dialect=psycopg.dialect())
    assert {k for k, v in compiled.binds.items() if not v.literal_execute} == set()
    assert (
        set(compiled.params) - {k for k, v in compiled.binds.items() if v.literal_execute} == set()
    )
    # Only the caller's values (the window) are left for execution time, inlined then too.
    assert {k for k, v in compiled.binds.items() if v.value is None} == bound
