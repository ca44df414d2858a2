"""The enqueue targets of issue 30, each a ratio measured in one run (make bench-enqueue).

Usage: ``python -m bench enqueue [--reps 5] [--count 1000] [--batches 10] [--no-peers]
[--profile] [--round-trips]``.
Every repetition runs each case below once, in one scratch database (the peers in their
own), so all see the same load; each target is the ratio of medians, printed as held or
not, with the load average:

- *batch*: ``enqueue_many`` of 1,000 no-op jobs per transaction beside a raw psycopg
  multi-row ``INSERT ... VALUES`` of the same rows (`raw.insert_rows`), and beside
  PGQueuer's batch enqueue (``Queries.enqueue`` of lists of 1,000); target >= 0.9x raw,
  >= 1.0x PGQueuer. Two more raw forms of the same rows explain the ratios: ``INSERT ...
  SELECT FROM unnest`` of one array per column (PGQueuer's form) and ``FROM
  jsonb_to_recordset`` of one JSON array (`enqueue_many`'s form), `raw.insert_arrays`.
  ``enqueue_many(..., ids_only=True)`` of the same rows has the same two targets: it
  returns ids as PGQueuer does, where the default returns mapped rows.
- *marginal*: inside one open ``Session`` transaction, the cost of one more
  ``jobs.enqueue`` beside one more ``session.execute(insert(Job).values(...))`` of the
  same row on the same session (chunks of each alternate); target <= 1.25x.
- *whole*: ``with Session(engine) as s, s.begin(): jobs.enqueue(...)`` (`throughput.enqueue_single`)
  beside PGQueuer's enqueue inside ``conn.transaction()`` (target >= 1.0x) and its
  autocommit enqueue (target >= 0.65x); with the Session's own floor (the same ``with``
  around a raw psycopg INSERT on the session's connection, `session_floor`) and a raw
  psycopg INSERT per transaction (`throughput.raw_insert`), which show what the Session costs,
  and the same floor sending enqueue's own INSERT (which shows what the statement costs
  the server beside the plain one).

``--no-peers`` skips PGQueuer (its virtualenv is `peers.peers_python`, made on first use).
``--round-trips`` prints the statements one enqueue sends; ``--profile`` runs the
single-enqueue loop under cProfile and prints the top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, insert, text
from sqlalchemy.orm import Session

from bench import targets
from bench.support import throughput
from bench.support.app import Job, jobs
from bench.support.database import Database, scratch
from bench.support.timing import log
from sa_jobqueue.driver.registry import driver_for

#: Jobs per transaction of the batch cases.
BATCH = 1_000


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


def session_floor(url: str, count: int, *, own_statement: bool = False) -> float:
    """What `throughput.enqueue_single`'s Session costs alone: the raw INSERT on its connection.

    ``with Session(engine) as s, s.begin()`` around the raw benchmark's statement,
    sent on the session's own psycopg connection (no SQLAlchemy statement at all):
    the most any enqueue inside that ``with`` can reach. With `own_statement`, the
    statement is the one `jobs.enqueue` sends (``ON CONFLICT DO NOTHING``, its
    ``RETURNING``), its row fetched: what is left between it and the enqueue is the
    library's Python, not the server's work.
    """
    statement = (
        "INSERT INTO jobs (kind, queue, payload, priority, max_attempts) "
        "VALUES (%s, %s, %s::jsonb, %s, %s)"
    )
    engine = create_engine(url)
    try:
        with Session(engine) as session, session.begin():
            session.connection().execute(text("SELECT 1"))
            if own_statement:
                jobs.enqueue(session, "noop", {"n": -1})
                session.rollback()
                one = jobs._inserter._ones["now", (), ()]  # a job with no option's shape
                # The statement the PostgreSQL driver compiled for that shape (`Direct`).
                driver: Any = driver_for(engine, Job)
                direct, _ = driver._enqueue._ones[one.shape]
                statement = direct._sql[engine.dialect]
        started = time.perf_counter()
        for i in range(count):
            with Session(engine) as session, session.begin():
                driver = session.connection().connection.driver_connection
                assert driver is not None
                if own_statement:
                    params = {
                        "new_queue": "default",
                        "new_kind": "noop",
                        "new_payload": json.dumps({"n": i}),
                        "new_priority": 0,
                        "new_max_attempts": 20,
                    }
                    driver.execute(statement, params).fetchone()
                else:
                    driver.execute(statement, ["noop", "default", json.dumps({"n": i}), 0, 20])
        return count / (time.perf_counter() - started)
    finally:
        engine.dispose()


def marginal(url: str, count: int, chunk: int = 50) -> tuple[float, float]:
    """Seconds per call of ``jobs.enqueue`` and of a raw ORM-less insert, in one transaction.

    Both run on one session, in one open transaction, `count` calls each, in
    alternating chunks of `chunk` calls (so both see the same load and the same
    session, whose identity map grows with the enqueued jobs as an app's would).
    The raw call is ``session.execute(insert(Job).values(...))`` of the row
    ``enqueue`` writes: kind, queue, payload, priority, max_attempts.
    """
    engine = create_engine(url)
    spent = {"enqueue": 0.0, "raw": 0.0}
    try:
        with Session(engine) as session, session.begin():
            for i in range(10):  # warm both statements (and psycopg's prepared ones)
                jobs.enqueue(session, "noop", {"n": -i})
                session.execute(
                    insert(Job).values(
                        kind="noop", queue="default", payload={"n": -i}, priority=0, max_attempts=20
                    )
                )
            for start in range(0, count, chunk):
                started = time.perf_counter()
                for i in range(start, min(start + chunk, count)):
                    jobs.enqueue(session, "noop", {"n": i})
                spent["enqueue"] += time.perf_counter() - started
                started = time.perf_counter()
                for i in range(start, min(start + chunk, count)):
                    session.execute(
                        insert(Job).values(
                            kind="noop",
                            queue="default",
                            payload={"n": i},
                            priority=0,
                            max_attempts=20,
                        )
                    )
                spent["raw"] += time.perf_counter() - started
        return spent["enqueue"] / count, spent["raw"] / count
    finally:
        engine.dispose()


def profile(url: str, count: int) -> None:
    """cProfile of `count` enqueues, one per transaction; the costliest entries."""
    profiler = cProfile.Profile()
    profiler.enable()
    throughput.enqueue_single(url, count)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(30)


class Figures:
    """Rates (or seconds) per case, one per repetition; medians and ratios of medians."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def add(self, name: str, value: float) -> float:
        self.values.setdefault(name, []).append(value)
        return value

    def median(self, name: str) -> float:
        return statistics.median(self.values[name])

    def cell(self, name: str, scale: float = 1.0, unit: str = "/s") -> str:
        values = [v * scale for v in self.values[name]]
        return f"{statistics.median(values):,.0f}{unit} ({min(values):,.0f}-{max(values):,.0f})"


def peer_rate(python: Path, server_url: str, action: str, count: int) -> float:
    """PGQueuer's rate for `action` (``enqueue``, ``enqueue_tx``, ``enqueue_many``)."""
    from bench.scenarios import peers

    return peers.enqueue(python, "pgqueuer", server_url, count, action)


#: This script's labels, by the name bench/targets.py gives each target.
TARGET_NAMES = {
    "enqueue_many / raw multi-row INSERT": "1 batch enqueue / raw multi-row INSERT",
    "enqueue_many / PGQueuer batch": "1 batch enqueue / PGQueuer batch",
    "enqueue_many(ids_only=True) / raw multi-row INSERT": (
        "1 batch enqueue, ids only / raw multi-row INSERT"
    ),
    "enqueue_many(ids_only=True) / PGQueuer batch": "1 batch enqueue, ids only / PGQueuer batch",
    "marginal enqueue / raw session.execute(insert)": (
        "2 marginal enqueue / raw session.execute(insert)"
    ),
    "whole enqueue / PGQueuer in a transaction": "2 whole enqueue / PGQueuer in a transaction",
    "whole enqueue / PGQueuer autocommit": "2 whole enqueue / PGQueuer autocommit",
}


def target(label: str, ratio: float, goal: float, *, at_most: bool = False) -> str:
    targets.record(TARGET_NAMES[label], ratio, goal, at_most=at_most)
    held = ratio <= goal if at_most else ratio >= goal
    sign = "<=" if at_most else ">="
    return f"- {label} {sign} {goal:g}x: {ratio:.2f}x -- {'holds' if held else 'does not hold'}"


QUICK = ["--reps", "1", "--count", "100", "--batches", "2", "--no-peers"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--count", type=int, default=1_000, help="single enqueues per case")
    parser.add_argument("--batches", type=int, default=10, help="batches of 1,000 per case")
    parser.add_argument("--no-peers", action="store_true", help="skip PGQueuer")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--round-trips", action="store_true")


def main(args: argparse.Namespace, db: Database) -> None:
    python = None
    if not args.no_peers:
        from bench.scenarios import peers

        try:
            python = peers.peers_python()
        except peers.NotInstalledError as error:
            for label in TARGET_NAMES.values():
                if "PGQueuer" in label:
                    print(targets.unmeasured(label, f"{error.packages[0]} does not install"))
    count, batches = args.count, args.batches
    server_url = db.url
    with scratch(server_url) as url:
        if args.round_trips:
            statements = round_trips(url)
            print(f"statements per enqueue: {len(statements)}")
            for statement in statements:
                print(f"  {statement}")
        if args.profile:
            profile(url, count)
            return
        f = Figures()
        load = os.getloadavg()
        for rep in range(args.reps):
            tag = f"rep {rep + 1}/{args.reps}"
            many = f.add("many", throughput.enqueue_many(url, batches, BATCH))
            ids = f.add("ids", throughput.enqueue_many(url, batches, BATCH, ids_only=True))
            raw_many = f.add("raw_many", throughput.raw_insert(url, batches, BATCH))
            unnest = f.add("raw_unnest", throughput.raw_insert(url, batches, BATCH, "unnest"))
            as_json = f.add("raw_json", throughput.raw_insert(url, batches, BATCH, "json"))
            log(
                f"{tag}: enqueue_many {many:,.0f}/s, ids only {ids:,.0f}/s, "
                f"raw multi-row {raw_many:,.0f}/s, "
                f"unnest {unnest:,.0f}/s, jsonb_to_recordset {as_json:,.0f}/s"
            )
            ours, theirs = marginal(url, count)
            f.add("marginal", ours)
            f.add("marginal_raw", theirs)
            log(f"{tag}: marginal {ours * 1e6:.0f} us, raw execute {theirs * 1e6:.0f} us")
            single = f.add("single", throughput.enqueue_single(url, count))
            floor = f.add("floor", session_floor(url, count))
            f.add("floor_own", session_floor(url, count, own_statement=True))
            raw1 = f.add("raw_single", throughput.raw_insert(url, count, 1))
            log(f"{tag}: enqueue {single:,.0f}/s, floor {floor:,.0f}/s, raw {raw1:,.0f}/s")
            if python is not None:
                pg_many = f.add(
                    "pg_many", peer_rate(python, server_url, "enqueue_many", batches * BATCH)
                )
                pg_tx = f.add("pg_tx", peer_rate(python, server_url, "enqueue_tx", count))
                pg = f.add("pg", peer_rate(python, server_url, "enqueue", count))
                log(f"{tag}: PGQueuer batch {pg_many:,.0f}/s, tx {pg_tx:,.0f}/s, {pg:,.0f}/s")
    print(f"\n{args.reps} interleaved repetitions; median (min-max)\n")
    print("| case | rate |")
    print("|---|---|")
    rows = [
        ("enqueue_many, 1,000 per transaction", "many"),
        ("enqueue_many(ids_only=True), 1,000 per transaction", "ids"),
        ("raw multi-row INSERT, 1,000 per transaction", "raw_many"),
        ("raw INSERT ... SELECT FROM unnest(5 arrays), 1,000 per transaction", "raw_unnest"),
        ("raw INSERT ... SELECT FROM jsonb_to_recordset(1 JSON param), 1,000 per tx", "raw_json"),
        ("PGQueuer batch enqueue, 1,000 per call", "pg_many"),
        ("with Session, s.begin(): enqueue", "single"),
        ("with Session, s.begin(): raw psycopg INSERT (the Session's floor)", "floor"),
        ("the same floor with enqueue's own INSERT (ON CONFLICT, RETURNING)", "floor_own"),
        ("raw psycopg INSERT, 1 per transaction", "raw_single"),
        ("PGQueuer enqueue in conn.transaction()", "pg_tx"),
        ("PGQueuer enqueue, autocommit", "pg"),
    ]
    for label, name in rows:
        if name in f.values:
            print(f"| {label} | {f.cell(name)} |")
    for label, name in (
        ("jobs.enqueue in an open transaction, per call", "marginal"),
        ("session.execute(insert(Job).values(...)), per call", "marginal_raw"),
    ):
        print(f"| {label} | {f.cell(name, 1e6, ' us')} |")
    print("\nTargets:")
    print(
        target("enqueue_many / raw multi-row INSERT", f.median("many") / f.median("raw_many"), 0.9)
    )
    print(
        f"(enqueue_many / raw unnest: {f.median('many') / f.median('raw_unnest'):.2f}x; "
        f"/ raw jsonb_to_recordset: {f.median('many') / f.median('raw_json'):.2f}x)"
    )
    ids_ratio = f.median("ids") / f.median("raw_many")
    print(target("enqueue_many(ids_only=True) / raw multi-row INSERT", ids_ratio, 0.9))
    if "pg_many" in f.values:
        print(target("enqueue_many / PGQueuer batch", f.median("many") / f.median("pg_many"), 1.0))
        ids_ratio = f.median("ids") / f.median("pg_many")
        print(target("enqueue_many(ids_only=True) / PGQueuer batch", ids_ratio, 1.0))
    ratio = f.median("marginal") / f.median("marginal_raw")
    print(target("marginal enqueue / raw session.execute(insert)", ratio, 1.25, at_most=True))
    if "pg_tx" in f.values:
        print(
            target(
                "whole enqueue / PGQueuer in a transaction",
                f.median("single") / f.median("pg_tx"),
                1.0,
            )
        )
        print(
            target("whole enqueue / PGQueuer autocommit", f.median("single") / f.median("pg"), 0.65)
        )
    print(
        f"(the Session's floor / raw INSERT per transaction: "
        f"{f.median('floor') / f.median('raw_single'):.2f}x; "
        f"enqueue / the floor: {f.median('single') / f.median('floor'):.2f}x; "
        f"the floor with enqueue's own INSERT / the floor: "
        f"{f.median('floor_own') / f.median('floor'):.2f}x)"
    )
    if "pg_tx" in f.values:
        print(
            f"(the Session's floor / PGQueuer in a transaction: "
            f"{f.median('floor') / f.median('pg_tx'):.2f}x, / PGQueuer autocommit: "
            f"{f.median('floor') / f.median('pg'):.2f}x: what an enqueue costing nothing "
            "above the floor would reach)"
        )
    end = os.getloadavg()
    print(
        f"load average at start {' '.join(f'{x:.2f}' for x in load)}, "
        f"at end {' '.join(f'{x:.2f}' for x in end)}; {time.strftime('%H:%M:%S')}"
    )
