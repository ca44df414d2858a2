"""Enqueue, one job per transaction, beside a raw psycopg single-row INSERT: interleaved.

Usage: ``python bench/enqueue.py [--reps 5] [--count 1000] [--profile] [--round-trips]``.
The server is ``--database-url``, else ``DATABASE_URL``. Every repetition runs
`run.enqueue_single` and then `run.raw_insert` (one row per transaction) in one
scratch database, so both see the same load; the ratio of medians is printed with
the load average, beside the Session's own floor (`session_floor`), with the client
CPU time per transaction of each (what the library can cut; the wall clock moves with
the machine's load). ``--round-trips`` counts the statements one enqueue sends (a
``before_cursor_execute`` listener; BEGIN and COMMIT are not statements there).
``--profile`` runs the enqueue loop under cProfile and prints the top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
from app import jobs  # noqa: E402
from sqlalchemy import create_engine, event, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402


def round_trips(url: str) -> list[str]:
    """The statements one warmed-up ``enqueue`` sends, in order (BEGIN/COMMIT apart)."""
    engine = create_engine(url)
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(" ".join(statement.split())[:100])

    try:
        with Session(engine) as session, session.begin():
            jobs.enqueue(session, "noop", {"n": -1})
        event.listen(engine, "before_cursor_execute", record)
        with Session(engine) as session, session.begin():
            jobs.enqueue(session, "noop", {"n": 0})
        return sent
    finally:
        engine.dispose()


def session_floor(url: str, count: int) -> float:
    """What `run.enqueue_single`'s Session costs alone: the raw INSERT on its connection.

    ``with Session(engine) as s, s.begin()`` around the raw benchmark's statement,
    sent on the session's own psycopg connection (no SQLAlchemy statement at all):
    the most any enqueue inside that ``with`` can reach.
    """
    statement = (
        "INSERT INTO jobs (kind, queue, payload, priority, max_attempts) "
        "VALUES (%s, %s, %s::jsonb, %s, %s)"
    )
    engine = create_engine(url)
    try:
        with Session(engine) as session, session.begin():
            session.connection().execute(text("SELECT 1"))
        started = time.perf_counter()
        for i in range(count):
            with Session(engine) as session, session.begin():
                driver = session.connection().connection.driver_connection
                assert driver is not None
                driver.execute(statement, ["noop", "default", json.dumps({"n": i}), 0, 20])
        return count / (time.perf_counter() - started)
    finally:
        engine.dispose()


def profile(url: str, count: int) -> None:
    """cProfile of `count` enqueues, one per transaction; the 30 costliest by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    run.enqueue_single(url, count)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--count", type=int, default=1_000, help="transactions per repetition")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--round-trips", action="store_true")
    args = parser.parse_args()
    with run.server(args.database_url) as server_url, run.database(server_url) as url:
        if args.round_trips:
            statements = round_trips(url)
            print(f"statements per enqueue: {len(statements)}")
            for statement in statements:
                print(f"  {statement}")
        if args.profile:
            profile(url, args.count)
            return
        ours: list[float] = []
        raw: list[float] = []
        floor: list[float] = []
        ratios: list[float] = []
        cpu: dict[str, list[float]] = {"enqueue": [], "raw": [], "floor": []}
        load = os.getloadavg()
        for rep in range(args.reps):
            started = time.process_time()
            ours.append(run.enqueue_single(url, args.count))
            cpu["enqueue"].append((time.process_time() - started) / args.count * 1e6)
            started = time.process_time()
            raw.append(run.raw_insert(url, args.count, 1))
            cpu["raw"].append((time.process_time() - started) / args.count * 1e6)
            started = time.process_time()
            floor.append(session_floor(url, args.count))
            cpu["floor"].append((time.process_time() - started) / args.count * 1e6)
            ratios.append(ours[-1] / raw[-1])
            run.log(
                f"rep {rep + 1}/{args.reps}: enqueue {ours[-1]:,.0f}/s, raw {raw[-1]:,.0f}/s "
                f"({ratios[-1]:.0%}), Session + raw INSERT {floor[-1]:,.0f}/s "
                f"({floor[-1] / raw[-1]:.0%}); client CPU {cpu['enqueue'][-1]:.0f}, "
                f"{cpu['raw'][-1]:.0f}, {cpu['floor'][-1]:.0f} us per transaction"
            )
        a, b = statistics.median(ours), statistics.median(raw)
        print(
            f"enqueue, 1 per transaction: {a:,.0f}/s ({min(ours):,.0f}-{max(ours):,.0f}); "
            f"raw INSERT: {b:,.0f}/s ({min(raw):,.0f}-{max(raw):,.0f}); "
            f"ratio of medians {a / b:.0%} (per rep {min(ratios):.0%}-{max(ratios):.0%}); "
            f"Session + raw INSERT: {statistics.median(floor):,.0f}/s "
            f"({statistics.median(floor) / b:.0%}); "
            f"client CPU per transaction: enqueue {statistics.median(cpu['enqueue']):.0f} us, "
            f"raw {statistics.median(cpu['raw']):.0f} us, "
            f"Session + raw {statistics.median(cpu['floor']):.0f} us; "
            f"load at start {', '.join(f'{x:.2f}' for x in load)}, "
            f"at end {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"{time.strftime('%H:%M:%S')}"
        )


if __name__ == "__main__":
    main()
