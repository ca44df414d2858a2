"""The SQL function ``jobs_enqueue(...)`` beside a Python enqueue and a raw INSERT.

Usage: ``python -m bench sql_enqueue [--reps 5] [--count 1000]``. Each repetition runs
every case once on one scratch database (interleaved, so all see the same load), each
writing `--count` jobs in one transaction, and reports jobs per second (median, min-max):

- one by one: `--count` ``jobs.enqueue`` calls in one ``Session``; `--count`
  ``SELECT jobs_enqueue('k', '{"n": i}')`` statements; `--count` plain ``INSERT INTO
  jobs (kind, payload) VALUES (...)`` statements (the limit: no checks, no keys);
- in one statement: ``enqueue_many`` of `--count` pairs; ``SELECT jobs_enqueue('k',
  jsonb_build_object('n', n)) FROM generate_series(1, count)``; ``INSERT INTO jobs
  (kind, payload) SELECT ... FROM generate_series(1, count)``.

Results: bench/sql-enqueue-results.md (no target: the issue asks for the figures).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from bench.support.app import jobs
from bench.support.database import Database, scratch
from bench.support.timing import Figure, load, log, repeat

QUICK = ["--reps", "1", "--count", "200"]
RESULTS = Path(__file__).resolve().parents[1] / "sql-enqueue-results.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--count", type=int, default=1000)


def _rate(engine: Engine, count: int, write: Callable[[Session], None]) -> float:
    with Session(engine) as session:
        started = time.perf_counter()
        with session.begin():
            write(session)
        taken = time.perf_counter() - started
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs CASCADE"))
    return count / taken


def main(args: argparse.Namespace, db: Database) -> None:
    n = args.count
    one = text("SELECT jobs_enqueue('bench', CAST(:p AS jsonb))")
    raw = text("INSERT INTO jobs (kind, payload) VALUES ('bench', CAST(:p AS jsonb))")
    many_sql = text(
        "SELECT jobs_enqueue('bench', jsonb_build_object('n', n)) FROM generate_series(1, :n) n"
    )
    many_raw = text(
        "INSERT INTO jobs (kind, payload)"
        " SELECT 'bench', jsonb_build_object('n', n) FROM generate_series(1, :n) n"
    )
    cases: list[tuple[Figure, Callable[[Session], None]]] = [
        (
            Figure("jobs.enqueue, one by one"),
            lambda s: [jobs.enqueue(s, "bench", {"n": i}) for i in range(n)],
        ),
        (
            Figure("SELECT jobs_enqueue(...), one by one"),
            lambda s: [s.execute(one, {"p": f'{{"n": {i}}}'}) for i in range(n)],
        ),
        (
            Figure("raw INSERT, one by one"),
            lambda s: [s.execute(raw, {"p": f'{{"n": {i}}}'}) for i in range(n)],
        ),
        (
            Figure("jobs.enqueue_many, one call"),
            lambda s: jobs.enqueue_many(s, [("bench", {"n": i}) for i in range(n)]),
        ),
        (
            Figure("jobs_enqueue FROM generate_series"),
            lambda s: s.execute(many_sql, {"n": n}).all(),
        ),
        (Figure("raw INSERT ... SELECT generate_series"), lambda s: s.execute(many_raw, {"n": n})),
    ]
    with scratch(db.url, "sajq_sql_enqueue") as url:
        engine = create_engine(url)
        runs = [(figure, lambda write=write: _rate(engine, n, write)) for figure, write in cases]
        for _, run in runs:  # warm up: statements prepared, caches filled
            run()
        for figure, _ in runs:
            figure.rates.clear()
        repeat(args.reps, runs)
        engine.dispose()
    rows = "\n".join(f"| {figure.name} | {figure.cell()} |" for figure, _ in runs)
    report = (
        f"# Enqueue from SQL beside Python and a raw INSERT\n\n"
        f"`python -m bench sql_enqueue --reps {args.reps} --count {n}`: {n} jobs per "
        f"transaction, jobs/s (median, min-max of {args.reps}); load {load()}.\n\n"
        f"| case | jobs/s |\n|---|---|\n{rows}\n"
    )
    log("\n" + report)
    RESULTS.write_text(report)
