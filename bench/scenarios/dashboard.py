"""Dashboard page times on a big table: 1 M finished and 100 k pending jobs.

Usage: ``python -m bench dashboard [--finished N] [--pending N] [--repeat N] [--out FILE]``.
Everything runs in a scratch database that is dropped afterwards.

It fills the table with plain SQL (``generate_series``; the counters' triggers off, then
the counters filled by revision ``sajq_0012``'s one ``INSERT ... SELECT``), runs ``VACUUM
ANALYZE``, then requests each page through the real ASGI app (Starlette's test client, no
network) a few times and reports the median and the slowest, with ``admin.stats`` (``sa-jobqueue
stats``). Beside them, the statements the pages ran before the counters (``--old-repeat``
times each): the last hour's results, the charts over an hour, a day and a week, and
``stats``' pass over the whole table. It also records the plan of each page's main
statement (``EXPLAIN ANALYZE``).

Writes ``bench/dashboard-results.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any
from urllib.parse import parse_qsl

from sqlalchemy import create_engine, event, text
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from bench.support.database import Database, scratch
from bench.support.results import BENCH, write
from sa_jobqueue import JobQueue, statements
from sa_jobqueue.dashboard import make_app
from sa_jobqueue.dashboard.filters import JobFilter
from sa_jobqueue.ops import admin, bulk
from sa_jobqueue.schema.counters import backfill_sql

QUICK = ["--finished", "20000", "--pending", "2000", "--repeat", "2"]
QUEUES = ["default", "mail", "pdf", "crm"]
KINDS = ["send_receipt", "render_pdf", "sync_crm", "create_invoice", "import_feed", "ping"]

FILL = """
INSERT INTO jobs (queue, kind, payload, status, attempts, max_attempts, run_at,
                  locked_by, last_error, created_at, updated_at, finished_at)
SELECT (ARRAY{queues})[1 + i % {nq}],
       (ARRAY{kinds})[1 + i % {nk}],
       jsonb_build_object('order_id', i, 'customer', 'c' || (i % 1000)),
       CASE WHEN i % 100 < 2 THEN 'failed' WHEN i % 100 = 2 THEN 'cancelled' ELSE 'done' END,
       CASE WHEN i % 100 < 2 THEN 5 ELSE 1 END, 5,
       now() - make_interval(secs => i * {spread} + 3),
       'host-' || (i % 8) || ':' || (1000 + i % 8),
       CASE WHEN i % 100 < 2 THEN
         'Traceback (most recent call last):' || chr(10) || '  File "app.py", line 12' || chr(10)
         || CASE WHEN i % 200 = 0 THEN 'TimeoutError: upstream timed out'
                 ELSE 'ValueError: bad order ' || i END
       END,
       now() - make_interval(secs => i * {spread} + 5),
       now() - make_interval(secs => i * {spread}),
       now() - make_interval(secs => i * {spread})
FROM generate_series(1, {finished}) AS i;

INSERT INTO jobs (queue, kind, payload, status, run_at, created_at)
SELECT (ARRAY{queues})[1 + i % {nq}],
       (ARRAY{kinds})[1 + i % {nk}],
       jsonb_build_object('order_id', 10000000 + i, 'customer', 'c' || (i % 1000)),
       'pending',
       now() + make_interval(secs => (i % 4000) - 600),
       now() - interval '10 minutes'
FROM generate_series(1, {pending}) AS i;

INSERT INTO jobs (queue, kind, payload, status, attempts, run_at, locked_by, locked_until)
SELECT (ARRAY{queues})[1 + i % {nq}], (ARRAY{kinds})[1 + i % {nk}], '{{}}', 'running', 1,
       now() - interval '1 minute', 'host-' || (i % 8) || ':' || (1000 + i % 8),
       now() + make_interval(secs => 30 + i % 60)
FROM generate_series(1, 200) AS i;
"""


def sql_array(values: list[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def timed(client: TestClient, path: str, repeat: int) -> tuple[float, float, int]:
    client.get(path)  # warm: plans, caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
    return statistics.median(times), max(times), len(response.content)


def plan_of(engine: Any, statement: Any, params: dict[str, Any]) -> list[str]:
    """EXPLAIN ANALYZE of `statement` as SQLAlchemy sends it (same SQL, same parameters)."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, sql: str, parameters: Any, context: Any, many: Any) -> None:
        sent.append((sql, parameters))

    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", capture)
        conn.execute(statement, params).all()
        event.remove(conn, "before_cursor_execute", capture)
        sql, parameters = sent[-1]
        cursor = conn.connection.driver_connection.cursor()
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + sql, parameters)
        return [row[0] for row in cursor.fetchall()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--old-repeat", type=int, default=1, help="runs of each statement before the counters"
    )
    parser.add_argument("--out", default=str(BENCH / "dashboard-results.md"))
    parser.add_argument(
        "--statement-timeout",
        type=float,
        default=60.0,
        help="seconds a page's query may take (the dashboard's default is 5): measure, not cut",
    )


def main(args: argparse.Namespace, db: Database) -> None:
    with scratch(db.url, prefix="sajq_dash_bench") as url:
        engine = create_engine(url, pool_size=4)
        model = admin.model_for_table("jobs")
        started = time.perf_counter()
        with engine.begin() as conn:
            # As a table that ended its jobs before revision sajq_0012 (no log per row).
            conn.exec_driver_sql("ALTER TABLE jobs DISABLE TRIGGER sa_jobqueue_count_inserted")
            conn.execute(
                text(
                    FILL.format(
                        queues=sql_array(QUEUES),
                        kinds=sql_array(KINDS),
                        nq=len(QUEUES),
                        nk=len(KINDS),
                        finished=args.finished,
                        pending=args.pending,
                        spread=86400 * 2 / args.finished,  # finished over the last two days
                    )
                )
            )
            conn.exec_driver_sql("ALTER TABLE jobs ENABLE TRIGGER sa_jobqueue_count_inserted")
        filled = time.perf_counter() - started
        with engine.begin() as conn:
            conn.exec_driver_sql(backfill_sql("postgresql", "jobs"))
            counter_rows = conn.exec_driver_sql("SELECT count(*) FROM sa_jobqueue_counts_jobs")
            counters = counter_rows.scalar_one()
        backfilled = time.perf_counter() - started - filled
        print(f"counters: {counters:,} rows, filled in {backfilled:.1f}s")
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE jobs")
            conn.exec_driver_sql("VACUUM ANALYZE sa_jobqueue_counts_jobs")
            size = conn.exec_driver_sql("SELECT pg_size_pretty(pg_total_relation_size('jobs'))")
            table_size = size.scalar()
        print(f"filled {args.finished:,} finished + {args.pending:,} pending in {filled:.1f}s")

        with engine.connect() as conn:
            one_failed = conn.execute(
                text("SELECT id FROM jobs WHERE status = 'failed' ORDER BY id DESC LIMIT 1")
            ).scalar_one()
        timeout = args.statement_timeout
        app = make_app(JobQueue(model), engine, statement_timeout=timeout)
        client = TestClient(app, base_url="http://127.0.0.1")
        acting = make_app(JobQueue(model), engine, statement_timeout=timeout, allow_actions=True)
        with_actions = TestClient(acting, base_url="http://127.0.0.1")
        page2 = client.get("/jobs?status=done").text
        cursor = page2.split('id="next-page" href="http://127.0.0.1/jobs?')[1].split('"')[0]
        pages = [
            ("overview", "/"),
            ("overview, one queue's charts", "/?queue=mail"),
            ("overview live refresh (htmx)", "/live"),
            ("overview, charts over the last day", "/?range=day"),
            ("overview, charts over the last week", "/?range=week"),
            ("jobs: all, newest first", "/jobs"),
            ("jobs: pending (claim order)", "/jobs?status=pending"),
            ("jobs: pending in one queue", "/jobs?status=pending&queue=mail"),
            ("jobs: running", "/jobs?status=running"),
            ("jobs: done", "/jobs?status=done"),
            ("jobs: done, page 2 (keyset)", "/jobs?" + cursor.replace("&amp;", "&")),
            ("jobs: failed", "/jobs?status=failed"),
            ("jobs: failed of one kind", "/jobs?status=failed&kind=render_pdf"),
            ("jobs: failed, error contains 'timed out'", "/jobs?status=failed&error=timed+out"),
            ("jobs: done, payload customer=c42", "/jobs?status=done&payload=customer%3Dc42"),
            ("jobs: any, payload has key order_id", "/jobs?payload=order_id"),
            ("one job", f"/jobs/{one_failed}"),
            ("workers", "/workers"),
        ]
        acted = [
            ("actions on: jobs, all N matching (capped count)", "/jobs"),
            ("actions on: failed, all N matching", "/jobs?status=failed"),
            ("actions on: failed of one kind", "/jobs?status=failed&kind=render_pdf"),
            ("actions on: failed, error 'timed out'", "/jobs?status=failed&error=timed+out"),
        ]
        rows = []
        for group, chosen in ((client, pages), (with_actions, acted)):
            for name, path in chosen:
                median, worst, size_bytes = timed(group, path, args.repeat)
                rows.append((name, path, median, worst, size_bytes))
                print(f"{name:45s} {median:8.1f} ms  (max {worst:.1f})")

        # The bulk form's confirmation step: the exact dry-run count (ops.bulk.count).
        for name, match in (
            ("bulk dry run: retry all failed", bulk.Match(status="failed")),
            ("bulk dry run: delete all done of one kind", bulk.Match(status="done", kind="ping")),
        ):
            times = []
            for _ in range(3):
                start = time.perf_counter()
                with Session(engine) as session:
                    action = "retry" if match.status == "failed" else "delete"
                    changed = bulk.count(session, model, action, match=match).changed
                times.append((time.perf_counter() - start) * 1000)
            rows.append((name, f"{changed:,} jobs", statistics.median(times), max(times), 0))
            print(f"{name:45s} {statistics.median(times):8.1f} ms  ({changed:,} jobs)")

        stats_times = []
        for _ in range(3):
            start = time.perf_counter()
            with Session(engine) as session:
                admin.stats(session, model)
            stats_times.append((time.perf_counter() - start) * 1000)
        print(f"{'admin.stats (CLI stats)':45s} {statistics.median(stats_times):8.1f} ms")
        before = compare(engine, model, args.old_repeat, args.repeat)

        window = {"window": 3600.0}
        plans = {
            "pending_summary": (statements.pending_summary(model), {}),
            "running_summary": (statements.running_summary(model), {}),
            "finished_recently": (statements.finished_recently(model), window),
            "finished_per_minute": (statements.finished_per_minute(model), window),
            "finished_per_bucket (day)": (
                statements.finished_per_bucket(model),
                {"window": 86400.0, "bucket": 1800.0},
            ),
            "finished_per_bucket (week)": (
                statements.finished_per_bucket(model),
                {"window": 7 * 86400.0, "bucket": 10800.0},
            ),
            "counted_per_bucket (week)": (
                statements.counted_per_bucket(model),
                {"window": 7 * 86400.0, "bucket": 10800.0},
            ),
            "counted_totals": (statements.counted_totals(model), window),
            "status_estimates": (statements.status_estimates(), {"table": "jobs", "schema": None}),
            "capped_count status=failed": (
                statements.capped_count(
                    model, conditions=statements.filter_conditions(model, status="failed")
                ),
                {"cap": 10_001},
            ),
            "workers_summary": (statements.workers_summary(model), window),
        }
        for label, query in [
            ("job_page status=failed kind=render_pdf", {"status": "failed", "kind": "render_pdf"}),
            ("job_page status=pending queue=mail", {"status": "pending", "queue": "mail"}),
            ("job_page status=done (page 2)", dict(parse_qsl(cursor.replace("&amp;", "&")))),
        ]:
            f = JobFilter.parse(query)
            plans[label] = (statements.job_page(model, **f.flags()), {**f.bound(), "limit": 51})
        plan_text = {name: plan_of(engine, st, params) for name, (st, params) in plans.items()}
        engine.dispose()

    load = os.getloadavg()
    out = [
        "# Dashboard page times on a big table",
        "",
        f"`python -m bench dashboard`: {args.finished:,} finished jobs (97% done, 2% failed, "
        f"1% cancelled, finished over two days) and {args.pending:,} pending ones (about "
        f"15% due), 200 running, {len(QUEUES)} queues; table and indexes {table_size}. "
        "Times are per request through the ASGI app (Starlette's test client: rendering "
        f"included, no network), median and slowest of {args.repeat} after one warm-up; "
        f"statement timeout {args.statement_timeout:g}s (the dashboard's default is 5s). "
        "Since the totals per status: the table is past `ops.counts.EXACT_BELOW` rows, so "
        "done/failed/cancelled/waiting are the planner's estimates and every page's header "
        "reads them from `pg_stats`.",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end (shared with other work).",
        "",
        f"Counters: revision `sajq_0012`'s `INSERT ... SELECT` counted the {args.finished:,} "
        f"finished rows into {counters:,} rows of `sa_jobqueue_counts_jobs` in "
        f"{backfilled:.1f}s; the table was filled in {filled:.1f}s.",
        "",
        "| page | request | median ms | max ms | bytes |",
        "|---|---|---:|---:|---:|",
    ]
    for name, path, median, worst, size_bytes in rows:
        shown = path if len(path) < 60 else path[:57] + "..."
        out.append(f"| {name} | `{shown}` | {median:.1f} | {worst:.1f} | {size_bytes:,} |")
    out += [
        f"| `admin.stats` (`sa-jobqueue stats`: live work from the indexes, the rest "
        f"from the counters) | | {statistics.median(stats_times):.1f} | "
        f"{max(stats_times):.1f} | |",
        "",
        "## The statements before the counters, beside those that replace them",
        "",
        f"Each run on its own connection; before: {args.old_repeat} run(s) after none "
        f"to warm, counters: median and slowest of {args.repeat} after one.",
        "",
        "| what | before (table) ms | counters ms | counters max ms |",
        "|---|---:|---:|---:|",
        *before,
        "",
        "## Plans (EXPLAIN ANALYZE, costs and timing off)",
        "",
    ]
    for name, lines in plan_text.items():
        out += [f"### {name}", "", "```", *lines, "```", ""]
    write(args.out, "\n".join(out))


def _ms(engine: Any, statement: Any, params: dict[str, Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        with engine.connect() as conn:
            start = time.perf_counter()
            conn.execute(statement, params).all()
            times.append((time.perf_counter() - start) * 1000)
    return times


def compare(engine: Any, model: Any, old_repeat: int, repeat: int) -> list[str]:
    """Table rows: each statement the pages ran before the counters, and its replacement."""
    hour, day = {"window": 3600.0, "bucket": 60.0}, {"window": 86400.0, "bucket": 1800.0}
    week = {"window": 7 * 86400.0, "bucket": 10800.0}
    pairs = [
        ("last hour per queue and status", statements.finished_recently(model),
         statements.counted_recently(model), hour),
        ("chart: last hour per minute", statements.finished_per_bucket(model),
         statements.counted_per_bucket(model), hour),
        ("chart: last day per 30 minutes", statements.finished_per_bucket(model),
         statements.counted_per_bucket(model), day),
        ("chart: last week per 3 hours", statements.finished_per_bucket(model),
         statements.counted_per_bucket(model), week),
        ("stats: done/failed/cancelled per queue", statements.stats(model),
         statements.counted_totals(model), {"window": 3600.0}),
    ]  # fmt: skip
    rows = []
    for label, old, new, params in pairs:
        old_params = {} if label.startswith("stats") else params
        before = statistics.median(_ms(engine, old, old_params, old_repeat))
        _ms(engine, new, params, 1)  # warm
        after = _ms(engine, new, params, repeat)
        print(f"{label:45s} {before:10.1f} ms -> {statistics.median(after):8.1f} ms")
        rows.append(
            f"| {label} | {before:.1f} | {statistics.median(after):.1f} | {max(after):.1f} |"
        )
    return rows
