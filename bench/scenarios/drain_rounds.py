"""Where a lease drain's time goes: the claim loop's rounds, and rounds in flight at once.

Usage: ``python -m bench drain_rounds [--jobs N] [--reps N] [--server-log PATH]
[--plan-cache-mode MODE] [--anatomy-only]``.
Issue 42 item 2 (bench/peers-results.md). Two parts, each interleaved repetition by
repetition:

1. **Round anatomy.** In this process, one worker (``jobs.worker(engine,
   concurrency=C).drain()``, no-op lease jobs, listen off) drains `--jobs` at
   concurrency 16 and 32. Wrappers time `ClaimLoop.round` and `ClaimLoop.coalesce`
   (the wait for half the batch's reports), engine events time the claim statement,
   the batched acknowledgement and the COMMIT as the client sees them, and
   ``time.process_time`` gives the process's CPU (every thread) over the drain. With
   `--server-log` (the server's log file, readable here) each session also sets
   ``log_min_duration_statement = 0``, and the server's own times of the same
   statements are read back: planning (``bind``) and execution apart.
2. **Rounds in flight.** One worker process at concurrency 32 against two at 16 (the
   same 32 slots, two claim loops), and the raw SQL loop of `bench/support/raw.py` on one
   connection against two (at the workers' batch sizes): whether one claim loop's
   serial rounds, not the server, bound the drain.

``--plan-cache-mode force_generic_plan`` sets PostgreSQL's ``plan_cache_mode`` on every
session of the part-1 drains: the statements psycopg prepares are then planned once per
connection instead of at each execution (the server log's ``bind`` times).

Prints its tables; writes nothing.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text

from bench.support.app import KINDS, jobs
from bench.support.database import Database, scratch
from bench.support.results import command
from bench.support.throughput import library_drain, raw_drain, raw_for
from bench.support.timing import Figure, log, repeat
from sa_jobqueue.worker import loop
from sa_jobqueue.worker.config import DEFAULT_PREFETCH

CONCURRENCY = (16, 32)
QUICK = ["--reps", "1", "--jobs", "500"]
#: The statements of a round, by a piece of their SQL (client side and server log).
STATEMENTS = {"claim": "levels(priority)", "acknowledgement": "WITH ending AS"}
_SERVER_LINE = re.compile(r"duration: ([\d.]+) ms  (statement|execute|bind|parse)[^:]*: (.*)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument(
        "--server-log", type=Path, default=None, help="the server's log, for its own times"
    )
    parser.add_argument("--anatomy-only", action="store_true", help="part 1 alone")
    parser.add_argument(
        "--plan-cache-mode", default=None, help="plan_cache_mode of the part-1 drains' sessions"
    )


@contextmanager
def timed_loop(times: dict[str, list[float]]) -> Iterator[None]:
    """Time every `ClaimLoop.round` and `ClaimLoop.coalesce` into `times` (ms)."""
    originals = {name: getattr(loop.ClaimLoop, name) for name in ("round", "coalesce")}

    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(self: loop.ClaimLoop, *args: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(self, *args)
            finally:
                times[name].append((time.perf_counter() - began) * 1000)

        return timed

    for name, original in originals.items():
        setattr(loop.ClaimLoop, name, wrap(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(loop.ClaimLoop, name, original)


def anatomy(
    url: str, count: int, concurrency: int, server_log: Path | None, plan_cache_mode: str | None
) -> dict[str, Any]:
    """One in-process drain of `count` jobs; its rate, CPU and per-round times (ms)."""
    times: dict[str, list[float]] = {"round": [], "coalesce": []}
    times.update({f"client {name}": [] for name in (*STATEMENTS, "COMMIT")})
    engine = create_engine(url, pool_size=concurrency + 4, max_overflow=4)

    @event.listens_for(engine, "before_cursor_execute")
    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        conn.info["bench_began"] = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        for name, piece in STATEMENTS.items():
            if piece in statement:
                times[f"client {name}"].append(
                    (time.perf_counter() - conn.info["bench_began"]) * 1000
                )

    dialect: Any = engine.dialect
    do_commit = dialect.do_commit

    def timed_commit(dbapi_connection: Any) -> None:
        began = time.perf_counter()
        do_commit(dbapi_connection)
        times["client COMMIT"].append((time.perf_counter() - began) * 1000)

    dialect.do_commit = timed_commit
    settings = [] if server_log is None else ["SET log_min_duration_statement = 0"]
    if plan_cache_mode is not None:
        settings.append(f"SET plan_cache_mode = {plan_cache_mode}")
    if settings:

        @event.listens_for(engine, "connect")
        def settled(dbapi_connection: Any, record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                for statement in settings:
                    cursor.execute(statement)
            dbapi_connection.commit()

    sql = raw_for(url)
    sql.truncate(url)
    sql.fill(url, KINDS["lease"], count)
    worker = jobs.worker(engine, concurrency=concurrency, listen=False)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    gc.collect()
    logged_from = server_log.stat().st_size if server_log is not None else 0
    with timed_loop(times):
        began, cpu = time.perf_counter(), time.process_time()
        done = worker.drain()
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    engine.dispose()
    if done != count:
        raise RuntimeError(f"drained {done} of {count} jobs")
    if server_log is not None:
        times.update(server_times(server_log, logged_from, url.rsplit("/", 1)[-1]))
    return {"rate": count / wall, "cpu_share": cpu / wall, "rounds": len(times["round"]), **times}


def server_times(path: Path, offset: int, database: str) -> dict[str, list[float]]:
    """The server's times (ms) of the round's statements in its log after `offset`."""
    found: dict[str, list[float]] = {}
    with path.open(errors="replace") as lines:
        lines.seek(offset)
        for line in lines:
            matched = _SERVER_LINE.search(line) if f"@{database} " in line else None
            if matched is None:
                continue
            ms, step, sql = float(matched[1]), matched[2], matched[3]
            names = [name for name, piece in STATEMENTS.items() if piece in sql]
            if sql.strip() == "COMMIT":
                names = ["COMMIT"]
            for name in names:
                step_name = "run" if step in ("statement", "execute") else step
                found.setdefault(f"server {name} {step_name}", []).append(ms)
    return found


def main(args: argparse.Namespace, db: Database) -> None:
    began = time.monotonic()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    runs: dict[int, list[dict[str, Any]]] = {c: [] for c in CONCURRENCY}
    with scratch(db.url) as url:
        for rep in range(args.reps):
            for concurrency in CONCURRENCY if rep % 2 == 0 else CONCURRENCY[::-1]:
                run = anatomy(url, args.jobs, concurrency, args.server_log, args.plan_cache_mode)
                runs[concurrency].append(run)
                log(f"  rep {rep + 1}/{args.reps} c={concurrency}: {run['rate']:,.0f}/s")
        flight = [
            (Figure("worker, 1 process at concurrency 32"), 1, 32, False),
            (Figure("worker, 2 processes at concurrency 16"), 2, 16, False),
            (
                Figure(f"raw SQL, 1 connection, {32 + DEFAULT_PREFETCH} per transaction"),
                1,
                32,
                True,
            ),
            (
                Figure(f"raw SQL, 2 connections, {16 + DEFAULT_PREFETCH} per transaction"),
                2,
                16,
                True,
            ),
        ]
        cases = [
            (
                figure,
                (
                    (lambda p=processes, c=c: raw_drain(url, args.jobs, c + DEFAULT_PREFETCH, p))
                    if raw
                    else (
                        lambda p=processes, c=c: (
                            library_drain(
                                url, args.jobs, mode="lease", processes=p, concurrency=c
                            ).rate
                        )
                    )
                ),
            )
            for figure, processes, c, raw in flight
        ]
        if not args.anatomy_only:
            repeat(args.reps, cases)
    minutes = (time.monotonic() - began) / 60
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"`{command()}`, {minutes:.1f} min, load average {load} before and {after} after.\n")
    print(
        f"Round anatomy, {args.jobs:,} no-op jobs, medians of {args.reps} drains (ms per round)\n"
    )
    print("| | " + " | ".join(f"concurrency {c}" for c in CONCURRENCY) + " |")
    print("|---|" + "---|" * len(CONCURRENCY))

    def row(label: str, cell: Callable[[list[dict[str, Any]]], str]) -> None:
        print(f"| {label} | " + " | ".join(cell(runs[c]) for c in CONCURRENCY) + " |")

    row("jobs/s", lambda rs: f"{statistics.median(r['rate'] for r in rs):,.0f}")
    row("process CPU / wall", lambda rs: f"{statistics.median(r['cpu_share'] for r in rs):.2f}")
    row("rounds", lambda rs: f"{statistics.median(r['rounds'] for r in rs):.0f}")
    keys = sorted({k for rs in runs.values() for r in rs for k in r if isinstance(r[k], list)})
    for key in keys:
        row(
            key,
            lambda rs, k=key: (
                f"{statistics.median(statistics.median(r[k]) for r in rs if r.get(k)):.2f}"
                if any(r.get(k) for r in rs)
                else "-"
            ),
        )
    if args.anatomy_only:
        return
    print(
        f"\nRounds in flight, {args.jobs:,} no-op jobs (jobs/s, median (min-max) of {args.reps})\n"
    )
    print("| drain | jobs/s |")
    print("|---|---|")
    for figure, *_ in flight:
        print(f"| {figure.name} | {figure.cell()} |")
