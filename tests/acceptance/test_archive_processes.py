"""The archiver in a real worker process, killed with kill -9 in the middle of a move.

Old finished jobs are written with SQL; a worker started with ``--archive-after 1s``
moves them in batches; it is killed (SIGKILL) while a move statement runs. Counted by
SQL across the jobs table and its archive, no job is lost or in both; a second worker
finishes the move (docs/operations.md#archive-and-retention). On PostgreSQL and MariaDB
(there a batch is a transaction of three statements, the kill lands inside it).
"""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import Engine, text

from tests.integration.archive.conftest import drop_partitions
from tests.support.archive import counts
from tests.support.helpers import wait_for
from tests.support.processes import Processes, on_databases

pytestmark = pytest.mark.slow
APP = "tests.support.apps.flow:jobs"
JOBS = 50_000


#: What a move looks like while it runs, per database.
_MOVE = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
    " AND query LIKE 'WITH old AS%' AND pid <> pg_backend_pid()"
    " AND datname = current_database()",
    # The batch's SELECT ... FOR UPDATE, its INSERT ... SELECT or its DELETE.
    "mariadb": "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
    " AND DB = DATABASE()"
    " AND (INFO LIKE 'INSERT INTO `jobs_archive`%' OR INFO LIKE 'DELETE FROM `jobs` WHERE id IN%'"
    " OR INFO LIKE 'SELECT j.id FROM `jobs` j%')",
}

#: `JOBS` old finished jobs, per database.
_OLD_JOBS = {
    "postgresql": "INSERT INTO jobs (kind, status, attempts, finished_at)"
    " SELECT 'k', (ARRAY['done', 'failed', 'cancelled'])[1 + n % 3], 1,"
    " now() - interval '2 days' + n * interval '1 second'"
    " FROM generate_series(1, :n) AS n",
    "mariadb": "INSERT INTO jobs (kind, status, attempts, finished_at)"
    " SELECT 'k', ELT(1 + seq % 3, 'done', 'failed', 'cancelled'), 1,"
    " UTC_TIMESTAMP(6) - INTERVAL 2 DAY + INTERVAL seq SECOND FROM seq_1_to_50000"
    " WHERE seq <= :n",
}


def _moving(engine: Engine) -> bool:
    with engine.connect() as connection:
        return bool(connection.execute(text(_MOVE[connection.dialect.name])).scalar())


@on_databases("postgresql", "mariadb")
def test_a_worker_killed_mid_move_loses_and_duplicates_no_job(
    processes: Processes, committed: Engine, database: str
) -> None:
    drop_partitions(committed)
    with committed.begin() as connection:
        connection.execute(text(_OLD_JOBS[database]), {"n": JOBS})
    archiving = ("--archive-after", "1s", "--sweep-interval", "0.5")
    worker = processes.worker(APP, *archiving, ready_timeout=60.0)
    caught = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not caught:
        caught = _moving(committed)
    assert caught, "no move statement seen running"
    worker.signal(signal.SIGKILL)
    worker.wait()
    with committed.connect() as connection:
        live, archived = counts(connection)
        both = connection.execute(
            text("SELECT count(*) FROM jobs j JOIN jobs_archive a ON a.id = j.id")
        ).scalar_one()
    assert live + archived == JOBS
    assert both == 0
    assert live > 0  # killed before the end

    processes.worker(APP, *archiving, ready_timeout=60.0)

    def finished() -> bool:
        with committed.connect() as connection:
            return counts(connection) == (0, JOBS)

    wait_for(finished, timeout=120, what="the second worker to archive every job")
    with committed.connect() as connection:
        distinct = connection.execute(
            text("SELECT count(DISTINCT id) FROM jobs_archive")
        ).scalar_one()
    assert distinct == JOBS
    processes.stop_all()
    drop_partitions(committed)
