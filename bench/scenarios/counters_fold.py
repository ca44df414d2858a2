"""The counters' fold of old minutes into hours: rows kept, and its time per 10,000 rows.

Usage: ``python -m bench counters_fold [--days N] [--kinds N] [--out FILE]`` (PostgreSQL).
A scratch database gets `--days` of minute rows in ``sa_jobqueue_counts_jobs`` for one
queue, `--kinds` kinds and the three final statuses (one row per minute each: every kind
ending jobs every minute, the rollup's largest), made by one ``INSERT ... SELECT``. Then
`Driver.counters_fold` folds every minute older than `FOLD_AFTER`, `FOLD_BATCH` rows a
transaction, as the sweeper does (without its lock), and is timed. Last, a year of hour
rows is added before them and a fold that finds nothing is timed (what each look costs
once the history is long: the sweeper looks every `FOLD_INTERVAL` at most). Appends a
section to ``bench/counters-results.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Engine, create_engine, func, select, text

from bench.support.app import Job
from bench.support.database import Database, scratch
from bench.support.results import BENCH, place
from sa_jobqueue.driver import driver_for
from sa_jobqueue.driver.protocol.counters import FOLD_AFTER, FOLD_BATCH
from sa_jobqueue.schema.counters import counts_table_for
from sa_jobqueue.worker.maintenance import FOLD_INTERVAL

QUICK = ["--days", "10", "--kinds", "2"]
COUNTS = counts_table_for(Job.__table__)  # type: ignore[arg-type]

_MINUTES = """
INSERT INTO sa_jobqueue_counts_jobs (minute, queue, kind, status, jobs, seconds, max_seconds)
SELECT date_bin('1 minute', now(), TIMESTAMPTZ 'epoch') - m * INTERVAL '1 minute', 'default',
       'kind' || k, s, 1 + (m + k) % 5, 0.5 * ((m + k) % 7), 0.1 * ((m * 3 + k) % 11)
FROM generate_series(0, :minutes - 1) m, generate_series(1, :kinds) k,
     unnest(ARRAY['done', 'failed', 'cancelled']) s
"""
_HOURS = """
INSERT INTO sa_jobqueue_counts_jobs (minute, queue, kind, status, jobs, seconds, max_seconds)
SELECT date_bin('1 hour', now(), TIMESTAMPTZ 'epoch') - h * INTERVAL '1 hour', 'default',
       'kind' || k, s, 60, 30.0, 1.0
FROM generate_series(:first, :first + 365 * 24 - 1) h, generate_series(1, :kinds) k,
     unnest(ARRAY['done', 'failed', 'cancelled']) s
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, default=30, help="days of minute rows")
    parser.add_argument("--kinds", type=int, default=10, help="kinds (x 3 statuses)")
    parser.add_argument("--out", default=str(BENCH / "counters-results.md"))


def _rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(COUNTS)).scalar_one())


def _jobs(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.sum(COUNTS.c.jobs))).scalar_one())


def _measure(url: str, args: argparse.Namespace) -> dict[str, float]:
    engine = create_engine(url)
    driver = driver_for(engine, Job)
    with engine.begin() as conn:
        conn.execute(text(_MINUTES), {"minutes": args.days * 1440, "kinds": args.kinds})
        conn.execute(text("ANALYZE sa_jobqueue_counts_jobs"))
    before_rows, before_jobs = _rows(engine), _jobs(engine)
    cutoff = datetime.now(timezone.utc) - FOLD_AFTER
    folded, batches = 0, []
    started = time.perf_counter()
    while True:
        tick = time.perf_counter()
        with engine.begin() as conn:
            n = driver.counters_fold(conn, cutoff, FOLD_BATCH)
        batches.append(time.perf_counter() - tick)
        folded += n
        if n < FOLD_BATCH:
            break
    elapsed = time.perf_counter() - started
    after_rows = _rows(engine)
    assert _jobs(engine) == before_jobs
    with engine.begin() as conn:
        conn.execute(text(_HOURS), {"first": args.days * 24 + 1, "kinds": args.kinds})
        conn.execute(text("ANALYZE sa_jobqueue_counts_jobs"))
    looks = []
    for _ in range(5):
        tick = time.perf_counter()
        with engine.begin() as conn:
            assert driver.counters_fold(conn, cutoff, FOLD_BATCH) == 0
        looks.append(time.perf_counter() - tick)
    year_rows = _rows(engine)
    engine.dispose()
    return {
        "before": before_rows,
        "after": after_rows,
        "folded": folded,
        "seconds": elapsed,
        "batches": len(batches),
        "batch_median": statistics.median(batches),
        "year_rows": year_rows,
        "empty_look": min(looks),
    }


def main(args: argparse.Namespace, db: Database) -> None:
    with scratch(db.url, prefix="sajq_fold_bench") as url:
        found = _measure(url, args)
    keys = args.kinds * 3
    steady_year = FOLD_AFTER.days * 1440 * keys + (365 - FOLD_AFTER.days) * 24 * keys
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    per_10k = found["seconds"] / found["folded"] * 10_000 if found["folded"] else 0.0
    command = f"python -m bench counters_fold --days {args.days} --kinds {args.kinds}"
    report = f"""
## Folding old minutes into hours (postgresql)

`{command}`, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {platform.platform()},
{os.cpu_count()} cores, shared with other benchmarks; load average {load} at the end.
{args.days} days of minute rows, {args.kinds} kinds x 3 statuses, one queue; folded are
the minutes older than {FOLD_AFTER.days} days, {FOLD_BATCH:,} rows a transaction
(`Driver.counters_fold`, one statement each).

| | rows |
|---|---:|
| before the fold | {found["before"]:,.0f} |
| after the fold | {found["after"]:,.0f} |
| a year at this rate, minutes only (no fold; computed) | {365 * 1440 * keys:,} |
| a year, folded ({FOLD_AFTER.days} days of minutes, then hours; computed) | {steady_year:,} |

Folded {found["folded"]:,.0f} rows in {found["batches"]:.0f} transactions,
{found["seconds"]:.2f} s:
**{per_10k * 1000:.0f} ms per 10,000 rows** (a transaction of {FOLD_BATCH:,}: median
{found["batch_median"] * 1000:.1f} ms). With a year of hour rows before them
({found["year_rows"]:,.0f} rows in all), a fold that finds nothing takes
{found["empty_look"] * 1000:.1f} ms (the best of 5); the sweeper looks at most every
{FOLD_INTERVAL:.0f} s once a look found nothing left.
"""
    written = place(args.out)
    with Path(written).open("a") as out:
        out.write(report)
    print(report)
