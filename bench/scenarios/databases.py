"""PostgreSQL, SQLite and MariaDB in one run, each beside its raw SQL limit (make bench-databases).

Usage: ``python -m bench databases [--reps N] [--jobs N] [--only NAME ...] [--no-peers] ...``
(``--help`` lists every knob). Issues 38 item 6, 39 item 5 and 42 item 1: on this
machine, in one run, for each database:

- enqueue: ``jobs.enqueue`` one per transaction, and ``enqueue_many`` of ``--batch`` jobs
  per transaction, beside a raw multi-row ``INSERT`` of the same batch;
- drains of ``--jobs`` pre-enqueued no-op jobs (lease mode) at concurrency 1, 16 and 32
  on PostgreSQL and MariaDB (one worker process) and 1 and 8 on SQLite (8: ``--processes``
  worker processes of 8 / processes each), each beside the raw claim-and-complete loop on
  the same database with the same processes, each at the worker's batch size (its
  concurrency + `WorkerConfig.prefetch` per transaction): PostgreSQL ``FOR UPDATE SKIP
  LOCKED`` + one batched done (`bench.support.raw`), MariaDB ``SELECT ... FOR UPDATE SKIP
  LOCKED`` then UPDATE by id (`bench.support.raw_mysql`), SQLite ``UPDATE ... WHERE id IN
  (SELECT ... LIMIT n) RETURNING`` under ``BEGIN IMMEDIATE`` (`bench.support.raw_sqlite`).
  Target: the drain >= 75 % of its raw loop, per database and concurrency;
- a drain at 16 (SQLite: 1) with ``--beside`` done jobs ahead of it in claim order (a
  day's retention of a busy queue): its share of the same drain on an empty table;
- wake-up latency p50/p99, commit sent -> handler start, one idle worker process at its
  defaults (PostgreSQL: LISTEN; SQLite: its watch of the file's commits; MariaDB: its
  watch of the table's highest id);
- on SQLite, the embedded peers at their documented defaults (huey's ``SqliteHuey``, DBOS
  on SQLite; installed into ``bench/out/embedded-venv`` on first use, driven by
  ``bench/support/embedded_drive.py``): enqueue one by one, drains at 1 and 8, wake-up.
  Target: sa-jobqueue's drain >= the faster of the two at 1 and 8.

PostgreSQL is the runner's (``--database-url``/``DATABASE_URL``, else a throwaway one),
migrated in a scratch database; SQLite a scratch file (WAL) under ``bench/out/``; MariaDB
a scratch database on ``--mariadb-url`` (root on 127.0.0.1:3306). SQLite and MariaDB get
their tables from ``create_all``. The repetitions interleave every case; figures are
medians. A case sa-jobqueue cannot run on a database yet (its driver lacks an operation)
is reported as such, and the rest still run. Writes ``bench/databases-results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import time
import venv
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from bench import targets
from bench.scenarios.latency import measure_latency, target_lines
from bench.support.app import KINDS, Job, jobs
from bench.support.database import Database, scratch, scratch_mysql, scratch_sqlite
from bench.support.databases_report import BESIDE, Results, report
from bench.support.results import BENCH, write
from bench.support.throughput import (
    enqueue_many,
    enqueue_single,
    library_drain,
    raw_drain,
    raw_for,
    raw_insert,
)
from bench.support.timing import Figure, log
from sa_jobqueue.schema.status_indexes import PENDING
from sa_jobqueue.worker.config import DEFAULT_PREFETCH

NAMES = ("postgresql", "sqlite", "mariadb")
CONCURRENCIES = {"postgresql": (1, 16, 32), "sqlite": (1, 8), "mariadb": (1, 16, 32)}
#: The databases whose idle workers are woken between polls (LISTEN; SQLite's and
#: MariaDB's watch).
WOKEN = frozenset({"postgresql", "sqlite", "mariadb"})
#: What a worker calls on the driver in a no-op lease drain: probed before measuring.
DRAIN_NEEDS = (
    "job_claim", "job_complete", "job_heartbeat", "jobs_still_owned", "job_sweep",
    "queue_next_due", "lock_try", "queues_paused", "clock_now",
    "worker_register", "worker_elsewhere", "worker_deregister", "workers_expire",
)  # fmt: skip
PEERS = ("huey", "dbos")
PEER_PACKAGES = ("huey>=2.5", "dbos>=2.0")
VENV = BENCH / "out" / "embedded-venv"
EMBEDDED_DRIVE = BENCH / "support" / "embedded_drive.py"
FILES = BENCH / "out" / "databases"
#: The jobs of the drain that shows a drain's fixed cost.
FIXED_JOBS = 10
#: One measurement: jobs/s.
Case = Callable[[], float]
QUICK = [
    "--reps", "1", "--jobs", "300", "--enqueues", "50", "--batches", "2",
    "--wake-samples", "5", "--polled-wake-samples", "3", "--dbos-jobs-per-slot", "3",
]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=5000, help="no-op jobs per drain")
    parser.add_argument("--enqueues", type=int, default=500, help="single enqueues per rep")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per enqueue_many")
    parser.add_argument("--batches", type=int, default=4, help="enqueue_many calls per rep")
    parser.add_argument("--processes", type=int, default=4, help="SQLite's worker processes at 8")
    parser.add_argument(
        "--wake-samples", type=int, default=100, help="woken workers: LISTEN, a watch"
    )
    parser.add_argument("--polled-wake-samples", type=int, default=20, help="the polled peers")
    parser.add_argument(
        "--dbos-jobs-per-slot",
        type=int,
        default=15,
        help="DBOS drains this many jobs per unit of concurrency (its 1 s poll: ~15 s each)",
    )
    parser.add_argument(
        "--beside",
        type=int,
        default=100_000,
        help="done jobs ahead in claim order of one more drain's (0: no such drain)",
    )
    parser.add_argument("--mariadb-url", default="mariadb+pymysql://root@127.0.0.1:3306/")
    parser.add_argument("--only", action="append", choices=NAMES, help="these databases only")
    parser.add_argument("--no-peers", action="store_true", help="skip huey and DBOS")
    parser.add_argument("--output", type=Path, default=BENCH / "databases-results.md")


def missing(url: str, needs: tuple[str, ...]) -> str:
    """The operations of `needs` the driver of `url`'s database lacks, as a note ('' if none)."""
    from sa_jobqueue.driver.registry import driver_for

    engine = create_engine(url)
    try:
        driver = driver_for(engine, Job)
    finally:
        engine.dispose()
    lacking = [name for name in needs if not callable(getattr(driver, name, None))]
    if not lacking:
        return ""
    more = f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
    return f"cannot run yet: its driver has no {', '.join(lacking[:3])}{more}"


def shape(name: str, concurrency: int, processes: int) -> tuple[int, int]:
    """(worker processes, concurrency of each) of a drain: SQLite's 8 is over `processes`."""
    if name == "sqlite" and concurrency > 1:
        count = min(processes, concurrency)
        return count, concurrency // count
    return 1, concurrency


@contextlib.contextmanager
def database_url(name: str, db: Database, args: argparse.Namespace) -> Iterator[str]:
    """A scratch database of `name`'s kind with the bench's jobs table."""
    if name == "postgresql":
        with scratch(db.url) as url:
            yield url
    elif name == "sqlite":
        with scratch_sqlite(FILES) as url:
            yield url
    else:
        with scratch_mysql(args.mariadb_url) as url:
            yield url


def peers_python() -> Path:
    """The embedded peers' interpreter; the virtualenv is made (and they installed) once."""
    python = VENV / "bin" / "python"
    if not python.exists():
        venv.create(VENV, with_pip=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *PEER_PACKAGES], check=True)
    return python


def peer(python: Path, *args: object) -> dict[str, Any]:
    """One ``embedded_drive.py`` run: its JSON line."""
    import json

    done = subprocess.run(
        [python, EMBEDDED_DRIVE, *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} {args[2]}: {done.stderr.strip().splitlines()[-1:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def peer_case(
    python: Path,
    who: str,
    action: str,
    count: int,
    concurrency: int,
    costs: list[tuple[float, int]] | None = None,
) -> float:
    """Jobs/s of one peer's enqueue or drain, on a fresh SQLite file; a drain's CPU per job
    (µs) and peak RSS (KiB) are appended to `costs`."""
    FILES.mkdir(parents=True, exist_ok=True)
    path = FILES / f"{who}-{time.monotonic_ns()}.db"
    try:
        if action == "drain":
            peer(python, who, path, "fill", count, 1)
            result = peer(python, who, path, "drain", count, concurrency)
            if result["done"] != count:
                raise RuntimeError(f"{who} drained {result['done']} of {count}")
            if costs is not None:
                costs.append((result["cpu_seconds"] / count * 1e6, int(result["max_rss_kb"])))
        else:
            result = peer(python, who, path, action, count, 1)
        return float(result["rate"])
    finally:
        for leftover in FILES.glob(f"{path.name}*"):
            leftover.unlink()


def run_cases(reps: int, cases: list[tuple[Figure, Case]]) -> None:
    """Every case once per repetition, in order; a case that fails once is noted and dropped.

    A drain that fails drops the same database's other drains too (they would wait out
    the same timeout for the same reason).
    """
    for rep in range(reps):
        for figure, run in cases:
            if figure.note:
                continue
            try:
                rate = run()
            except Exception as error:  # noqa: BLE001 (noted in the report; the rest run)
                figure.note = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
                log(f"  rep {rep + 1}/{reps} {figure.name}: {figure.note}")
                who, _, case = figure.name.partition(" ")
                if case.startswith("drain "):
                    for other, _ in cases:
                        if other.name.startswith(f"{who} drain ") and not other.note:
                            other.note = f"not run: the drain at {case[6:]} {figure.note}"
                continue
            figure.rates.append(rate)
            log(f"  rep {rep + 1}/{reps} {figure.name}: {rate:,.0f}/s")


def wake(name: str, url: str, samples: int) -> list[float]:
    """Wake-up latencies (ms) of one idle worker process at its defaults on `url`."""
    engine = create_engine(url, pool_size=4)
    try:
        seconds = measure_latency(
            engine,
            url,
            listen=True,
            poll_interval=None,
            samples=samples,
            spacing=default_poll(engine),
            woken=name in WOKEN,
        )
        return [s * 1000 for s in seconds]
    finally:
        engine.dispose()


def default_poll(engine: Engine) -> float:
    """The seconds between a default worker's polls on `engine`'s database."""
    return float(jobs.worker(engine, listen=False).poll_interval)


def database_cases(
    name: str, url: str, args: argparse.Namespace, results: Results
) -> list[tuple[Figure, Case]]:
    """`name`'s cases: enqueues, and each concurrency's raw loop and drain."""
    cases: list[tuple[Figure, Case]] = [
        (results.figure(name, "enqueue 1"), partial(enqueue_single, url, args.enqueues)),
        (
            results.figure(name, "enqueue batch"),
            partial(enqueue_many, url, args.batches, args.batch),
        ),
        (
            results.figure(name, "raw insert batch"),
            partial(raw_insert, url, args.batches, args.batch),
        ),
    ]
    drains = missing(url, DRAIN_NEEDS)
    for c in CONCURRENCIES[name]:
        processes, each = shape(name, c, args.processes)
        batch = each + DEFAULT_PREFETCH
        results.shapes[(name, c)] = (processes, batch)
        raw = results.figure(name, f"raw {c}")
        cases.append((raw, partial(raw_drain, url, args.jobs, batch, processes)))
        ours = results.figure(name, f"drain {c}")
        ours.note = drains
        counted = partial(drain_rate, url, args.jobs, processes, each, results, (name, c))
        cases.append((ours, counted))
    # A drain's fixed cost (first claim, the empty claim and last acknowledgement at its
    # end): what a short drain's rate pays beside the raw loop's, which has none of it.
    fixed = results.figure(name, f"drain {FIXED_JOBS}")
    fixed.note = drains
    cases.append((fixed, partial(drain_rate, url, FIXED_JOBS, 1, 1)))
    if args.beside:
        # The same drain with a retention's worth of done jobs ahead of it in claim order:
        # what a claim walks on a database without partial indexes (MySQL) unless its
        # index keys on status (sajq_0013).
        beside = results.figure(name, "drain beside")
        beside.note = drains
        concurrency = BESIDE[name]
        cases.append((beside, partial(drain_beside, url, args.jobs, concurrency, args.beside)))
        if name == "mariadb":  # and with the claim's index as it was before sajq_0013
            before = results.figure(name, "drain beside, index before sajq_0013")
            before.note = drains
            old = partial(drain_beside, url, args.jobs, concurrency, args.beside, old_index=True)
            cases.append((before, old))
    return cases


def drain_beside(
    url: str, count: int, concurrency: int, done: int, *, old_index: bool = False
) -> float:
    """Jobs/s of a lease drain of `count` jobs with `done` done jobs ahead of them.

    `old_index` (MySQL): with ``ix_jobs_pending`` keyed as before revision ``sajq_0013``
    (no status), put back after the drain.
    """
    sql = raw_for(url)
    sql.truncate(url)
    sql.fill(url, KINDS["lease"], done)
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            finish = "UPDATE jobs SET status = 'done', attempts = 1, finished_at = run_at"
            conn.execute(text(finish))
            if old_index:
                conn.execute(text(PENDING.rebuild_sql("jobs", PENDING.columns)))
        try:
            # The worker says once that the index lacks status: expected here.
            expected = ("--expect-warning", "(revision sajq_0013)") if old_index else ()
            drained = library_drain(
                url, count, mode="lease", processes=1, concurrency=concurrency, fresh=False,
                timeout=300, extra_args=expected,
            )  # fmt: skip
        finally:
            if old_index:
                with engine.begin() as conn:
                    conn.execute(text(PENDING.rebuild_sql("jobs", PENDING.mysql_columns)))
    finally:
        engine.dispose()
    return drained.rate


def drain_rate(
    url: str,
    count: int,
    processes: int,
    concurrency: int,
    results: Results | None = None,
    key: tuple[str, int] | None = None,
) -> float:
    """Jobs/s of a lease drain of `count` no-op jobs by `processes` workers.

    With `results`, the drain's statements, commits and worker CPU per job are kept there
    under `key`.
    """
    drained = library_drain(
        url,
        count,
        mode="lease",
        processes=processes,
        concurrency=concurrency,
        timeout=60,
        extra_args=("--count-statements",),
    )
    if results is not None and key is not None:
        per_job = {k: v / count for k, v in drained.statements.items()}
        per_job["cpu_us"] = drained.cpu_seconds / count * 1e6
        results.statements.setdefault(key, []).append(per_job)
        results.costs.setdefault(key, []).append((per_job["cpu_us"], drained.max_rss_kb))
    return drained.rate


def peer_cases(
    python: Path, args: argparse.Namespace, results: Results
) -> list[tuple[Figure, Case]]:
    """huey's and DBOS's cases on SQLite: enqueue one by one, drains at 1 and 8."""
    cases: list[tuple[Figure, Case]] = []
    for who in PEERS:
        enqueue = partial(peer_case, python, who, "enqueue", args.enqueues, 1)
        cases.append((results.figure(who, "enqueue 1"), enqueue))
        for c in CONCURRENCIES["sqlite"]:
            count = min(args.jobs, args.dbos_jobs_per_slot * c) if who == "dbos" else args.jobs
            results.peer_jobs[(who, c)] = count
            cases.append(
                (
                    results.figure(who, f"drain {c}"),
                    partial(
                        peer_case,
                        python,
                        who,
                        "drain",
                        count,
                        c,
                        results.costs.setdefault((who, c), []),
                    ),
                )
            )
    return cases


def main(args: argparse.Namespace, db: Database) -> int:
    began = time.monotonic()
    results = Results(reps=args.reps, jobs=args.jobs, beside=args.beside)
    names = [n for n in NAMES if not args.only or n in args.only]
    with contextlib.ExitStack() as stack:
        urls = {}
        for name in names:
            try:
                urls[name] = stack.enter_context(database_url(name, db, args))
            except Exception as error:  # noqa: BLE001 (e.g. MariaDB down: said in the report)
                results.unreachable[name] = f"{type(error).__name__}: {error}"[:200]
                log(f"{name}: no database ({results.unreachable[name]})")
        cases: list[tuple[Figure, Case]] = []
        for name, url in urls.items():
            results.settings[name] = settings_of(name, url)
            cases += database_cases(name, url, args, results)
        python = None
        if "sqlite" in urls and not args.no_peers:
            python = peers_python()
            cases += peer_cases(python, args, results)
        run_cases(args.reps, cases)
        for name, url in urls.items():
            samples = args.wake_samples if name in WOKEN else args.polled_wake_samples
            if results.figure(name, "drain 1").note:
                results.wake_notes[name] = results.figure(name, "drain 1").note
                continue
            log(f"wake-up on {name}: {samples} samples")
            try:
                results.wakes[name] = wake(name, url, samples)
            except Exception as error:  # noqa: BLE001 (noted in the report)
                results.wake_notes[name] = f"failed: {error}"[:200]
        if python is not None:
            engine = create_engine(urls["sqlite"])
            poll = default_poll(engine)
            engine.dispose()
            for who in PEERS:
                log(f"wake-up of {who}: {args.polled_wake_samples} samples")
                try:
                    path = FILES / f"{who}-wake-{time.monotonic_ns()}.db"
                    found = peer(python, who, path, "wake", args.polled_wake_samples, 1, poll)
                    results.wakes[who] = list(found["latencies_ms"])
                except Exception as error:  # noqa: BLE001 (noted in the report)
                    results.wake_notes[who] = f"failed: {error}"[:200]
                finally:
                    for leftover in FILES.glob(f"{who}-wake-*"):
                        leftover.unlink()
    results.minutes = (time.monotonic() - began) / 60
    text = report(results, names, FIXED_JOBS)
    print(text)
    write(args.output, text)
    record_targets(results)
    return 0


def record_targets(results: Results) -> None:
    """The SQLite and MariaDB columns of the targets table (PostgreSQL's: drain_limit,
    latency)."""
    for name in ("sqlite", "mariadb"):
        for c in CONCURRENCIES[name]:
            ours, raw = results.figure(name, f"drain {c}"), results.figure(name, f"raw {c}")
            if ours.rates and raw.rates:
                with targets.measuring("databases", name):
                    target = f"7 lease drain / raw loop at concurrency {c}"
                    print(targets.record(target, ours.median / raw.median, 0.75))
        if results.wakes.get(name):  # the idle worker's watch (PostgreSQL's LISTEN: latency)
            with targets.measuring("databases", name):
                print("\n".join(target_lines(results.wakes[name])))
    record_costs(results)
    for c in CONCURRENCIES["sqlite"]:
        ours = results.figure("sqlite", f"drain {c}")
        peers = [results.figure(who, f"drain {c}") for who in PEERS]
        rates = [p.median for p in peers if p.rates]
        if ours.rates and rates:
            with targets.measuring("databases", "sqlite"):
                target = f"38 drain / faster of huey and DBOS at concurrency {c}"
                print(targets.record(target, ours.median / max(rates), 1.0))


def record_costs(results: Results) -> None:
    """Issue 42 item 4 on SQLite (PostgreSQL's: the peers scenario): CPU per job at 8 and
    the worker's peak RSS at 1 (one process each), against the lower of huey and DBOS."""
    cpu_target = "42.4 CPU per job drained (worker + database) / lowest peer's"
    rss_target = "42.4 worker's peak RSS / lowest peer's"
    with targets.measuring("databases", "sqlite"):
        for target, concurrency, index in ((cpu_target, 8, 0), (rss_target, 1, 1)):
            ours = results.cost("sqlite", concurrency)
            peers = [c[index] for who in PEERS if (c := results.cost(who, concurrency))]
            if ours and peers:
                print(targets.record(target, ours[index] / min(peers), 1.0, at_most=True))
    if "mariadb" in results.settings:
        with targets.measuring("databases", "mariadb"):
            why = "no peer is measured on MariaDB (huey's SqlHuey would be one: not set up)"
            for target in (cpu_target, rss_target):
                print(targets.unmeasured(target, why))


def settings_of(name: str, url: str) -> str:
    """What the report says of the database: version and durability settings."""
    from sqlalchemy import text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if name == "postgresql":
                rows = conn.execute(
                    text(
                        "SELECT name, setting FROM pg_settings WHERE name IN "
                        "('server_version', 'fsync', 'synchronous_commit', 'shared_buffers')"
                    )
                ).all()
                return ", ".join(f"{k} {v}" for k, v in rows)
            if name == "sqlite":
                version = conn.exec_driver_sql("SELECT sqlite_version()").scalar()
                journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
                sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
                return f"SQLite {version}, journal_mode {journal}, synchronous {sync} (2 = FULL)"
            version = conn.exec_driver_sql("SELECT version()").scalar()
            flush = conn.exec_driver_sql("SELECT @@innodb_flush_log_at_trx_commit").scalar()
            return f"MariaDB {version}, innodb_flush_log_at_trx_commit {flush}"
    finally:
        engine.dispose()
