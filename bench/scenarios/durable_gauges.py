"""What the durable gauges' statement costs next to the live counts (docs/observability.md).

Fills a scratch database with DONE finished jobs, 100,000 due and 100,000 scheduled
pending jobs, 2,000 parked durable jobs (half sleeping, half waiting for a signal, each
with its steps row) and 200 running jobs reporting a progress, analyzes it, then times
`statements.live_counts` and `statements.durable_gauges` (median of 30 runs) and prints
``EXPLAIN (ANALYZE, BUFFERS)`` of the durable one, and the cost of one job page's
durable reading (`ops.durable_state.durable_state`, median of 50). Run once::

    python -m bench durable_gauges [--done DONE]
"""

from __future__ import annotations

import argparse

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from bench.support.database import Database, literal_sql, scratch
from bench.support.timing import median_ms
from sa_jobqueue import statements
from sa_jobqueue.ops.durable_state import durable_state
from tests.support.models import Job

QUICK = ["--done", "10000"]

FILL = [
    "INSERT INTO jobs (queue, kind, payload, status, run_at, finished_at)"
    " SELECT 'q' || (i % 4), 'k', '{}', 'done', now(), now()"
    " FROM generate_series(1, :done) i",
    "INSERT INTO jobs (queue, kind, payload, run_at)"
    " SELECT 'q' || (i % 4), 'k', '{}', now() - interval '1 minute'"
    " FROM generate_series(1, 100000) i",
    "INSERT INTO jobs (queue, kind, payload, run_at)"
    " SELECT 'q' || (i % 4), 'k', '{}', now() + interval '1 hour'"
    " FROM generate_series(1, 100000) i",
    "INSERT INTO jobs (queue, kind, payload, run_at, has_steps)"
    " SELECT 'q' || (i % 4), 'saga', '{}', now() + interval '1 hour', true"
    " FROM generate_series(1, 2000) i",
    "INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, attempt, until)"
    " SELECT id, 'nap', CASE WHEN id % 2 = 0 THEN 'sleep' ELSE 'wait' END, 1, run_at"
    " FROM jobs WHERE has_steps",
    "INSERT INTO jobs (queue, kind, payload, status, attempts, locked_by, locked_until, progress)"
    " SELECT 'q' || (i % 4), 'k', '{}', 'running', 1, 'w', now() + interval '1 minute',"
    " to_jsonb(random()) FROM generate_series(1, 200) i",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--done", type=int, default=500_000, help="finished jobs in the table")


def main(args: argparse.Namespace, db: Database) -> None:
    done = args.done
    with scratch(db.url, prefix="sa_jobqueue_durable_gauges") as url:
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as connection:
            for statement in FILL:
                connection.execute(text(statement), {"done": done})
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE"))
            for name, query in (
                ("live_counts", statements.live_counts(Job)),
                ("durable_gauges", statements.durable_gauges(Job)),
            ):
                ms = median_ms(lambda q=query: connection.execute(q).all(), 30)
                print(f"{name}: {ms:.1f} ms (median of 30)")
            plan = connection.execute(
                text("EXPLAIN (ANALYZE, BUFFERS) " + literal_sql(statements.durable_gauges(Job)))
            ).scalars()
            print("\n".join(plan))
            job_id = connection.scalar(text("SELECT id FROM jobs WHERE has_steps LIMIT 1"))
            ms = median_ms(lambda: durable_state(connection, Job, job_id, "pending"), 50)
            print(f"one job page's durable reading: {ms:.2f} ms (median of 50)")
        engine.dispose()
