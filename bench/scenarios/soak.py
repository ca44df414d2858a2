"""A soak at a steady enqueue rate with the archive on: the jobs table stays bounded, no job lost.

Usage: ``python -m bench soak [--minutes 60] [--rate 1000] [--workers 2]``.

On a throwaway PostgreSQL with autovacuum on, as production runs
(`bench.support.database.autovacuum_server`; the machine's own server has it off), in a
scratch database migrated to head: ``--workers`` real ``sa-jobqueue worker`` processes
(``bench.support.app:jobs``, lease-mode no-op jobs) run with ``--archive-after 30s``,
``--archive-partition 5m`` and ``--archive-retention 15m`` (options here), so finished
jobs move to ``jobs_archive`` half a minute after they end, its partitions roll every
five minutes and old ones are dropped while the run goes on. This process enqueues
``--rate`` no-op jobs a second for ``--minutes`` (``enqueue_many`` each tenth of a second,
catching up when late), and a sampler thread records every ``--sample-every`` seconds
the jobs table's size (``pg_total_relation_size``), its ``n_live_tup``/``n_dead_tup`` and
autovacuum count, the archive's size and the pending count.

Every closed archive partition is counted once (rows and sum of ids) as soon as nothing
more can land in it (its end older than ``archive_after`` + 60 s), before the retention
drops it. At the end, once the queue is drained and the workers are stopped, SQL counts
the done jobs in ``jobs`` and in the live partitions; with the dropped partitions' counts
they must equal the ids enqueued (count and sum: no job lost or duplicated), and the
partitions seen over the run must follow each other without a gap.

Results: bench/soak-results.md and bench/soak-results.png (size and dead tuples over time).
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from bench import targets
from bench.support import soak_report
from bench.support.app import jobs
from bench.support.database import Database, autovacuum_server, pg_settings, scratch
from bench.support.results import BENCH, place
from bench.support.timing import load, log
from bench.support.workers import ROOT
from sa_jobqueue.core.durations import parse_duration
from sa_jobqueue.ops.archive import partitions

QUICK = [
    "--minutes",
    "3",
    "--rate",
    "300",
    "--sample-every",
    "10",
    "--archive-after",
    "10s",
    "--archive-partition",
    "1m",
    "--archive-retention",
    "2m",
]
SERVER = False
#: A closed partition is counted once its end is older than archive_after + this.
SETTLE = 60.0

_SAMPLE = """
SELECT extract(epoch FROM clock_timestamp()) AS at,
       pg_total_relation_size('jobs') AS jobs_size,
       s.n_live_tup, s.n_dead_tup, s.autovacuum_count,
       (SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits
         WHERE inhparent = 'jobs_archive'::regclass) AS archive_size,
       (SELECT count(*) FROM jobs WHERE status = 'pending') AS pending
FROM pg_stat_user_tables s WHERE s.relid = 'jobs'::regclass
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=60.0, help="how long jobs are enqueued")
    parser.add_argument("--rate", type=int, default=1000, help="jobs enqueued a second")
    parser.add_argument("--workers", type=int, default=2, help="sa-jobqueue worker processes")
    parser.add_argument("--concurrency", type=int, default=4, help="each worker's --concurrency")
    parser.add_argument("--sample-every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--archive-after", default="30s")
    parser.add_argument("--archive-partition", default="5m")
    parser.add_argument("--archive-retention", default="15m")


@dataclass
class Run:
    """What the enqueuer and the sampler record while the soak goes on."""

    engine: Engine
    started: float = field(default_factory=time.time)
    enqueued: int = 0
    id_sum: int = 0
    samples: list[dict[str, float]] = field(default_factory=list)
    #: partition name -> (low, high), every partition seen.
    seen: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)
    #: partition name -> (rows, sum of ids), counted once closed.
    counted: dict[str, tuple[int, int]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def sample(self) -> dict[str, float]:
        with self.engine.connect() as conn:
            row = conn.execute(text(_SAMPLE)).mappings().one()
        found = {key: float(value) for key, value in row.items()}
        found["minute"] = (found.pop("at") - self.started) / 60
        found["enqueued"] = float(self.enqueued)
        self.samples.append(found)
        log(
            f"soak {found['minute']:5.1f} min: jobs {found['jobs_size'] / 2**20:.1f} MiB,"
            f" live {found['n_live_tup']:,.0f}, dead {found['n_dead_tup']:,.0f},"
            f" archive {found['archive_size'] / 2**20:.1f} MiB,"
            f" pending {found['pending']:,.0f}, enqueued {self.enqueued:,}"
        )
        return found

    def count_closed(self, settle: float) -> None:
        """Count each partition once nothing more can land in it (before it is dropped)."""
        with self.engine.connect() as conn:
            now = conn.execute(text("SELECT now()")).scalar_one()
            for part in partitions(conn, jobs.model):
                self.seen[part.name] = (part.low, part.high)
                closed = (now - part.high).total_seconds() >= settle
                if closed and part.name not in self.counted:
                    self.counted[part.name] = _count(conn, part.name)
                    conn.rollback()

    def sampler(self, every: float, settle: float) -> None:
        next_sample = time.monotonic()
        while not self.stop.is_set():
            try:
                if time.monotonic() >= next_sample:
                    self.sample()
                    next_sample += every
                self.count_closed(settle)
            except Exception as error:  # noqa: BLE001 - recorded, the run goes on
                self.errors.append(repr(error))
                log(f"sampler: {error!r}")
            self.stop.wait(min(5.0, every))


def _count(conn: Any, name: str) -> tuple[int, int]:
    rows, ids = conn.execute(
        text(f"SELECT count(*), coalesce(sum(id), 0) FROM \"{name}\" WHERE status = 'done'")
    ).one()
    return int(rows), int(ids)


def _enqueue(run: Run, rate: int, seconds: float) -> float:
    """Enqueue `rate` jobs a second for `seconds`; return the seconds it took."""
    began = time.monotonic()
    tick = 0.1
    with Session(run.engine) as session:
        while (elapsed := time.monotonic() - began) < seconds:
            due = min(int(rate * elapsed) - run.enqueued, 10 * rate)
            if due > 0:
                with session.begin():
                    ids = jobs.enqueue_many(session, [("noop", {})] * due, ids_only=True)
                run.enqueued += len(ids)
                run.id_sum += sum(ids)
            time.sleep(max(0.0, tick - (time.monotonic() - began - elapsed)))
        due = int(rate * seconds) - run.enqueued
        if due > 0:  # the last tick's share
            with session.begin():
                ids = jobs.enqueue_many(session, [("noop", {})] * due, ids_only=True)
            run.enqueued += len(ids)
            run.id_sum += sum(ids)
    return time.monotonic() - began


def _workers(url: str, args: argparse.Namespace, log_file: Any) -> list[subprocess.Popen[bytes]]:
    program = str(Path(sys.executable).parent / "sa-jobqueue")
    command = [
        program,
        "worker",
        "bench.support.app:jobs",
        "--concurrency",
        str(args.concurrency),
        "--archive-after",
        args.archive_after,
        "--archive-partition",
        args.archive_partition,
        "--archive-retention",
        args.archive_retention,
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    return [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=log_file)
        for _ in range(args.workers)
    ]


def _drained(run: Run, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with run.engine.connect() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")
            ).scalar_one()
        if left == 0:
            return True
        time.sleep(1.0)
    return False


def _check(run: Run) -> dict[str, Any]:
    """Count by SQL: every id enqueued is done in jobs or the archive, once; no gap."""
    run.count_closed(settle=-1e9)  # the workers are stopped: every partition is final now
    with run.engine.connect() as conn:
        live = {p.name: _count(conn, p.name) for p in partitions(conn, jobs.model)}
        in_jobs = conn.execute(
            text("SELECT count(*), coalesce(sum(id), 0) FROM jobs WHERE status = 'done'")
        ).one()
        by_status: dict[str, int] = {
            str(status): int(n)
            for status, n in conn.execute(text("SELECT status, count(*) FROM jobs GROUP BY status"))
        }
        twice = conn.execute(
            text(
                "SELECT count(*) FROM (SELECT id FROM jobs UNION ALL SELECT id FROM jobs_archive)"
                " u GROUP BY id HAVING count(*) > 1"
            )
        ).all()
    dropped = {name: run.counted.get(name) for name in run.seen if name not in live}
    uncounted = [name for name, counts in dropped.items() if counts is None]
    rows = int(in_jobs[0]) + sum(c[0] for c in live.values())
    rows += sum(c[0] for c in dropped.values() if c)
    ids = int(in_jobs[1]) + sum(c[1] for c in live.values())
    ids += sum(c[1] for c in dropped.values() if c)
    ranges = sorted(run.seen.values())
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(ranges) if a[1] != b[0]]
    return {
        "enqueued": run.enqueued,
        "found": rows,
        "in_jobs": int(in_jobs[0]),
        "in_live_partitions": sum(c[0] for c in live.values()),
        "in_dropped_partitions": sum(c[0] for c in dropped.values() if c),
        "ids_match": ids == run.id_sum,
        "lost": run.enqueued - rows,
        "duplicated_live": len(twice),
        "by_status": by_status,
        "partitions_seen": len(ranges),
        "partitions_dropped": len(dropped),
        "partitions_uncounted": uncounted,
        "gaps": gaps,
        "first": ranges[0][0].isoformat() if ranges else "",
        "last": ranges[-1][1].isoformat() if ranges else "",
    }


def main(args: argparse.Namespace, db: Database) -> int:
    after = parse_duration(args.archive_after).total_seconds()
    retention = parse_duration(args.archive_retention).total_seconds()
    if retention < after + SETTLE + 30:
        raise SystemExit("--archive-retention must exceed --archive-after by 90 s at least")
    load_before = load(", ")
    log("starting a throwaway PostgreSQL with autovacuum on")
    with autovacuum_server() as server, scratch(server, prefix="sa_jobqueue_bench_soak") as url:
        settings = pg_settings(server)
        engine = create_engine(url, pool_size=4)
        run = Run(engine)
        worker_log = place(BENCH / "out" / "soak-workers.log")
        worker_log.parent.mkdir(exist_ok=True)
        with worker_log.open("w") as out:
            children = _workers(url, args, out)
            try:
                sampler = threading.Thread(
                    target=run.sampler, args=(args.sample_every, after + SETTLE), daemon=True
                )
                run.started = time.time()
                sampler.start()
                log(f"soak: {args.rate} jobs/s for {args.minutes:g} min, {args.workers} workers")
                seconds = _enqueue(run, args.rate, args.minutes * 60)
                drained = _drained(run, timeout=300)
                run.stop.set()
                sampler.join()
                run.sample()
            finally:
                for child in children:
                    child.terminate()
                for child in children:
                    child.wait(60)
            check = _check(run)
        engine.dispose()
    load_after = load(", ")
    check["drained"] = drained
    check["seconds"] = seconds
    check["rate"] = run.enqueued / seconds
    check["sampler_errors"] = run.errors
    log(f"soak check: {check}")
    verdicts = _verdicts(args, run, check)
    for line in verdicts:
        print(line)
    soak_report.write(args, run.samples, check, verdicts, settings, load_before, load_after)
    held = check["lost"] == 0 and check["ids_match"] and not check["gaps"] and drained
    return 0 if held and not check["partitions_uncounted"] else 1


def _verdicts(args: argparse.Namespace, run: Run, check: dict[str, Any]) -> list[str]:
    lines = [
        targets.record(
            "43 soak: jobs enqueued / the steady rate asked",
            check["rate"] / args.rate,
            0.99,
        ),
        targets.record("43 soak: jobs lost", abs(check["lost"]), 0, unit=" jobs", at_most=True),
        targets.record(
            "43 soak: gaps between the archive's partitions",
            len(check["gaps"]),
            0,
            unit=" gaps",
            at_most=True,
        ),
    ]
    half = [s for s in run.samples if s["minute"] <= args.minutes / 2]
    rest = [s for s in run.samples if s["minute"] > args.minutes / 2]
    if half and rest:
        first = max(s["jobs_size"] for s in half)
        second = max(s["jobs_size"] for s in rest)
        check["size_ratio"] = second / first
        lines.append(
            targets.record(
                "43 soak: the jobs table's largest size, second half / first half",
                second / first,
                1.5,
                at_most=True,
            )
        )
    return lines
