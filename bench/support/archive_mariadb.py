"""`python -m bench archive --database mariadb`: the archive's move and retention on MariaDB.

In a scratch database (`scratch_mysql`, dropped afterwards), N ``done`` jobs finished
over one day (two days ago, UTC) are written with SQL (``seq_1_to_N``), then retained
away two ways: ``ops.retention.prune`` (batched DELETE of 1,000), and the archiver's
move (once per job, reported apart with its µs per job) then ``ALTER TABLE ...
DROP PARTITION`` of the day (`Archiver.expire`). Each is timed, with InnoDB's redo
written (``Innodb_os_log_written``, server-wide) and the table's size after ``ANALYZE``
(``information_schema.PARTITIONS``: data and index length). Results:
bench/archive-results.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, create_engine, text

from bench.support.app import Job
from bench.support.database import scratch_mysql
from sa_jobqueue.ops.archive import Archiver, archive_now
from sa_jobqueue.ops.retention import prune

__all__ = ["measure"]


def _fill(engine: Engine, n: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM jobs_archive"))
        conn.execute(text("DELETE FROM jobs"))
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, result, finished_at)"
                " SELECT 'noop', 'done', 1, JSON_OBJECT('i', seq), '{\"ok\": true}',"
                " DATE(UTC_TIMESTAMP()) - INTERVAL 2 DAY + INTERVAL (seq % 86400) SECOND"
                f" FROM seq_1_to_{int(n)}"
            )
        )
        conn.execute(text("ANALYZE TABLE jobs"))


def _redo(engine: Engine) -> int:
    with engine.connect() as conn:
        row = conn.execute(text("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'")).one()
    return int(row[1])


def _measured(engine: Engine, work: Callable[[], Any]) -> tuple[float, int]:
    before = _redo(engine)
    started = time.perf_counter()
    work()
    elapsed = time.perf_counter() - started
    return elapsed, _redo(engine) - before


def _size(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        conn.execute(text(f"ANALYZE TABLE {table}"))
        found = conn.execute(
            text(
                "SELECT sum(DATA_LENGTH + INDEX_LENGTH) FROM information_schema.PARTITIONS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
            ),
            {"t": table},
        ).scalar()
    return int(found or 0)


def measure(jobs: int, server: str) -> list[str]:
    """The table of the three ways, and the move's µs per job; printed lines."""
    rows = []
    with scratch_mysql(server, prefix="sa_jobqueue_bench_archive") as url:
        engine = create_engine(url)
        _fill(engine, jobs)
        seconds, redo = _measured(
            engine, lambda: prune(engine, Job, older_than=timedelta(days=1), batch_size=1000)
        )
        rows.append(("prune: batched DELETE", seconds, redo, _size(engine, "jobs")))

        _fill(engine, jobs)

        def move() -> None:
            with engine.connect() as conn:
                assert archive_now(conn, Job, after=timedelta(hours=1)) == jobs

        seconds, redo = _measured(engine, move)
        rows.append(("archive: the move (once per job)", seconds, redo, _size(engine, "jobs")))
        move_us = seconds / jobs * 1e6
        archiver = Archiver(Job, timedelta(hours=1), retention=timedelta(days=1))

        def expire() -> None:
            with engine.connect() as conn:
                assert archiver.expire(conn)

        seconds, redo = _measured(engine, expire)
        rows.append(("archive: DROP PARTITION", seconds, redo, _size(engine, "jobs_archive")))
        with engine.connect() as conn:
            left = conn.execute(text("SELECT count(*) FROM jobs_archive")).scalar_one()
            version = conn.execute(text("SELECT version()")).scalar_one()
        assert left == 0, left
        engine.dispose()
    lines = [
        f"MariaDB {version}; {jobs:,} done jobs finished over one day",
        "",
        "| way | seconds | InnoDB redo bytes (server-wide) | size after (table) |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds, redo, size in rows:
        lines.append(f"| {name} | {seconds:.3f} | {redo:,} | {size:,} |")
    lines += [
        "",
        f"The move: {move_us:.0f} µs per job. Partition drop against prune:"
        f" {rows[0][1] / rows[-1][1]:,.0f} times faster.",
    ]
    return lines
