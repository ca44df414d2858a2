"""`ops.short_reads`: the overview's and stats' statements run without JIT or parallel workers.

On PostgreSQL the settings hold inside the block and come back after it; on SQLite and
MariaDB (no per-transaction settings) the block runs the same statements, unchanged.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue.ops import admin
from sa_jobqueue.ops.short_reads import short_reads
from tests.support.models import Job

SETTINGS = "SELECT current_setting('jit'), current_setting('max_parallel_workers_per_gather')"


def test_short_reads_turn_jit_and_parallel_workers_off_inside_and_give_them_back(session):
    session.execute(text("SELECT set_config('jit', 'on', true)"))
    session.execute(text("SELECT set_config('max_parallel_workers_per_gather', '3', true)"))
    with short_reads(session, Job):
        assert tuple(session.execute(text(SETTINGS)).one()) == ("off", "0")
    assert tuple(session.execute(text(SETTINGS)).one()) == ("on", "3")


def test_stats_leave_the_callers_settings_as_they_were(session):
    session.execute(text("SELECT set_config('max_parallel_workers_per_gather', '3', true)"))
    admin.stats(session, Job)
    assert session.execute(text(SETTINGS)).one()[1] == "3"


@pytest.mark.parametrize("engine_name", ["sqlite_committed", "mariadb_committed"])
def test_short_reads_change_nothing_where_a_transaction_has_no_settings(request, engine_name):
    engine = request.getfixturevalue(engine_name)
    with Session(engine) as session, session.begin():
        with short_reads(session, Job):
            assert session.execute(text("SELECT 1")).scalar_one() == 1
        assert admin.stats(session, Job).queues == []
