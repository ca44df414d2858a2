"""The archiver's statements cost a batch its rows, not a read of the whole jobs table."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from sa_jobqueue.driver.mysql.archive import MariadbArchive
from sa_jobqueue.statements import archive as archive_sql
from tests.support.models import Job
from tests.support.processes import on_databases


def _scans(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (node type, relation) of `plan` and its children, subplans included."""
    found = [(plan["Node Type"], plan.get("Relation Name", ""))]
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _plan(engine: Engine, statement: Any, params: dict[str, Any]) -> list[tuple[str, str]]:
    with engine.connect() as connection:
        compiled = statement.compile(dialect=connection.dialect)
        row = connection.exec_driver_sql(
            "EXPLAIN (FORMAT JSON) " + str(compiled), compiled.construct_params(params)
        ).scalar_one()
    document = row if isinstance(row, list) else json.loads(row)
    return _scans(document[0]["Plan"])


def test_the_oldest_probe_and_the_move_walk_the_finished_index_beside_many_finished_jobs(
    archived,
):
    # 20,000 finished jobs, analysed; the workflow edges empty (an app without
    # workflows). min() over the archivable rows read every one of them, per batch:
    # 4.8 s beside 10,000,000 (bench/drain-beside-results.md).
    with archived.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, finished_at)"
                " SELECT 'k', 'done', 1, '{}', now() - interval '3 hours' + n * interval '1 ms'"
                " FROM generate_series(1, 20000) AS n"
            )
        )
    with archived.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("ANALYZE jobs"))
    now = datetime.now(UTC)
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    bounds = {"before": now - timedelta(hours=1), "low": epoch, "high": now, "limit": 10}

    oldest = _plan(archived, archive_sql.archive_oldest(Job), bounds)
    move = _plan(archived, archive_sql.archive_move(Job), bounds)

    for plan in (oldest, move):
        assert ("Seq Scan", "jobs") not in plan, plan
        assert ("Index Scan", "jobs") in plan, plan
    assert oldest[0][0] == "Limit"  # stops at the first archivable row


def test_the_archivers_transaction_has_no_jit_and_a_lock_timeout(archived):
    # A batch's planned cost passes jit_above_cost: compiling took 34 ms of a 98 ms batch.
    with archived.begin() as connection:
        connection.execute(archive_sql.lock_timeout_local())
        assert connection.execute(text("SHOW jit")).scalar_one() == "off"
        assert connection.execute(text("SHOW lock_timeout")).scalar_one() == "5s"
    with archived.connect() as connection:  # local to that transaction
        assert connection.execute(text("SHOW lock_timeout")).scalar_one() == "0"


def _mariadb_rows_read(document: Any) -> list[tuple[str, float]]:
    """(table, rows it read) of every table access of a MariaDB ``ANALYZE FORMAT=JSON``."""
    found: list[tuple[str, float]] = []
    if isinstance(document, dict):
        if "table_name" in document and "r_rows" in document:
            loops = float(document.get("r_loops", 1) or 1)
            found.append((document["table_name"], loops * float(document["r_rows"] or 0)))
        for value in document.values():
            found += _mariadb_rows_read(value)
    elif isinstance(document, list):
        for value in document:
            found += _mariadb_rows_read(value)
    return found


@on_databases("mariadb")
def test_mariadbs_oldest_probe_stops_at_the_first_archivable_row(archived):
    # As PostgreSQL's: min() over the archivable rows read every finished row of the
    # range, per batch; ORDER BY finished_at LIMIT 1 walks ix_jobs_finished to the first.
    with archived.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, finished_at)"
                " SELECT 'k', 'done', 1, '{}', now(6) - INTERVAL 3 HOUR + INTERVAL seq MICROSECOND"
                " FROM seq_1_to_20000"
            )
        )
        connection.execute(text("ANALYZE TABLE jobs"))
    now = datetime.now(UTC).replace(tzinfo=None)
    bounds = {"before": now - timedelta(hours=1), "low": datetime(2000, 1, 1), "high": now}
    with archived.connect() as connection:
        oldest = MariadbArchive(Job)._oldest
        compiled = oldest.compile(dialect=connection.dialect)
        params: Any = compiled.construct_params(bounds)
        if compiled.positiontup:  # a driver of positional parameters (mysqlclient's %s)
            params = tuple(params[name] for name in compiled.positiontup)
        row = connection.exec_driver_sql("ANALYZE FORMAT=JSON " + str(compiled), params).one()
        assert MariadbArchive(Job).oldest(connection, bounds) is not None
    read = dict(_mariadb_rows_read(json.loads(row[0])))
    assert read["j"] <= 10, read
