"""The worker's claim planned once against planned at every run, sample by sample.

Usage: ``python -m bench claim_plan [--deep N] [--samples N] [--limit N]``. Fills a
scratch database with ``--deep`` pending jobs not yet due, then runs a worker's claim
(`PostgresDriver.job_claim`, the handled kinds written in, as `jobs.worker` builds it;
autocommitted, as an idle worker's wake-up round runs it) on two connections in turn: one
as it is (psycopg prepares the claim, and PostgreSQL keeps its generic plan once it costs
no more than the custom ones), one with ``plan_cache_mode = force_custom_plan`` (planned
again at every run, which every claim was before `claims._within`). The difference of the
medians is the planning an idle worker's wake-up no longer pays. Prints; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sqlalchemy import Connection, create_engine, text

from bench.support.app import Job
from bench.support.database import Database, scratch
from bench.support.results import command
from bench.support.timing import load
from sa_jobqueue.driver.postgres import PostgresDriver

QUICK = ["--deep", "1000", "--samples", "50"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deep", type=int, default=100_000, help="pending jobs not yet due")
    parser.add_argument("--samples", type=int, default=1000, help="claims per connection")
    parser.add_argument("--limit", type=int, default=129, help="the claim's limit (c + prefetch)")


def _plans(conn: Connection) -> str:
    row = conn.execute(
        text(
            "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
            "WHERE NOT from_sql AND strpos(statement, 'UPDATE jobs SET status') > 0"
        )
    ).one()
    return f"{row[0] or 0} generic, {row[1] or 0} custom"


def main(args: argparse.Namespace, db: Database) -> None:
    print(command())
    with scratch(db.url, "sajq_claim_plan") as url:
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jobs (queue, kind, payload, run_at) SELECT 'default', 'noop', "
                    "'{}', now() + interval '1 day' + g * interval '1 second' "
                    "FROM generate_series(1, :n) g"
                ),
                {"n": args.deep},
            )
            conn.execute(text("ANALYZE jobs"))
        driver = PostgresDriver(Job, leases={"noop": 30.0}, default_lease=30.0, kinds=["noop"])
        times: dict[str, list[float]] = {"once": [], "every run": []}
        autocommit = {"isolation_level": "AUTOCOMMIT"}
        with (
            engine.connect().execution_options(**autocommit) as once,
            engine.connect().execution_options(**autocommit) as every,
        ):
            every.execute(text("SET plan_cache_mode = force_custom_plan"))
            every.commit()
            pairs = [("once", once), ("every run", every)]
            for i in range(args.samples + 20):
                for name, conn in pairs if i % 2 else pairs[::-1]:
                    started = time.perf_counter()
                    with conn.begin():
                        driver.job_claim(conn, "default", args.limit, "bench")
                    if i >= 20:  # psycopg prepares at the fifth run, the plan settles by the 10th
                        times[name].append((time.perf_counter() - started) * 1000)
            plans = {name: _plans(conn) for name, conn in pairs}
        engine.dispose()
    print(
        f"idle claim of {args.limit} beside {args.deep:,} future jobs, {args.samples} "
        f"interleaved samples each, load {load()}:"
    )
    for name, values in times.items():
        cuts = statistics.quantiles(values, n=100)
        print(
            f"  planned {name:9}: p50 {statistics.median(values):.3f} p95 {cuts[94]:.3f} "
            f"p99 {cuts[98]:.3f} ms  ({plans[name]})"
        )
    saved = statistics.median(times["every run"]) - statistics.median(times["once"])
    print(f"  planning saved per claim (difference of the medians): {saved:.3f} ms")
