"""What the counters of ended jobs cost the done path: database CPU and time per job.

Usage: ``python -m bench counters [--jobs N] [--rounds N] [--threads N] [--out FILE]``.
Each database gets a scratch database of its own, dropped afterwards.

Jobs (no-op, enqueued with ``enqueue_many`` beforehand) are ended by the driver's own
statements, as a worker's claim loop sends them: ``job_claim`` of 10 jobs and their
``job_complete``, one transaction per round, on one connection. Measured per job:

- the database's CPU time: the PostgreSQL backend's (``/proc/<pid>/schedstat``), the
  whole MariaDB server's, and on SQLite the process's own (it is the database);
- the wall time.

On PostgreSQL, the same for a worker's whole drain (``jobs.worker(...).drain()`` of the
jobs, the compaction after it when on): the CPU of every backend of the scratch database
(the pool keeps the drain's connections open until they are read).

*on* runs with the counters (the done statements' count, the triggers) and ends with
the compaction that moves the log into the rollup (its cost is in the figure); *off*
runs without them (PostgreSQL: the triggers disabled and the done statements built as
before the counters, without their counting CTE; elsewhere the triggers dropped and the
done's count skipped). Runs alternate (on, off, off, on, ...) so a load that drifts
moves both alike. Then ``--threads`` connections end jobs at once (the contention case:
many workers acknowledging together), on and off, in jobs per second. Writes
``bench/counters-results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from bench.support import timing
from bench.support.app import Job, jobs
from bench.support.database import Database, scratch, scratch_mysql, scratch_sqlite
from bench.support.results import BENCH, write
from sa_jobqueue.driver import driver_for
from sa_jobqueue.schema.counters import counter_trigger_sql, drop_counter_trigger_sql

QUICK = ["--jobs", "500", "--rounds", "2", "--threads", "2"]
DATABASES = ("postgresql", "sqlite", "mariadb", "mysql")
OWNER = "bench-counters"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per run")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of on/off runs")
    parser.add_argument("--threads", type=int, default=4, help="connections ending jobs at once")
    parser.add_argument("--out", default=str(BENCH / "counters-results.md"))


def _cpu_ns(engine: Engine, conn: Any) -> int:
    """The database's CPU time so far, in ns, for the connection `conn`."""
    name = engine.dialect.name
    if name == "sqlite":
        return time.process_time_ns()
    if name == "postgresql":
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        conn.rollback()
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    total = 0  # MariaDB: the whole server (no per-thread id without performance_schema)
    for pid in os.listdir("/proc"):
        if pid.isdigit() and _comm(pid) in ("mariadbd", "mysqld"):
            for task in Path(f"/proc/{pid}/task").iterdir():  # every thread's
                with contextlib.suppress(OSError):
                    total += int((task / "schedstat").read_text().split()[0])
    return total


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@contextlib.contextmanager
def _uncounted(engine: Engine, on: bool) -> Iterator[None]:
    """With not `on` on PostgreSQL, drivers made inside build their done statements as
    before the counters (no counting CTE), as the triggers are off: no counters at all.
    """
    if on:
        yield
        return
    if engine.dialect.name != "postgresql":
        from sa_jobqueue.driver.portable.counters import PortableCounters

        saved_count = PortableCounters.count_done
        PortableCounters.count_done = lambda self, conn, held: None  # type: ignore[method-assign]
        try:
            yield
        finally:
            PortableCounters.count_done = saved_count  # type: ignore[method-assign]
        return
    from sqlalchemy import literal, select

    from sa_jobqueue.driver.postgres import completion, limits
    from sa_jobqueue.statements.common import notifying_ended

    def plain(model: Any, done: Any, *, ended: str | None = None) -> Any:
        return done if ended is None else notifying_ended(done, ended)

    saved = (completion.counting_done, limits.with_counted_columns, limits.log_done)
    completion.counting_done = plain  # type: ignore[assignment]
    limits.with_counted_columns = lambda model, done: done  # type: ignore[assignment]
    limits.log_done = lambda model, rows: select(literal(1)).cte("counted")  # type: ignore[assignment]
    try:
        yield
    finally:
        completion.counting_done, limits.with_counted_columns, limits.log_done = saved


def _triggers(engine: Engine, on: bool) -> None:
    name = engine.dialect.name
    with engine.begin() as conn:
        if name == "postgresql":
            for trigger in ("sa_jobqueue_count_ended", "sa_jobqueue_count_inserted"):
                verb = "ENABLE" if on else "DISABLE"
                conn.exec_driver_sql(f"ALTER TABLE jobs {verb} TRIGGER {trigger}")
            return
        for sql in drop_counter_trigger_sql(name, "jobs"):
            conn.exec_driver_sql(sql)
        if on:
            for sql in counter_trigger_sql(name, "jobs"):
                conn.exec_driver_sql(sql.replace("%", "%%") if name != "sqlite" else sql)


def _enqueue(engine: Engine, n: int) -> None:
    from sqlalchemy.orm import Session

    with Session(engine) as session, session.begin():
        jobs.enqueue_many(session, [("noop", {"i": i}) for i in range(n)])


def _end_all(engine: Engine, conn: Any, driver: Any = None) -> int:
    driver = driver or driver_for(conn, Job)
    ended = 0
    while True:
        with conn.begin():
            claimed = driver.job_claim(conn, "default", 10, OWNER)
            if not claimed:
                return ended
            driver.job_complete(conn, claimed, OWNER)
        ended += len(claimed)


def _compact(conn: Any) -> None:
    driver = driver_for(conn, Job)
    with conn.begin():
        while driver.counters_compact(conn) > 0:
            pass


def _one_run(engine: Engine, n: int, on: bool) -> tuple[float, float]:
    _triggers(engine, on)
    _enqueue(engine, n)
    with engine.connect() as conn, _uncounted(engine, on):
        cpu, wall = _cpu_ns(engine, conn), time.perf_counter()
        assert _end_all(engine, conn) == n
        if on:
            _compact(conn)
        cpu, wall = _cpu_ns(engine, conn) - cpu, time.perf_counter() - wall
    return cpu / n / 1000, wall / n * 1e6  # µs per job


def _concurrent(engine: Engine, n: int, threads: int, on: bool) -> float:
    _triggers(engine, on)
    _enqueue(engine, n)
    barrier = threading.Barrier(threads + 1)

    def work(driver: Any) -> None:
        with engine.connect() as conn:
            barrier.wait()
            _end_all(engine, conn, driver)

    with _uncounted(engine, on):  # around the drivers' making and the threads' run
        drivers = [driver_for(engine, Job) for _ in range(threads)]
        pool = [threading.Thread(target=work, args=(driver,)) for driver in drivers]
        for thread in pool:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in pool:
            thread.join()
        elapsed = time.perf_counter() - start
    if on:
        with engine.connect() as conn:
            _compact(conn)
    return n / elapsed


def _drain_run(url: str, n: int, on: bool) -> tuple[float, float]:
    """A worker's drain of `n` jobs: its backends' CPU and its wall time, µs per job."""
    engine = create_engine(url, pool_size=8)
    monitor = create_engine(url, poolclass=NullPool).connect()
    try:
        _triggers(engine, on)
        _enqueue(engine, n)
        before = timing.backends_ns(monitor)
        wall = time.perf_counter()
        with _uncounted(engine, on):
            assert jobs.worker(engine, concurrency=1, listen=False).drain() == n
        if on:
            with engine.connect() as conn:
                _compact(conn)
        wall = time.perf_counter() - wall
        after = timing.backends_ns(monitor)  # the pool keeps the drain's connections open
        cpu = sum(ns - before.get(pid, 0) for pid, ns in after.items())
        return cpu / n / 1000, wall / n * 1e6
    finally:
        monitor.close()
        engine.dispose()


def _measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    engine = create_engine(url, pool_size=args.threads + 2)
    try:
        _one_run(engine, min(args.jobs, 500), True)  # warm: statements compiled, caches
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(args.rounds):
            for on in (True, False, False, True):
                runs[on].append(_one_run(engine, args.jobs, on))
        rates = {on: _concurrent(engine, args.jobs * 2, args.threads, on) for on in (True, False)}
        drains: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        if engine.dialect.name == "postgresql":
            for _ in range(args.rounds):
                for on in (True, False, False, True):
                    drains[on].append(_drain_run(url, args.jobs, on))
        with engine.connect() as conn:
            counted = conn.execute(text("SELECT sum(jobs) FROM sa_jobqueue_counts_jobs")).scalar()
            done = conn.execute(text("SELECT count(*) FROM jobs WHERE status = 'done'")).scalar()
            left = conn.execute(text("SELECT count(*) FROM sa_jobqueue_ended_jobs")).scalar()
        return {
            "runs": runs,
            "drains": drains,
            "rates": rates,
            "counted": counted,
            "done": done,
            "left": left,
        }
    finally:
        engine.dispose()


def _drain_rows(drains: dict[bool, list[tuple[float, float]]]) -> list[str]:
    if not drains[True]:
        return []
    rows = []
    for index, what in ((0, "database CPU, µs"), (1, "wall time, µs")):
        on = statistics.median(run[index] for run in drains[True])
        off = statistics.median(run[index] for run in drains[False])
        rows.append(
            f"| a worker's drain (`drain()`, concurrency 1): {what} | {off:.1f} | {on:.1f} | "
            f"{on / off:.3f} |"
        )
    return rows


def main(args: argparse.Namespace, db: Database) -> None:
    if db.name == "postgresql":
        with scratch(db.url, prefix="sajq_counters_bench") as url:
            found = _measure(url, args)
    elif db.name == "sqlite":
        with scratch_sqlite(Path(tempfile.gettempdir()), "sajq_counters_bench") as url:
            found = _measure(url, args)
    else:
        with scratch_mysql(db.url, "sajq_counters_bench") as url:
            found = _measure(url, args)
    on_cpu = [cpu for cpu, _ in found["runs"][True]]
    off_cpu = [cpu for cpu, _ in found["runs"][False]]
    on_wall = [wall for _, wall in found["runs"][True]]
    off_wall = [wall for _, wall in found["runs"][False]]
    cpu_ratio = statistics.median(on_cpu) / statistics.median(off_cpu)
    wall_ratio = statistics.median(on_wall) / statistics.median(off_wall)
    rates = found["rates"]
    load = os.getloadavg()
    lines = [
        f"## {db.name}",
        "",
        f"{args.jobs:,} jobs a run, {args.rounds * 2} runs each way (alternating); "
        f"`python -m bench counters --jobs {args.jobs} --rounds {args.rounds} "
        f"--threads {args.threads}`. Machine: {platform.platform()}, {os.cpu_count()} cores, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end.",
        "",
        "| per job | counters off | counters on (+ compaction) | on / off |",
        "|---|---:|---:|---:|",
        f"| database CPU, µs (median) | {statistics.median(off_cpu):.1f} | "
        f"{statistics.median(on_cpu):.1f} | {cpu_ratio:.3f} |",
        f"| wall time, µs (median) | {statistics.median(off_wall):.1f} | "
        f"{statistics.median(on_wall):.1f} | {wall_ratio:.3f} |",
        f"| {args.threads} connections at once, jobs/s | {rates[False]:,.0f} | "
        f"{rates[True]:,.0f} | {rates[True] / rates[False]:.3f} |",
        *_drain_rows(found["drains"]),
        "",
        f"Every run: CPU {', '.join(f'{c:.1f}' for c in on_cpu)} (on) / "
        f"{', '.join(f'{c:.1f}' for c in off_cpu)} (off) µs. Counted after the runs: "
        f"{found['counted']:,} jobs in the rollup, {found['done']:,} done rows counted with "
        f"the triggers on or off ({found['left']} left in the log).",
        "",
    ]
    print("\n".join(lines))
    out = Path(args.out)
    head = "# What the counters of ended jobs cost the done path\n\n"
    old = out.read_text() if out.exists() else head
    sections = old.split("\n## ")
    kept = [s for s in sections[1:] if not s.startswith(f"{db.name}\n")]
    write(
        out,
        "\n## ".join([sections[0].rstrip("\n") + "\n", *kept]).rstrip("\n")
        + "\n\n"
        + "\n".join(lines),
    )
