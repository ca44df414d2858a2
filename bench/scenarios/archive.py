"""Retention of a day of finished jobs: a partition drop against today's batched DELETE.

Usage: ``python -m bench archive [--jobs N] [--own-server] [--database mariadb]``.

In a scratch database (dropped afterwards), N ``done`` jobs finished over one day (two
days ago, UTC) are written with SQL, then retained away two ways, each measured by
wall time and WAL bytes (``pg_current_wal_lsn()`` before and after, on the same
server), then ``VACUUM`` and the table's size and dead tuples:

- prune: ``ops.retention.prune`` deletes them in batches of 1,000 (today's way);
- archive: the archiver moves them into ``jobs_archive`` (its own cost, once per job,
  reported apart), then the retention detaches (``CONCURRENTLY``) and drops the
  day's partition.

Results: bench/archive-results.md. The machine's PostgreSQL runs with autovacuum off
(printed): the VACUUM here is explicit. With ``--own-server`` the run starts a throwaway
PostgreSQL with autovacuum on (`bench.support.database.autovacuum_server`), as production
runs, measures there (its WAL is this run's alone) and writes
bench/archive-1m-results.md; at 1,000,000 jobs it checks issue 43's target (the drop
<= 1 s). With ``--database mariadb`` the same on MariaDB (``--mariadb-url``, default
root on 127.0.0.1:3306): the move and ``DROP PARTITION`` against the batched DELETE
(`bench.support.archive_mariadb`).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, create_engine, text

from bench import targets
from bench.support import results
from bench.support.app import Job
from bench.support.database import Database, autovacuum_server, machine, pg_settings, scratch
from bench.support.timing import load, log
from sa_jobqueue.ops.archive import Archiver, archive_now
from sa_jobqueue.ops.retention import prune

QUICK = ["--jobs", "2000"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=200_000, help="jobs finished in the day")
    parser.add_argument(
        "--own-server",
        action="store_true",
        help="measure on a throwaway PostgreSQL with autovacuum on (and write a report)",
    )
    parser.add_argument(
        "--database",
        choices=("postgresql", "mariadb"),
        default="postgresql",
        help="the database measured (mariadb: --mariadb-url)",
    )
    parser.add_argument(
        "--mariadb-url",
        default="mariadb+pymysql://root@127.0.0.1:3306/",
        help="the MariaDB server of --database mariadb",
    )


def _fill(engine: Engine, n: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs, jobs_archive RESTART IDENTITY CASCADE"))
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, result, finished_at)"
                " SELECT 'noop', 'done', 1, jsonb_build_object('i', n), '{\"ok\": true}',"
                " date_trunc('day', now()) - interval '2 days'"
                " + (n % 86400) * interval '1 second'"
                " FROM generate_series(1, :n) AS n"
            ),
            {"n": n},
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE jobs"))


def _measured(engine: Engine, work: Callable[[], Any]) -> tuple[float, int]:
    with engine.connect() as conn:
        before = conn.execute(text("SELECT pg_current_wal_lsn()")).scalar_one()
    started = time.perf_counter()
    work()
    elapsed = time.perf_counter() - started
    with engine.connect() as conn:
        wal = conn.execute(
            text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), :before)"), {"before": before}
        ).scalar_one()
    return elapsed, int(wal)


def _after_vacuum(engine: Engine, table: str) -> tuple[int, int]:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"VACUUM {table}"))
        # The table and its partitions (a partitioned parent has no storage of its own).
        parts = (
            "SELECT CAST(:t AS regclass) AS oid UNION ALL"
            " SELECT inhrelid FROM pg_inherits WHERE inhparent = CAST(:t AS regclass)"
        )
        size = conn.execute(
            text(f"SELECT sum(pg_total_relation_size(oid)) FROM ({parts}) p"), {"t": table}
        ).scalar_one()
        dead = conn.execute(
            text(
                f"SELECT sum(n_dead_tup) FROM pg_stat_user_tables s JOIN ({parts}) p"
                " ON p.oid = s.relid"
            ),
            {"t": table},
        ).scalar()
    return int(size), int(dead or 0)


def main(args: argparse.Namespace, db: Database) -> None:
    if args.database == "mariadb":
        from bench.support.archive_mariadb import measure

        before = load()
        print("\n".join(measure(args.jobs, args.mariadb_url)))
        print(f"load average before: {before}; after: {load(', ')}")
        return
    with contextlib.ExitStack() as stack:
        server = db.url
        if args.own_server:
            log("starting a throwaway PostgreSQL with autovacuum on")
            server = stack.enter_context(autovacuum_server())
        _measure(args, server)


def _measure(args: argparse.Namespace, server: str) -> None:
    before = load()
    settings = pg_settings(server)
    with scratch(server, prefix="sa_jobqueue_bench_archive") as url:
        engine = create_engine(url)
        with engine.connect() as conn:
            autovacuum = conn.execute(text("SHOW autovacuum")).scalar_one()
        print(f"{args.jobs} done jobs finished over one day; autovacuum={autovacuum}")
        rows = []

        _fill(engine, args.jobs)
        seconds, wal = _measured(
            engine, lambda: prune(engine, Job, older_than=timedelta(days=1), batch_size=1000)
        )
        size, dead = _after_vacuum(engine, "jobs")
        rows.append(("prune: batched DELETE", seconds, wal, size, dead))

        _fill(engine, args.jobs)

        def move() -> None:
            with engine.connect() as conn:
                assert archive_now(conn, Job, after=timedelta(hours=1)) == args.jobs

        seconds, wal = _measured(engine, move)
        rows.append(
            ("archive: the move (once per job)", seconds, wal, *_after_vacuum(engine, "jobs"))
        )
        archiver = Archiver(Job, timedelta(hours=1), retention=timedelta(days=1))

        def expire() -> None:
            with engine.connect() as conn:
                assert len(archiver.expire(conn)) == 1

        seconds, wal = _measured(engine, expire)
        size, dead = _after_vacuum(engine, "jobs_archive")
        rows.append(("archive: DETACH CONCURRENTLY + DROP", seconds, wal, size, dead))
        engine.dispose()

    lines = [
        "| way | seconds | WAL bytes | size after VACUUM | dead tuples |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, seconds, wal, size, dead in rows:
        lines.append(f"| {name} | {seconds:.3f} | {wal:,} | {size:,} | {dead:,} |")
    print("\n".join(lines))
    drop = rows[-1][1]
    verdict = ""
    if args.jobs >= 1_000_000:
        verdict = targets.record(
            "43 retention of a day (1,000,000 jobs): partition drop",
            drop,
            1.0,
            unit=" s",
            at_most=True,
        )
        print(verdict)
    if args.own_server:
        _report(lines, rows, verdict, settings, before)


def _report(
    lines: list[str],
    rows: list[tuple[str, float, int, int, int]],
    verdict: str,
    settings: dict[str, str],
    before: str,
) -> None:
    prune_s, drop_s = rows[0][1], rows[-1][1]
    prune_wal, drop_wal = rows[0][2], rows[-1][2]
    report = [
        "# Archive: retention of a day on a server with autovacuum on",
        "",
        "```",
        results.command(),
        "```",
        "",
        "A throwaway PostgreSQL started by the run (`bench.support.database.autovacuum_server`:",
        "the machine's binaries, a temporary cluster, removed after) with **autovacuum on**",
        "and fsync on; its WAL is this run's alone. Otherwise as bench/archive-results.md",
        "(`bench/scenarios/archive.py`).",
        "",
        *lines,
        "",
        f"Partition drop against prune: {prune_s / drop_s:,.0f} times faster,"
        f" {prune_wal / max(drop_wal, 1):,.0f} times less WAL.",
        "",
        verdict and f"`{verdict}`",
        "",
        "Server: " + ", ".join(f"{k} {v}" for k, v in settings.items()) + ".",
        "",
        "Machine: "
        + ", ".join(f"{k} {v}" for k, v in machine().items() if "load" not in k)
        + f"; load average after: {load(', ')} (before: {before}).",
        "",
    ]
    results.write(results.BENCH / "archive-1m-results.md", "\n".join(report))
