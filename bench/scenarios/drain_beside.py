"""A lease drain beside 10,000,000 finished jobs against an empty table; the archiver's cost.

Usage: ``python -m bench drain_beside [--rows N] [--pending N] [--jobs N] [--concurrency C]
[--reps N] [--layouts table,archive] [--keep] [--drop-kept] [--move-jobs N]
[--archive-batch 1000,5000] [--parts] [--only drain|move] [--out FILE]``.

Issue 43 item 4's third bullet, two targets measured in one run on one server:

**The drain beside the history** (``>= 95 %`` of the empty table's). One worker process
(`bench/support/drive.py`: lease mode, the worker's defaults, no-op jobs, concurrency 16)
drains ``--jobs`` due jobs of queue ``default`` in three databases: an **empty** table
(truncated before each drain), **table**: the same table holding ``--rows`` finished
jobs over ten days and ``--pending`` pending ones scheduled 30 days ahead, a quarter of
them in ``default`` (`bench.support.history`: none due, so the drain claims none, and
the claim and the next-due probe must step past them), and **archive**: the finished
rows in ``jobs_archive``'s daily partitions instead, the jobs table holding the pending
ones. Before each drain: ``VACUUM ANALYZE`` (autovacuum is off on the machine's server),
the jobs, ``ANALYZE``, ``CHECKPOINT``. Each repetition runs every layout once, the order
rotating; each big layout's ratio is the median over repetitions of its drain's rate
over the empty drain of the same repetition. The drained jobs stay in the big tables
(``--reps`` x ``--jobs`` more finished rows).

**The archiver's cost per job moved** (``<= 20 %`` of a job's drain). In a scratch
database, per repetition and per ``--archive-batch``: ``--move-jobs`` jobs written with
SQL, drained in this process (``jobs.worker(engine, concurrency=16, listen=False).drain()``,
the enqueue not counted), ``VACUUM ANALYZE`` (autovacuum's work over an
``archive_after`` of an hour), then the same jobs archived by `ops.archive.archive_now`
(the worker's `Archiver`, batches of 1,000). Each is measured the same way: wall time,
this process's CPU (every thread) and the CPU of every PostgreSQL backend of the database
(``/proc/<pid>/schedstat``: the pool keeps its connections), per job; WAL bytes per job
(server-wide: an upper bound). The checkpointer's, WAL writer's and background writer's
CPU is in neither. With ``--parts``, ``EXPLAIN (ANALYZE, BUFFERS)`` of one batch and of
the statement without each of its parts (`bench.support.move_parts`).

Writes ``bench/drain-beside-results.md`` (``--out``). ``make bench`` runs the default,
1,000,000 finished rows; issue 43's size is ``--rows 10000000`` (about 2.4 GB per layout,
minutes to build). With ``--keep`` the built databases are kept and reused by the next
run (``--drop-kept`` drops them).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from bench import targets
from bench.support import move_parts, raw, timing
from bench.support.app import Job, jobs
from bench.support.database import Database, machine, pg_settings, scratch
from bench.support.history import LAYOUTS, drop_kept, history_database, sizes, sql
from bench.support.results import BENCH, command, write
from bench.support.timing import load, log
from bench.support.workers import Workers, module_command
from sa_jobqueue.ops.archive import archive_now

QUICK = ["--rows", "20000", "--pending", "2000", "--jobs", "500", "--reps", "1"]
QUICK += ["--move-jobs", "500"]
CONCURRENCY = 16
DRAIN_TARGET = 0.95
MOVE_TARGET = 0.20
DRAIN_TIMEOUT = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="finished jobs beside (issue 43: 10000000)"
    )
    parser.add_argument("--pending", type=int, default=100_000, help="future jobs beside")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--layouts", default="table,archive", help="big layouts: table, archive")
    parser.add_argument(
        "--kinds",
        choices=("own", "others"),
        default="own",
        help="the kinds of the rows beside: the worker's own, or six it does not run",
    )
    parser.add_argument("--keep", action="store_true", help="keep the big databases, reuse them")
    parser.add_argument("--drop-kept", action="store_true", help="drop kept databases and stop")
    parser.add_argument("--move-jobs", type=int, default=20_000, help="jobs drained then moved")
    parser.add_argument("--archive-batch", default="1000", help="archive batch sizes, comma list")
    parser.add_argument("--parts", action="store_true", help="EXPLAIN the move and its parts")
    parser.add_argument("--only", choices=("drain", "move"), default=None)
    parser.add_argument("--out", default=str(BENCH / "drain-beside-results.md"))


# -- the drains beside the history ------------------------------------------------


@dataclass
class Drain:
    rate: float
    blocks_per_job: float
    worker_cpu_us: float


def _blocks(url: str) -> int:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _last_id(url: str) -> int:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM jobs").fetchone()
    return int(row[0]) if row else 0


def _done_after(url: str, last: int) -> int:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jobs WHERE id > %s AND status = 'done'", (last,)
        ).fetchone()
    return int(row[0]) if row else 0


def drain(url: str, count: int, concurrency: int, *, empty: bool) -> Drain:
    """Fill `count` due jobs in ``default`` and drain them with one worker process."""
    if empty:
        raw.truncate(url)
    sql(url, "VACUUM ANALYZE jobs")
    last = _last_id(url)
    raw.fill(url, "noop", count)  # and ANALYZE
    sql(url, "CHECKPOINT")
    command_line = module_command("bench.support.drive", url, concurrency)
    with Workers([command_line]) as worker:
        before = _blocks(url)
        started = worker.go()
        [report] = worker.reports(report_timeout=DRAIN_TIMEOUT)
    time.sleep(1.0)  # the backend reports its block counts as it exits
    used = _blocks(url) - before
    done = _done_after(url, last)
    if done != count or report["warnings"]:
        raise RuntimeError(f"{done} of {count} jobs done, {report['warnings']} worker warnings")
    return Drain(
        count / (report["end"] - started), used / count, 1e6 * report["cpu_seconds"] / count
    )


def drains_beside(args: argparse.Namespace, server: str, stack: contextlib.ExitStack) -> list[str]:
    layouts = [name for name in args.layouts.split(",") if name]
    if not set(layouts) <= set(LAYOUTS):
        raise SystemExit(f"--layouts: some of {', '.join(LAYOUTS)}; got {args.layouts!r}")
    urls = {"empty": stack.enter_context(scratch(server, prefix="sajq_beside_empty"))}
    for layout in layouts:
        urls[layout] = stack.enter_context(
            history_database(
                server, layout, args.rows, args.pending, keep=args.keep, kinds=args.kinds
            )
        )
    sized = {layout: sizes(urls[layout]) for layout in layouts}
    results: dict[str, list[Drain]] = {name: [] for name in urls}
    ratios: dict[str, list[float]] = {layout: [] for layout in layouts}
    names = list(urls)
    log(f"load before the drains: {load()}")
    for rep in range(args.reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        got = {}
        for name in order:
            got[name] = drain(urls[name], args.jobs, args.concurrency, empty=name == "empty")
            results[name].append(got[name])
            log(f"[{rep + 1}/{args.reps}] {name}: {got[name].rate:,.0f} jobs/s")
        for layout in layouts:
            ratios[layout].append(got[layout].rate / got["empty"].rate)
    lines = [
        f"{args.jobs:,} no-op jobs per drain, one worker process, lease mode, concurrency "
        f"{args.concurrency}, the worker's defaults; the rows beside are of "
        + ("the worker's own kinds" if args.kinds == "own" else "six kinds the worker does not run")
        + f" (`--kinds {args.kinds}`); {args.reps} repetitions, layouts in "
        "rotating order; jobs/s median (min-max); ratio: median of each repetition's "
        "drain over that repetition's empty drain.",
        "",
        "| table | size (jobs / jobs_archive) | jobs/s | vs empty | blocks/job |"
        " worker CPU µs/job |",
        "|---|---|---|---|---:|---:|",
    ]
    for name, drains in results.items():
        rates = [d.rate for d in drains]
        where = "-" if name == "empty" else _sizes_cell(sized[name])
        if name == "empty":
            shown, what = "-", "empty (truncated before each drain)"
        else:
            middle = statistics.median(ratios[name])
            shown = f"{middle:.1%} ({min(ratios[name]):.1%}-{max(ratios[name]):.1%})"
            what = (
                f"{name}: {args.rows:,} finished + {args.pending:,} pending"
                if name == "table"
                else f"archive: {args.rows:,} finished in jobs_archive, {args.pending:,} pending"
            )
        lines.append(
            f"| {what} | {where} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-"
            f"{max(rates):,.0f}) | {shown} | "
            f"{statistics.median(d.blocks_per_job for d in drains):.1f} | "
            f"{statistics.median(d.worker_cpu_us for d in drains):.0f} |"
        )
    lines.append("")
    for layout in layouts:
        key = _drain_key(args.rows, args.pending, layout)
        if key is not None and args.kinds == "own":
            verdict = targets.record(key, statistics.median(ratios[layout]), DRAIN_TARGET)
            lines.append(f"`{verdict}`")
    log(f"load after the drains: {load()}")
    return lines


def _drain_key(rows: int, pending: int, layout: str) -> str | None:
    """The targets table's row for a drain beside `rows`: issue 43's size, or make bench's."""
    if pending != 100_000 or rows not in (1_000_000, 10_000_000):
        return None
    return f"43 drain beside {rows:,} finished ({layout} layout) / empty table"


def _sizes_cell(found: dict[str, int]) -> str:
    return f"{found['jobs'] / 2**20:,.0f} MB / {found['jobs_archive'] / 2**20:,.0f} MB"


# -- the archiver's cost beside the drain's ---------------------------------------


@dataclass
class Cost:
    """Per job: wall µs, this process's CPU µs, the database's backends' CPU µs, WAL bytes."""

    wall: float
    client: float
    server: float
    wal: float

    @property
    def cpu(self) -> float:
        return self.client + self.server


def _measured(engine: Engine, monitor: Any, count: int, work: Any) -> Cost:
    wal = monitor.exec_driver_sql("SELECT pg_current_wal_lsn()").scalar_one()
    before = timing.backends_ns(monitor)
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = timing.backends_ns(monitor)
    server = sum(ns - before.get(pid, 0) for pid, ns in after.items()) / 1000
    written = monitor.exec_driver_sql(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %(lsn)s)", {"lsn": wal}
    ).scalar_one()
    monitor.rollback()
    return Cost(wall * 1e6 / count, cpu * 1e6 / count, server / count, float(written) / count)


def _one_pair(
    engine: Engine, monitor: Any, count: int, batch: int, concurrency: int
) -> tuple[Cost, Cost]:
    url = engine.url.render_as_string(hide_password=False)
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs, jobs_archive RESTART IDENTITY CASCADE"))
    raw.fill(url, "noop", count)
    sql(url, "VACUUM ANALYZE jobs", "CHECKPOINT")

    def drained() -> None:
        assert jobs.worker(engine, concurrency=concurrency, listen=False).drain() == count

    drain_cost = _measured(engine, monitor, count, drained)
    sql(url, "VACUUM ANALYZE jobs", "CHECKPOINT")

    def moved() -> None:
        with engine.connect() as conn:
            got = archive_now(conn, Job, after=timedelta(0), batch_size=batch)
        assert got == count, (got, count)

    return drain_cost, _measured(engine, monitor, count, moved)


def archiver_cost(args: argparse.Namespace, server: str) -> list[str]:
    batches = [int(b) for b in args.archive_batch.split(",") if b]
    pairs: dict[int, list[tuple[Cost, Cost]]] = {b: [] for b in batches}
    with scratch(server, prefix="sajq_beside_move") as url:
        engine = create_engine(url, pool_size=args.concurrency + 8, max_overflow=8)
        monitor = create_engine(url, poolclass=NullPool).connect()
        try:
            _one_pair(engine, monitor, min(args.move_jobs, 500), batches[0], args.concurrency)
            for rep in range(args.reps):
                for batch in batches:
                    pair = _one_pair(engine, monitor, args.move_jobs, batch, args.concurrency)
                    pairs[batch].append(pair)
                    log(
                        f"[{rep + 1}/{args.reps}] batch {batch}: drain {pair[0].cpu:.0f} µs CPU"
                        f" {pair[0].wall:.0f} µs wall; move {pair[1].cpu:.0f} µs CPU"
                        f" {pair[1].wall:.0f} µs wall per job"
                    )
            parts = move_parts.measure(engine, args.move_jobs, batches[0]) if args.parts else []
        finally:
            monitor.close()
            engine.dispose()
    lines = [
        f"{args.move_jobs:,} jobs per repetition, {args.reps} repetitions: drained (lease, "
        f"concurrency {args.concurrency}, in this process), then archived "
        "(`archive_now`); per job, median over repetitions. Client: this process's CPU "
        "(all its threads); server: the CPU of the database's backends.",
        "",
        "| per job | drain | move | move / drain |",
        "|---|---:|---:|---:|",
    ]
    first = None
    for batch, found in pairs.items():
        for field, what in (
            ("cpu", "CPU, client + server, µs"),
            ("client", "CPU, client, µs"),
            ("server", "CPU, server backends, µs"),
            ("wall", "wall time, µs"),
            ("wal", "WAL bytes (server-wide)"),
        ):
            drain_value = statistics.median(getattr(d, field) for d, _ in found)
            move_value = statistics.median(getattr(m, field) for _, m in found)
            ratio = statistics.median(getattr(m, field) / getattr(d, field) for d, m in found)
            lines.append(
                f"| {what} (batches of {batch:,}) | {drain_value:,.1f} | {move_value:,.1f} |"
                f" {ratio:.1%} |"
            )
            if first is None and field == "cpu":
                first = ratio
    lines.append("")
    if first is not None and batches[0] == 1000:
        key = "43 archiver's move / lease drain, CPU per job"
        lines.append(f"`{targets.record(key, first, MOVE_TARGET, at_most=True)}`")
    return lines + (["", *parts] if parts else [])


def main(args: argparse.Namespace, db: Database) -> None:
    if args.drop_kept:
        print("dropped:", ", ".join(drop_kept(db.url)) or "none")
        return
    began, before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load()
    settings = pg_settings(db.url)
    report = ["# A drain beside ten days of finished jobs; the archiver's cost per job", ""]
    report += ["```", command(), "```", ""]
    with contextlib.ExitStack() as stack:
        if args.only != "move":
            report += ["## The drain beside the history (>= 95 % of the empty table's)", ""]
            report += drains_beside(args, db.url, stack)
    if args.only != "drain":
        report += ["", "## The archiver's cost per job moved (<= 20 % of a drain's)", ""]
        report += archiver_cost(args, db.url)
    report += [
        "",
        f"Started {began}; load average before {before}, after {load()} (what else ran on "
        "the machine meanwhile shows there).",
        "",
        "Server: " + ", ".join(f"{k} {v}" for k, v in settings.items()) + ".",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in machine().items() if "load" not in k),
        "",
    ]
    print("\n".join(report))
    write(args.out, "\n".join(report))
