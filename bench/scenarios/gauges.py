"""What the metrics gauges' query costs on a large table (docs/observability.md).

Fills a scratch database's jobs table with ROWS rows (default 10 M: all but 100,000
finished, the rest pending across four queues, some due, plus running jobs), vacuums
and analyzes it, then runs ``EXPLAIN (ANALYZE, BUFFERS)`` of the gauges' query
(`statements.live_counts`) and, for comparison, of ``sa-jobqueue stats``' full
``GROUP BY queue`` query. Run once::

    python -m bench gauges [--rows ROWS]
"""

from __future__ import annotations

import argparse
import time

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from bench.support.database import Database, literal_sql, scratch
from sa_jobqueue import statements
from tests.support.models import Job

QUICK = ["--rows", "200000"]

FILL = """
INSERT INTO jobs (queue, kind, payload, status, attempts, run_at, locked_by, locked_until,
                  finished_at, created_at, updated_at)
SELECT (ARRAY['default', 'mail', 'crm', 'ops'])[1 + i % 4],
       'kind_' || (i % 10),
       jsonb_build_object('n', i),
       CASE WHEN i <= :live - :running THEN 'pending'
            WHEN i <= :live THEN 'running'
            ELSE 'done' END,
       CASE WHEN i <= :live - :running THEN 0 ELSE 1 END,
       now() - interval '1 hour' + (i % 7200) * interval '1 second',
       CASE WHEN i > :live - :running AND i <= :live THEN 'bench' END,
       CASE WHEN i > :live - :running AND i <= :live THEN now() + interval '5 minutes' END,
       CASE WHEN i > :live THEN now() - (i % 86400) * interval '1 second' END,
       now(), now()
FROM generate_series(1, :rows) AS i
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=10_000_000, help="jobs in the table")


def main(args: argparse.Namespace, db: Database) -> None:
    rows = args.rows
    live, running = 100_000, 10_000
    with scratch(db.url, prefix="sa_jobqueue_gauges") as url:
        engine = create_engine(url, poolclass=NullPool)
        started = time.perf_counter()
        with engine.begin() as connection:
            connection.execute(text(FILL), {"rows": rows, "live": live, "running": running})
        print(f"filled {rows:,} rows in {time.perf_counter() - started:.0f}s")
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE jobs"))
            size = connection.scalar(text("SELECT pg_size_pretty(pg_total_relation_size('jobs'))"))
            print(f"table with indexes: {size}")
            for name, query in (
                ("gauges (live_counts)", statements.live_counts(Job)),
                ("sa-jobqueue stats", statements.stats(Job)),
            ):
                sql = literal_sql(query)
                connection.execute(text(sql)).all()  # warm the cache once
                plan = connection.execute(text(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")).scalars()
                print(f"\n-- {name}")
                print("\n".join(plan))
        engine.dispose()
