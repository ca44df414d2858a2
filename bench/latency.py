"""Wake-up latency and the enqueue cost of notifications.

Usage: ``python bench/latency.py [--quick] [--database-url URL] [--samples N] ...``
(``--help`` lists every knob). The server is ``--database-url``, else
``DATABASE_URL``, else a throwaway one (`sa_jobqueue.testing.throwaway_postgres`);
everything runs in a scratch database that is dropped afterwards.

1. Latency: one idle worker (a separate process, concurrency 1) and one producer.
   Each sample enqueues one job in its own transaction; the latency runs from the
   moment COMMIT is sent to the moment the handler starts (both clocks are this
   machine's ``time.time()``). With notifications (``listen=True``, poll every
   30 s) and polling only (``listen=False``, poll every ``--poll-interval``; jobs
   arrive at random moments between polls).
2. Enqueue throughput, per way of notifying: ``none`` (trigger dropped),
   ``trigger`` (the shipped statement-level trigger), ``hook`` (no trigger; a
   SQLAlchemy ``before_commit`` session hook sends ``pg_notify`` for the queues
   the transaction enqueued to) and ``row trigger`` (a per-row trigger, for
   comparison only). Single-row transactions (one `enqueue` + COMMIT each) and
   `enqueue_many` of 1,000 rows per transaction. Ways are interleaved repetition
   by repetition so that each sees the same load; figures are medians.

Prints a table and writes ``bench/latency-results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection as Pipe
from pathlib import Path

from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import DeclarativeBase, Session

from sa_jobqueue import JobContext, JobMixin, JobQueue, migration, statements
from sa_jobqueue.notifier import APPLICATION_NAME
from sa_jobqueue.testing import scratch_database, throwaway_postgres

HERE = Path(__file__).resolve().parent
QUEUE = "latency"


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
_pipe: Pipe | None = None  # the worker process's end


@jobs.task("ping", queue=QUEUE)
def ping(ctx: JobContext) -> None:
    """Report the moment the handler started."""
    assert _pipe is not None
    _pipe.send((ctx.id, time.time()))


# -- latency ---------------------------------------------------------------


def serve(url: str, listen: bool, poll_interval: float, pipe: Pipe) -> None:
    """The worker process: run until SIGTERM."""
    global _pipe
    _pipe = pipe
    engine = create_engine(url, pool_size=4)
    jobs.worker(engine, queues=[QUEUE], poll_interval=poll_interval, listen=listen).run()


def measure_latency(
    engine: Engine, url: str, *, listen: bool, poll_interval: float, samples: int
) -> list[float]:
    """Seconds from COMMIT to handler start, one idle worker, `samples` times."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=serve, args=(url, listen, poll_interval, theirs), daemon=True)
    process.start()
    try:
        if listen:
            _wait_for_listener(engine)
        _one(engine, ours, timeout=poll_interval * 3 + 30)  # warm up
        latencies = []
        for _ in range(samples):
            # Let the worker finish its round and go idle; with polling, arrive at a
            # random moment between two polls.
            time.sleep(random.uniform(0.02, 0.05 if listen else poll_interval))
            latencies.append(_one(engine, ours, timeout=poll_interval * 3 + 30))
        return latencies
    finally:
        process.terminate()
        process.join(30)


def _one(engine: Engine, pipe: Pipe, timeout: float) -> float:
    with Session(engine) as session:
        session.begin()
        job = jobs.enqueue(session, "ping")
        job_id = job.id
        sent = time.time()
        session.commit()
    if not pipe.poll(timeout):
        raise RuntimeError(f"job {job_id} did not start within {timeout}s")
    started_id, started = pipe.recv()
    assert started_id == job_id, (started_id, job_id)
    return float(started - sent)


def _wait_for_listener(engine: Engine, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = :name"
    )
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            if conn.execute(query, {"name": APPLICATION_NAME}).scalar():
                return
        time.sleep(0.05)
    raise RuntimeError("the worker's listener did not connect")


def percentile(values: list[float], p: float) -> float:
    """The `p`-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


# -- enqueue throughput ---------------------------------------------------------

WAYS = ("none", "trigger", "hook", "row trigger")


def set_way(engine: Engine, way: str) -> None:
    """Install the notification mechanism `way` on the jobs table (trigger DDL)."""
    with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
        migration.drop_notify_trigger("jobs")
        conn.execute(text("DROP FUNCTION IF EXISTS bench_notify_row() CASCADE"))
        if way == "trigger":
            migration.create_notify_trigger("jobs")
        elif way == "row trigger":
            channel = migration.channel_name("jobs")
            conn.execute(
                text(
                    "CREATE FUNCTION bench_notify_row() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    f"BEGIN PERFORM pg_notify('{channel}', NEW.queue); RETURN NULL; END $$"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER bench_notify_row AFTER INSERT ON jobs "
                    "FOR EACH ROW EXECUTE FUNCTION bench_notify_row()"
                )
            )


class HookSession(Session):
    """A session that notifies from a ``before_commit`` hook (the alternative design).

    `enqueue` would record each job's queue in ``session.info``; the hook sends one
    ``pg_notify`` per queue in the same transaction, so it is delivered on commit only.
    """


_NOTIFY = statements.notify(migration.channel_name("jobs"))


@event.listens_for(HookSession, "before_commit")
def _notify_before_commit(session: Session) -> None:
    queues = session.info.pop("sajq_queues", None)
    if queues:
        session.execute(_NOTIFY, {"queues": sorted(queues)})


def _session(engine: Engine, way: str) -> Session:
    return HookSession(engine) if way == "hook" else Session(engine)


def single_rows(engine: Engine, way: str, count: int) -> float:
    """Jobs/s enqueued one per transaction."""
    started = time.perf_counter()
    for i in range(count):
        with _session(engine, way) as session, session.begin():
            jobs.enqueue(session, "ping", {"i": i})
            if way == "hook":
                session.info.setdefault("sajq_queues", set()).add(QUEUE)
    return count / (time.perf_counter() - started)


def concurrent_single_rows(engine: Engine, way: str, count: int, clients: int) -> float:
    """Jobs/s enqueued one per transaction by `clients` threads at once.

    NOTIFY takes a database-wide lock at commit, so concurrent committers are where
    a notification's cost would show.
    """
    share = count // clients
    threads = [
        threading.Thread(target=single_rows, args=(engine, way, share)) for _ in range(clients)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return share * clients / (time.perf_counter() - started)


def batches(engine: Engine, way: str, count: int, size: int) -> float:
    """Jobs/s enqueued `size` per transaction with `enqueue_many`."""
    items = [("ping", {"i": i}) for i in range(size)]
    started = time.perf_counter()
    for _ in range(count):
        with _session(engine, way) as session, session.begin():
            jobs.enqueue_many(session, items)
            if way == "hook":
                session.info.setdefault("sajq_queues", set()).add(QUEUE)
    return count * size / (time.perf_counter() - started)


def measure_throughput(
    engine: Engine, *, reps: int, single: int, batch_count: int, batch_size: int, clients: int
) -> dict[tuple[str, str], list[float]]:
    """Rates per (way, case) and repetition."""
    rates: dict[tuple[str, str], list[float]] = {}
    cases: dict[str, Callable[[str], float]] = {
        "single": lambda way: single_rows(engine, way, single),
        "concurrent": lambda way: concurrent_single_rows(engine, way, single, clients),
        "batch": lambda way: batches(engine, way, batch_count, batch_size),
    }
    for rep in range(reps):
        ways = WAYS[rep % len(WAYS) :] + WAYS[: rep % len(WAYS)]  # rotate the order
        for way in ways:
            set_way(engine, way)
            for case, run in cases.items():
                with engine.begin() as conn:
                    conn.execute(text("TRUNCATE jobs RESTART IDENTITY"))
                run(way)  # untimed warm-up of caches and compiled statements
                rates.setdefault((way, case), []).append(run(way))
    set_way(engine, "trigger")
    return rates


# -- the report ---------------------------------------------------------------------


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with throwaway_postgres() as throwaway:
        yield throwaway


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--samples", type=int, default=300, help="latency samples, listen")
    parser.add_argument("--poll-samples", type=int, default=200, help="latency samples, polling")
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=5, help="throughput repetitions")
    parser.add_argument("--single", type=int, default=300, help="single-row txs per repetition")
    parser.add_argument("--batches", type=int, default=10, help="enqueue_many calls per rep")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4, help="threads, concurrent case")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few samples")
    parser.add_argument("--output", type=Path, default=HERE / "latency-results.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.poll_samples, args.reps = 30, 10, 1
        args.single, args.batches = 50, 2

    with server(args.database_url) as url, scratch_database(url, prefix="sa_jobqueue_lat") as db:
        migration.upgrade(db)
        engine = create_engine(db, pool_size=max(4, args.clients + 2))
        print("latency with notifications ...", file=sys.stderr)
        listen = measure_latency(engine, db, listen=True, poll_interval=30.0, samples=args.samples)
        print(f"latency polling every {args.poll_interval}s ...", file=sys.stderr)
        polling = measure_latency(
            engine, db, listen=False, poll_interval=args.poll_interval, samples=args.poll_samples
        )
        print("enqueue throughput ...", file=sys.stderr)
        rates = measure_throughput(
            engine,
            reps=args.reps,
            single=args.single,
            batch_count=args.batches,
            batch_size=args.batch_size,
            clients=args.clients,
        )
        with engine.connect() as conn:
            version = conn.execute(text("SHOW server_version")).scalar()
            sync = conn.execute(text("SHOW synchronous_commit")).scalar()
        engine.dispose()

    lines = [
        "# Wake-up latency and the enqueue cost of notifications",
        "",
        f"`{' '.join(['python', 'bench/latency.py', *(argv or sys.argv[1:])])}` on "
        f"{platform.node()}: {os.cpu_count()} CPUs, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end, PostgreSQL {version} "
        f"(synchronous_commit={sync}), Python {platform.python_version()}.",
        "",
        "## Enqueue -> handler start, one idle worker (ms, from COMMIT sent)",
        "",
        "| mode | samples | p50 | p95 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, values in (
        ("LISTEN/NOTIFY (poll 30 s)", listen),
        (f"polling only (poll {args.poll_interval:g} s)", polling),
    ):
        ms = [v * 1000 for v in values]
        lines.append(
            f"| {name} | {len(ms)} | {percentile(ms, 50):.1f} | {percentile(ms, 95):.1f} "
            f"| {percentile(ms, 99):.1f} | {max(ms):.1f} |"
        )
    lines += [
        "",
        f"## Enqueue throughput (jobs/s, median of {args.reps}; cost vs. no notification)",
        "",
        f"| way | single-row transactions | same, {args.clients} clients at once "
        f"| enqueue_many of {args.batch_size} |",
        "|---|---:|---:|---:|",
    ]
    cases = ("single", "concurrent", "batch")
    base = {case: statistics.median(rates[("none", case)]) for case in cases}
    for way in WAYS:
        cells = []
        for case in cases:
            values = rates[(way, case)]
            median = statistics.median(values)
            cost = "" if way == "none" else f" ({(1 - median / base[case]) * 100:+.1f} %)"
            cells.append(f"{median:,.0f}{cost} [{min(values):,.0f}-{max(values):,.0f}]")
        lines.append(f"| {way} | {' | '.join(cells)} |")
    lines += [
        "",
        "Cost is the throughput lost against `none` (positive: slower). Brackets: min-max of "
        "the repetitions. `hook` notifies from a `before_commit` session hook (one more "
        "statement per transaction); `row trigger` is shown for comparison only.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    args.output.write_text(report)


if __name__ == "__main__":
    main()
