"""Wake-up latency and the enqueue cost of notifications (bench/latency-results.md).

Usage: ``python -m bench latency [--quick] [--samples N] [--wake-only] ...``
(``--help`` lists every knob). Everything runs in a scratch database that is
dropped afterwards.

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
import itertools
import multiprocessing
import os
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any

from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import DeclarativeBase, Session

from bench import targets
from bench.support.database import Database, scratch
from bench.support.results import BENCH, command, write
from sa_jobqueue import JobContext, JobMixin, JobQueue, migration, statements
from sa_jobqueue.worker.listener import APPLICATION_NAME

QUEUE = "latency"
QUICK = ["--quick"]


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
_pipe: Pipe | None = None  # the worker process's end
#: ``--trace``: perf_counter_ns of the last wake-up's stages in the worker process
#: (CLOCK_MONOTONIC, the same clock in both processes on Linux).
_stages: dict[str, int] = {}


@jobs.task("ping", queue=QUEUE)
def ping(ctx: JobContext) -> None:
    """Report the moment the handler started."""
    assert _pipe is not None
    started = time.time()
    if _stages:
        _stages["handler"] = time.perf_counter_ns()
        _pipe.send((ctx.id, started, dict(_stages)))
        _stages.clear()
        return
    _pipe.send((ctx.id, started, None))


def _trace_stages() -> None:
    """Wrap the wake-up path's steps to stamp `_stages` (bench only, in the worker process)."""
    from sa_jobqueue.worker import claimer, handlers, loop

    def stamp(cls: Any, name: str, stage: str, after: bool = False) -> None:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not after:
                _stages.setdefault(stage, time.perf_counter_ns())
            result = original(*args, **kwargs)
            if after and result:
                _stages.setdefault(stage, time.perf_counter_ns())
            return result

        setattr(cls, name, wrapper)

    original_notify = loop.ClaimLoop.on_notify

    def on_notify(self: Any, queue: str | None, run_at: float | None = None) -> None:
        if queue is not None:
            _stages.clear()
            _stages["notified"] = time.perf_counter_ns()
        original_notify(self, queue, run_at)

    loop.ClaimLoop.on_notify = on_notify  # type: ignore[method-assign]
    stamp(loop.ClaimLoop, "round", "round")
    stamp(claimer.Claimer, "claim", "claimed", after=True)
    stamp(handlers.Handlers, "dispatch", "dispatched")
    if os.environ.get("LATENCY_TRACE_FINE"):
        from sa_jobqueue.driver.postgres import driver as postgres_driver

        stamp(postgres_driver.PostgresDriver, "job_claim", "execute")
        stamp(postgres_driver.PostgresDriver, "_claimed", "fetched")


# -- latency ---------------------------------------------------------------


def serve(
    url: str, listen: bool, poll_interval: float | None, pipe: Pipe, trace: bool = False
) -> None:
    """The worker process: run until SIGTERM (`poll_interval` None: the worker's default)."""
    global _pipe
    _pipe = pipe
    if trace:
        _trace_stages()
    engine = create_engine(url, pool_size=4)
    # LATENCY_ASYNC_COMMIT=1: the claim's COMMIT skips the WAL flush (what it costs).
    asynchronous = bool(os.environ.get("LATENCY_ASYNC_COMMIT"))
    polling = {} if poll_interval is None else {"poll_interval": poll_interval}
    jobs.worker(
        engine,
        queues=[QUEUE],
        listen=listen,
        asynchronous_commit=asynchronous,
        **polling,
    ).run()


#: The wake-up's stages, in order, as `_trace_stages` stamps them (``sent``: COMMIT sent).
STAGES = ("sent", "committed", "notified", "round", "claimed", "dispatched", "handler")
#: With ``LATENCY_TRACE_FINE=1`` in the environment: the claim's steps too.
FINE_STAGES = (
    "sent",
    "committed",
    "notified",
    "round",
    "execute",
    "fetched",
    "claimed",
    "dispatched",
    "handler",
)


def measure_latency(
    engine: Engine,
    url: str,
    *,
    listen: bool,
    poll_interval: float | None,
    samples: int,
    trace: list[dict[str, int]] | None = None,
    spacing: float | None = None,
    woken: bool | None = None,
) -> list[float]:
    """Seconds from COMMIT to handler start, one idle worker, `samples` times.

    With `trace`, each sample's stage stamps (ns from COMMIT sent) are appended to it.
    `poll_interval` None leaves the worker its default. Unless the worker is `woken`
    between polls (default: `listen`; SQLite's watch too), samples arrive at random
    moments up to `spacing` seconds apart (default: `poll_interval`).
    """
    woken = listen if woken is None else woken
    gap = spacing if spacing is not None else poll_interval
    if gap is None:
        raise ValueError("measure_latency: give spacing where poll_interval is the default")
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    args = (url, listen, poll_interval, theirs, trace is not None)
    process = ctx.Process(target=serve, args=args, daemon=True)
    process.start()
    try:
        if listen and engine.dialect.name == "postgresql":
            _wait_for_listener(engine)
        _one(engine, ours, timeout=gap * 3 + 30)  # warm up
        latencies = []
        for _ in range(samples):
            # Let the worker finish its round and go idle; with polling, arrive at a
            # random moment between two polls.
            time.sleep(random.uniform(0.02, 0.05 if woken else gap))
            latencies.append(_one(engine, ours, timeout=gap * 3 + 30, trace=trace))
        return latencies
    finally:
        process.terminate()
        process.join(30)


def _one(
    engine: Engine, pipe: Pipe, timeout: float, trace: list[dict[str, int]] | None = None
) -> float:
    with Session(engine) as session:
        session.begin()
        job = jobs.enqueue(session, "ping")
        job_id = job.id
        sent = time.time()
        sent_ns = time.perf_counter_ns()
        session.commit()
        committed_ns = time.perf_counter_ns()
    if not pipe.poll(timeout):
        raise RuntimeError(f"job {job_id} did not start within {timeout}s")
    started_id, started, stages = pipe.recv()
    assert started_id == job_id, (started_id, job_id)
    if trace is not None and stages:
        stages.update(sent=sent_ns, committed=committed_ns)
        trace.append({k: v - sent_ns for k, v in stages.items()})
    return float(started - sent)


def stage_lines(trace: list[dict[str, int]]) -> list[str]:
    """A table: each stage's step from the one before, p50/p95/p99 in ms."""
    lines = ["| step | samples | p50 | p95 | p99 |", "|---|---:|---:|---:|---:|"]
    stages = FINE_STAGES if os.environ.get("LATENCY_TRACE_FINE") else STAGES
    # Then the two shares: the enqueuer's commit until its notification arrives, and
    # the worker's, from the notification to the handler's start.
    for before, after in [
        *itertools.pairwise(stages),
        ("sent", "notified"),
        ("notified", "handler"),
    ]:
        steps = [(t[after] - t[before]) / 1e6 for t in trace if before in t and after in t]
        if steps:
            lines.append(
                f"| {before} -> {after} | {len(steps)} | {percentile(steps, 50):.2f} "
                f"| {percentile(steps, 95):.2f} | {percentile(steps, 99):.2f} |"
            )
    return lines


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


class JobNone(JobMixin, Base):
    __tablename__ = "bench_none"


class JobTrigger(JobMixin, Base):
    __tablename__ = "bench_trigger"


class JobHook(JobMixin, Base):
    __tablename__ = "bench_hook"


class JobRow(JobMixin, Base):
    __tablename__ = "bench_row"


# One table per way, so that ways interleave without DDL between them.
QUEUES: dict[str, JobQueue[Any]] = {
    "none": JobQueue(JobNone),
    "trigger": JobQueue(JobTrigger),
    "hook": JobQueue(JobHook),
    "row trigger": JobQueue(JobRow),
}


def create_tables(engine: Engine) -> None:
    """The four tables, each with its way of notifying."""
    tables = [q.model.__table__ for q in QUEUES.values()]
    Base.metadata.create_all(engine, tables=tables)
    with engine.begin() as conn, Operations.context(MigrationContext.configure(conn)):
        # create_all gives every jobs table the shipped statement trigger: only
        # bench_trigger keeps it.
        for model in (JobNone, JobHook, JobRow):
            migration.drop_notify_trigger(model.__tablename__)
        channel = migration.channel_name(JobRow.__tablename__)
        conn.execute(
            text(
                "CREATE FUNCTION bench_notify_row() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN PERFORM pg_notify('{channel}', NEW.queue); RETURN NULL; END $$"
            )
        )
        conn.execute(
            text(
                f"CREATE TRIGGER bench_notify_row AFTER INSERT ON {JobRow.__tablename__} "
                "FOR EACH ROW EXECUTE FUNCTION bench_notify_row()"
            )
        )


class HookSession(Session):
    """A session that notifies from a ``before_commit`` hook (the alternative design).

    `enqueue` would record each job's queue in ``session.info``; the hook sends one
    ``pg_notify`` per queue in the same transaction, so it is delivered on commit only.
    """


_NOTIFY = statements.notify(migration.channel_name(JobHook.__tablename__))


@event.listens_for(HookSession, "before_commit")
def _notify_before_commit(session: Session) -> None:
    queues = session.info.pop("sajq_queues", None)
    if queues:
        session.execute(_NOTIFY, {"queues": sorted(queues)})


def _transaction(engine: Engine, way: str) -> Session:
    return HookSession(engine) if way == "hook" else Session(engine)


def _mark(session: Session, way: str) -> None:
    if way == "hook":  # what enqueue would do under the hook design
        session.info.setdefault("sajq_queues", set()).add(QUEUE)


def single_rows(engine: Engine, way: str, count: int) -> None:
    """`count` transactions of one `enqueue` each."""
    queue = QUEUES[way]
    for i in range(count):
        with _transaction(engine, way) as session, session.begin():
            queue.enqueue(session, "ping", {"i": i}, queue=QUEUE)
            _mark(session, way)


def concurrent_single_rows(engine: Engine, way: str, count: int, clients: int) -> None:
    """`count` single-row transactions by each of `clients` threads at once.

    NOTIFY takes a database-wide lock at commit, so concurrent committers are where
    a notification's cost would show.
    """
    threads = [
        threading.Thread(target=single_rows, args=(engine, way, count)) for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def batch(engine: Engine, way: str, size: int) -> None:
    """One transaction of one `enqueue_many` of `size` jobs."""
    items = [{"kind": "ping", "queue": QUEUE, "payload": {"i": i}} for i in range(size)]
    with _transaction(engine, way) as session, session.begin():
        QUEUES[way].enqueue_many(session, items)
        _mark(session, way)


def measure_throughput(
    engine: Engine, *, rounds: int, chunk: int, batch_size: int, clients: int
) -> dict[tuple[str, str], list[float]]:
    """Rates (jobs/s) per (way, case), one per round.

    Each round runs one short chunk per way, in a rotating order, so the ways
    compared within a round see the same load on this shared machine.
    """
    cases: dict[str, tuple[Callable[[str], None], int]] = {
        "single": (lambda way: single_rows(engine, way, chunk), chunk),
        "concurrent": (
            lambda way: concurrent_single_rows(engine, way, chunk, clients),
            chunk * clients,
        ),
        "batch": (lambda way: batch(engine, way, batch_size), batch_size),
    }
    rates: dict[tuple[str, str], list[float]] = {}
    for case, (run, jobs_per_chunk) in cases.items():
        with engine.begin() as conn:
            names = ", ".join(q.model.__tablename__ for q in QUEUES.values())
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY"))
        for way in WAYS:
            run(way)  # untimed warm-up of caches and compiled statements
        for r in range(rounds):
            for way in WAYS[r % len(WAYS) :] + WAYS[: r % len(WAYS)]:
                started = time.perf_counter()
                run(way)
                rate = jobs_per_chunk / (time.perf_counter() - started)
                rates.setdefault((way, case), []).append(rate)
    return rates


def cost(rates: dict[tuple[str, str], list[float]], way: str, case: str) -> float:
    """Throughput lost against ``none``: the median of per-round ratios (paired)."""
    ratios = [w / n for w, n in zip(rates[(way, case)], rates[("none", case)], strict=True)]
    return 1 - statistics.median(ratios)


# -- the report ---------------------------------------------------------------------


#: Issue 30 item 3: commit -> handler start of an idle worker, in ms.
TARGETS = {50: 3.0, 99: 10.0}


def target_lines(ms: list[float]) -> list[str]:
    """Each wake-up target as held or not, with the ratio of the figure to it."""
    lines = []
    for p, limit in TARGETS.items():
        got = percentile(ms, p)
        lines.append(targets.record(f"3 wake-up p{p}", got, limit, unit=" ms", at_most=True))
    return lines


def wake_only(server_url: str, samples: int) -> None:
    """The LISTEN wake-up alone: `samples` plain, then `samples` traced by step."""
    with scratch(server_url, prefix="sa_jobqueue_lat") as db:
        engine = create_engine(db, pool_size=4)
        plain = measure_latency(engine, db, listen=True, poll_interval=30.0, samples=samples)
        trace: list[dict[str, int]] = []
        traced = measure_latency(
            engine, db, listen=True, poll_interval=30.0, samples=samples, trace=trace
        )
        engine.dispose()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"wake-up, commit sent -> handler start, one idle worker; load {load}")
    for name, values in (("plain", plain), ("traced", traced)):
        ms = [v * 1000 for v in values]
        print(
            f"  {name}: {len(ms)} samples, p50 {percentile(ms, 50):.2f} p95 "
            f"{percentile(ms, 95):.2f} p99 {percentile(ms, 99):.2f} max {max(ms):.2f} ms"
        )
    print("\n".join(stage_lines(trace)))
    print("\n".join(target_lines([v * 1000 for v in plain])))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=300, help="latency samples, listen")
    parser.add_argument("--poll-samples", type=int, default=200, help="latency samples, polling")
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=40, help="throughput rounds per case")
    parser.add_argument("--chunk", type=int, default=25, help="single-row txs per chunk")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4, help="threads, concurrent case")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few samples")
    parser.add_argument("--output", type=Path, default=BENCH / "latency-results.md")
    parser.add_argument(
        "--wake-only",
        action="store_true",
        help="only the LISTEN wake-up, plain then traced (the steps' stamps), and the "
        "targets; prints, writes no file",
    )


def main(args: argparse.Namespace, database: Database) -> None:
    if args.quick:
        args.samples, args.poll_samples, args.rounds, args.chunk = 30, 10, 4, 10
    if args.wake_only:
        wake_only(database.url, args.samples)
        return

    with scratch(database.url, prefix="sa_jobqueue_lat") as db:
        engine = create_engine(db, pool_size=max(4, args.clients + 2))
        print("latency with notifications ...", file=sys.stderr)
        listen = measure_latency(engine, db, listen=True, poll_interval=30.0, samples=args.samples)
        print(f"latency polling every {args.poll_interval}s ...", file=sys.stderr)
        polling = measure_latency(
            engine, db, listen=False, poll_interval=args.poll_interval, samples=args.poll_samples
        )
        print("enqueue throughput ...", file=sys.stderr)
        create_tables(engine)
        rates = measure_throughput(
            engine,
            rounds=args.rounds,
            chunk=args.chunk,
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
        f"`{command()}` on "
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
        f"## Enqueue throughput (jobs/s, median of {args.rounds} interleaved rounds; "
        "cost vs. no notification)",
        "",
        f"| way | single-row transactions | same, {args.clients} clients at once "
        f"| enqueue_many of {args.batch_size} |",
        "|---|---:|---:|---:|",
    ]
    cases = ("single", "concurrent", "batch")
    for way in WAYS:
        cells = []
        for case in cases:
            values = rates[(way, case)]
            median = statistics.median(values)
            lost = "" if way == "none" else f" ({cost(rates, way, case) * 100:+.1f} %)"
            q1, _, q3 = statistics.quantiles(values, n=4)
            cells.append(f"{median:,.0f}{lost} [{q1:,.0f}-{q3:,.0f}]")
        lines.append(f"| {way} | {' | '.join(cells)} |")
    lines += [
        "",
        "Cost is the throughput lost against `none` (positive: slower), the median of the "
        "per-round ratios (each round runs every way back to back). Brackets: interquartile "
        f"range of the round rates. Single-row chunks are {args.chunk} transactions "
        f"(per client). `hook` notifies from a `before_commit` session hook (one more "
        "statement per transaction); `row trigger` is shown for comparison only.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    write(args.output, report)
