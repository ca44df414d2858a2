"""Claim throughput over deep backlogs, as ratios to a small table (make bench-backlog).

Usage: ``python -m bench backlog [--jobs N] [--deep N] [--queues N] [--repeat N]
[--cases deep,one,all]``.
Every case drains ``--jobs`` (10,000) due no-op jobs with one worker process at
concurrency 32 in lease mode (`bench/support/drive.py`), in a scratch database:

- **small**: the jobs alone (run first and last; the ratios are to their mean);
- **deep**: beside ``--deep`` (1,000,000) more **pending** rows of the same queue that
  are not due (``run_at`` a century ahead): the claim's index walk must not wade
  through them, and neither must the idle loop's next-due probe;
- **one of many queues**: the worker serves ``default``, beside 999 other queues each
  holding 100 due pending rows it must not touch (the multi-tenant layout: one
  worker, or one deployment, per queue);
- **all of many queues**: the jobs spread evenly over ``--queues`` (1,000) queues and
  the worker serving all of them (one claim statement per round,
  `statements.claim_queues`).

Big tables are filled with one ``INSERT ... SELECT generate_series``, analysed, and
followed by a ``CHECKPOINT``, so the fill's dirty pages are not written back (nor the
checkpoint a 1,000,000-row fill requests run) during the drain that follows. On a
shared 2-core machine that is not the main source of variation, other work is (the
same deep case measured 2,723 and 4,501 jobs/s minutes apart, the slower one after
a CHECKPOINT): hence the pairs below, and the figures that do not depend on time.

Each repetition (``--repeat``, 3) runs every case beside a small drain of its own,
the pair's order alternating between repetitions, and the case's ratio to small is
the median of its pairs' ratios: two drains seconds apart, so a change of the
machine's load between cases does not land in a ratio. Beside the rates, figures
the load moves little: the database blocks each job cost (``pg_stat_database``:
shared blocks hit and read between go and the worker's exit), the worker process's
CPU per 1,000 jobs, and the claim statements per 1,000 jobs. It prints the table
(target: ratio >= 0.80) and the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from dataclasses import dataclass

import psycopg

from bench.support import raw
from bench.support.database import Database, scratch
from bench.support.timing import log
from bench.support.workers import Workers, module_command

CONCURRENCY = 32
TARGET = 0.80
DRAIN_TIMEOUT = 300.0
QUICK = ["--jobs", "500", "--deep", "20000", "--queues", "50", "--repeat", "1"]


def sql(url: str, *statements: str) -> None:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def checkpoint(url: str) -> None:
    """Write the fill's dirty pages now, not during the drain (needs pg_checkpoint in 15)."""
    try:
        sql(url, "CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        log("  no CHECKPOINT (not permitted): the fill's writes may land in the drain")


def blocks(url: str) -> int:
    """Shared blocks hit and read in the database so far (all backends)."""
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


@dataclass
class Drain:
    """One drain: jobs/s to the end and to the last rows claimed; what each job cost."""

    rate: float
    steady: float
    blocks_per_job: float
    claims_per_1000: float
    cpu_ms_per_1000: float  # the worker process's user + system CPU


def children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drain(url: str, count: int, queues: list[str]) -> Drain:
    """One drive.py worker at CONCURRENCY over `queues`; checks `count` jobs got done.

    Returns jobs/s from go to the drain's end, and from go to the last claim that
    returned rows (the steady claim rate, without the drain's tail: its empty claims
    and idle probes, whose cost grows with the backlog, see docs/scaling.md).
    """
    before = raw.count_done(url)
    cpu_before = children_cpu()
    command = module_command("bench.support.drive", url, CONCURRENCY, "--count-claims")
    for queue in queues:
        command += ["--queue", queue]
    with Workers([command]) as worker:
        blocks_before = blocks(url)
        started = worker.go()
        [report] = worker.reports(DRAIN_TIMEOUT)
    time.sleep(1.0)  # the worker's backend reports its counters as it exits
    used = blocks(url) - blocks_before
    done = raw.count_done(url) - before
    if done != count or report["warnings"]:
        raise RuntimeError(f"{done} of {count} jobs done, {report['warnings']} worker warnings")
    claims = report["claims"]
    log(f"  claims: {claims}; tail {report['end'] - claims['last_rows_at']:.3f} s")
    return Drain(
        count / (report["end"] - started),
        count / (claims["last_rows_at"] - started),
        used / count,
        1000 * claims["claims"] / count,
        1e6 * (children_cpu() - cpu_before) / count,
    )


def fill_due(url: str, count: int, queues: int) -> None:
    """`count` due no-op jobs, spread round-robin over `queues` queues (q0000...)."""
    queue = "'default'" if queues == 1 else f"'q' || lpad((g % {queues})::text, 4, '0')"
    sql(
        url,
        f"INSERT INTO jobs (kind, queue, payload) SELECT 'noop', {queue}, "
        f"jsonb_build_object('n', g) FROM generate_series(1, {count}) AS g",
        "ANALYZE jobs",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--deep", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cases",
        default="deep,one,all",
        help="which cases beside small: deep, one (of many queues), all (of many queues)",
    )


def main(args: argparse.Namespace, database: Database) -> None:
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = os.getloadavg()
    with scratch(database.url, prefix="sajq_backlog") as db:

        def small() -> Drain:
            raw.truncate(db)
            sql(db, "VACUUM ANALYZE jobs")
            fill_due(db, args.jobs, 1)
            checkpoint(db)
            return drain(db, args.jobs, ["default"])

        def deep() -> Drain:
            raw.truncate(db)
            sql(
                db,
                "INSERT INTO jobs (kind, payload, run_at)"
                " SELECT 'noop', jsonb_build_object('n', g), now() + interval '100 years'"
                f" FROM generate_series(1, {args.deep}) AS g",
                "VACUUM ANALYZE jobs",
            )
            fill_due(db, args.jobs, 1)
            checkpoint(db)
            return drain(db, args.jobs, ["default"])

        def one_of_many() -> Drain:
            raw.truncate(db)
            others = args.queues - 1
            sql(
                db,
                "INSERT INTO jobs (kind, queue, payload) SELECT 'noop',"
                f" 'other' || lpad((g % {others})::text, 4, '0'), jsonb_build_object('n', g)"
                f" FROM generate_series(1, {others * 100}) AS g",
                "VACUUM ANALYZE jobs",
            )
            fill_due(db, args.jobs, 1)
            checkpoint(db)
            return drain(db, args.jobs, ["default"])

        def all_of_many() -> Drain:
            raw.truncate(db)
            sql(db, "VACUUM ANALYZE jobs")
            fill_due(db, args.jobs, args.queues)
            checkpoint(db)
            names = [f"q{i:04d}" for i in range(args.queues)]
            return drain(db, args.jobs, names)

        cases = [
            ("small", small),
            (f"deep: +{args.deep:,} pending not due", deep),
            (
                f"one of {args.queues:,} queues (+{(args.queues - 1) * 100:,} due elsewhere)",
                one_of_many,
            ),
            (f"all of {args.queues:,} queues ({args.jobs // args.queues} jobs each)", all_of_many),
        ]
        keys = ["small", "deep", "one", "all"]
        wanted = {"small", *args.cases.split(",")}
        if not wanted <= set(keys):
            raise SystemExit(f"--cases: some of deep, one, all; got {args.cases!r}")
        cases = [case for key, case in zip(keys, cases, strict=True) if key in wanted]
        results: dict[str, list[Drain]] = {name: [] for name, _ in cases}
        ratios: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cases[1:]}
        for repetition in range(args.repeat):
            for name, case in cases[1:]:
                # Each case beside a small drain of its own, the pair's order
                # alternating: the ratio compares two drains a few seconds apart.
                pair = [cases[0], (name, case)]
                if repetition % 2:
                    pair.reverse()
                got: dict[str, Drain] = {}
                for which, run_case in pair:
                    log(f"[{repetition + 1}/{args.repeat}] {which} ...")
                    got[which] = run_case()
                    results[which].append(got[which])
                    log(
                        f"  {got[which].rate:,.0f} jobs/s to the end,"
                        f" {got[which].steady:,.0f} to last rows"
                    )
                base = got["small"]
                ratios[name].append((got[name].rate / base.rate, got[name].steady / base.steady))
        raw.truncate(db)
    load_after = os.getloadavg()

    def median(name: str, field: str) -> float:
        return statistics.median(getattr(d, field) for d in results[name])

    def spread(name: str, field: str) -> str:
        values = [getattr(d, field) for d in results[name]]
        return f"{median(name, field):,.0f} ({min(values):,.0f}-{max(values):,.0f})"

    def ratio(name: str, k: int) -> tuple[float, str]:
        values = [pair[k] for pair in ratios[name]]
        middle = statistics.median(values)
        return middle, f"{middle:.0%} ({min(values):.0%}-{max(values):.0%})"

    print(
        f"lease mode, 1 process, concurrency {CONCURRENCY}, drain of {args.jobs:,} no-op jobs;"
        f" {started}; {args.repeat} repetition(s), each case paired with a small drain"
        " (order alternating); jobs/s: median (min-max) of the case's drains; vs small:"
        " median (min-max) of the pairs' ratios"
    )
    print(
        "| case | jobs/s, go -> drain end | vs small | jobs/s, go -> last rows claimed | vs small |"
        " blocks/job | worker CPU ms/1,000 jobs | claims/1,000 jobs |"
        f" target >= {TARGET:.0%} (drain end) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _ in cases:
        if name == "small":
            shown, steady_shown, held = "-", "-", "-"
        else:
            middle, shown = ratio(name, 0)
            _, steady_shown = ratio(name, 1)
            held = "held" if middle >= TARGET else "NOT held"
        print(
            f"| {name} | {spread(name, 'rate')} | {shown} | {spread(name, 'steady')}"
            f" | {steady_shown} | {median(name, 'blocks_per_job'):.1f}"
            f" | {median(name, 'cpu_ms_per_1000'):,.0f}"
            f" | {median(name, 'claims_per_1000'):,.0f} | {held} |"
        )
    print(
        "load average (1, 5, 15 min): before "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after "
        + " ".join(f"{x:.2f}" for x in load_after)
    )
