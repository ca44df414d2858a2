"""The idle worker's next-due probe beside 1,000,000 pending jobs not yet due.

Usage: ``python -m bench next_due [--deep N]``. Fills a scratch
database with ``--deep`` pending rows of queue ``default`` due a day or more ahead,
then runs `next_due.next_run_at` two ways, 20 times each (median, in ms), and prints
each plan (``EXPLAIN ANALYZE``): the level walk a worker of up to
`claims.LEVEL_WALK_MAX_QUEUES` queues runs, and the ``min(run_at)`` aggregate (the
statement every worker ran before, and the one for more queues than that), asked here
for ``default`` plus 32 queues that hold nothing, so both answer the same question.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, text

from bench import targets
from bench.support.app import Job
from bench.support.database import Database, literal_sql, scratch
from bench.support.timing import median_ms
from sa_jobqueue.driver.postgres import PostgresDriver, claims, due, next_due, plan_cache

QUICK = ["--deep", "10000"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deep", type=int, default=1_000_000)


def _median_ms(conn: Connection, statement: Any, reps: int = 20) -> float:
    return median_ms(lambda: conn.execute(statement).one(), reps)


def _plan(conn: Connection, statement: object) -> str:
    sql = literal_sql(statement)
    rows = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql)).scalars()
    return "\n".join(f"    {row}" for row in rows)


def main(args: argparse.Namespace, db: Database) -> None:
    with scratch(db.url, "sajq_next_due") as url:
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
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE jobs"))
        walk = next_due.next_run_at(Job, queues=["default"])
        padding = [f"none{i}" for i in range(claims.LEVEL_WALK_MAX_QUEUES)]
        aggregate = next_due.next_run_at(Job, queues=["default", *padding])
        with engine.connect() as conn:
            figures = {"walk": _median_ms(conn, walk), "min": _median_ms(conn, aggregate)}
            print(f"next-due probe beside {args.deep:,} pending rows not yet due, median of 20:")
            print(
                f"  level walk (up to {claims.LEVEL_WALK_MAX_QUEUES} queues): "
                f"{figures['walk']:.2f} ms"
            )
            print(
                f"  min(run_at) aggregate (more queues; every worker before): "
                f"{figures['min']:.2f} ms"
            )
            if args.deep == 1_000_000:
                name = "6 next-due probe beside 1,000,000 future rows"
                print(targets.record(name, figures["walk"], 5.0, unit=" ms", at_most=True))
            print(f"load average {os.getloadavg()[0]:.1f}\n\nlevel walk:")
            print(_plan(conn, walk))
            print("\nmin(run_at) aggregate:")
            print(_plan(conn, aggregate))
        _idle_claims(engine, args.deep)
        engine.dispose()


#: Issue 30 item 6: an idle claim poll beside the deep backlog, in ms.
IDLE_CLAIM_TARGET = 5.0


def _idle_claims(engine: Engine, deep: int) -> None:
    """An idle worker's statements beside the future rows: claims, and the limited probes.

    The worker's own statements (`PostgresDriver`), in transactions rolled back (they
    claim nothing: no job is due); median of 20 each, then each plan.
    """
    driver = PostgresDriver(Job, leases={"noop": 30.0}, default_lease=30.0, kinds=["noop"])
    queues = ["default", "empty1", "empty2", "empty3"]
    due_kinds = due.due_kinds(Job)
    limited_due = due.limited_due(Job, kinds=["noop", "other"])
    cases = {
        "claim, one queue": lambda conn: driver.job_claim(conn, "default", 32, "bench"),
        "claim_queues, 4 queues": lambda conn: driver.job_claim_queues(conn, queues, 32, "bench"),
        # A worker with limited kinds asks these on its idle rounds; the deep backlog's
        # kind stands for a limited one here (the probes do not read the limits).
        "limited kinds' due_kinds probe": lambda conn: list(
            conn.execute(due_kinds, {"kinds": ["noop", "other"], "queues": queues})
        ),
        "limited kinds' limited_due probe": lambda conn: (
            [] if not conn.execute(limited_due, {"queues": queues}).scalar() else [True]
        ),
    }
    print(f"\nidle claim of 32 beside {deep:,} pending rows not yet due, median of 20:")
    with engine.connect() as conn:
        for name, run in cases.items():
            times = []
            for _ in range(20):
                with conn.begin() as transaction:
                    started = time.perf_counter()
                    assert run(conn) == []
                    times.append((time.perf_counter() - started) * 1000)
                    transaction.rollback()
            median = statistics.median(times)
            verdict = "held" if median <= IDLE_CLAIM_TARGET else "NOT held"
            if deep == 1_000_000 and name == "claim, one queue":
                target = "6 idle claim beside 1,000,000 future rows"
                targets.record(target, median, IDLE_CLAIM_TARGET, unit=" ms", at_most=True)
            print(
                f"  {name}: {median:.2f} ms; target <= {IDLE_CLAIM_TARGET:g} ms "
                f"({median / IDLE_CLAIM_TARGET:.2f}x): {verdict}"
            )
        print(f"load average {os.getloadavg()[0]:.1f}")
        # The worker's own claim (`Claims.claim` builds the same for a driver of "noop").
        statement = claims.claim(
            Job,
            leases={"noop": 30.0},
            default_lease=30.0,
            kinds=["noop"],
            ceiling=plan_cache.claim_ceiling(32),
        )
        params = {"queue_name": "default", "limit": 32, "owner": "bench"}
        with conn.begin() as transaction:
            compiled = statement.compile(dialect=conn.dialect)
            rows = conn.exec_driver_sql(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + str(compiled),
                compiled.construct_params(params),
            ).scalars()
            print("\nidle claim, one queue:")
            print("\n".join(f"    {row}" for row in rows))
            transaction.rollback()
