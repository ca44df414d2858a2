"""Throughput, as ratios to the raw-SQL limit measured in the same run (bench/results.md).

Usage: ``python -m bench drain [--quick] [--reps N] [--jobs N] ...`` (``--help`` lists
every knob). Enqueues one by one and in batches, drains in lease and transactional mode
at concurrency 1 to 32 in one and two processes, claims beside a large history, and one
worker's memory over a long drain, each beside raw psycopg running the same statements.

Prints one table and writes it to ``bench/results.md`` (and ``bench/results.png``
when matplotlib is installed: ``pip install -e '.[bench]'``). Every figure is
the median of the repetitions, with min-max. Cases are interleaved repetition
by repetition, so a library figure and its raw-SQL counterpart see the same load.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from bench.support import raw
from bench.support.database import Database, machine, pg_settings, scratch
from bench.support.results import BENCH, command, write
from bench.support.throughput import (
    DrainReport,
    enqueue_many,
    enqueue_single,
    library_drain,
    raw_drain,
    raw_insert,
)
from bench.support.timing import Figure, log, ratio, repeat, verdict

QUICK = ["--quick", "--jobs", "300", "--done-rows", "10000", "--failed-rows", "1000"]
QUICK += ["--rss-jobs", "2000"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="fewer jobs, 1 repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3)")
    parser.add_argument("--jobs", type=int, default=None, help="jobs per drain (default 10000)")
    parser.add_argument("--done-rows", type=int, default=None, help="default 1,000,000")
    parser.add_argument("--failed-rows", type=int, default=None, help="default 100,000")
    parser.add_argument("--rss-jobs", type=int, default=None, help="default 100,000")
    parser.add_argument("--no-savepoint-batches", action="store_true")
    parser.add_argument("--output", type=Path, default=BENCH / "results.md")
    parser.add_argument("--no-chart", action="store_true")


def main(args: argparse.Namespace, db: Database) -> None:
    quick = args.quick
    reps = args.reps or (1 if quick else 3)
    count = args.jobs or (2_000 if quick else 10_000)
    done_rows = args.done_rows if args.done_rows is not None else (100_000 if quick else 1_000_000)
    failed_rows = (
        args.failed_rows if args.failed_rows is not None else (10_000 if quick else 100_000)
    )
    rss_jobs = args.rss_jobs or (10_000 if quick else 100_000)
    single = 300 if quick else 1_000
    batches = 3 if quick else 10
    began = time.monotonic()

    with scratch(db.url) as url:
        host = machine()
        settings = pg_settings(url)
        log(f"PostgreSQL {settings.get('server_version')}; {reps} reps; {count:,} jobs per drain")

        log("enqueue")
        enq = {
            "single": Figure("enqueue, 1 per transaction"),
            "raw_single": Figure("raw INSERT, 1 row per transaction"),
            "many": Figure("enqueue_many, 1,000 per transaction"),
            "raw_many": Figure("raw multi-row INSERT, 1,000 rows per transaction"),
        }
        repeat(
            reps,
            [
                (enq["single"], lambda: enqueue_single(url, single)),
                (enq["raw_single"], lambda: raw_insert(url, single, 1)),
                (enq["many"], lambda: enqueue_many(url, batches, 1_000)),
                (enq["raw_many"], lambda: raw_insert(url, batches, 1_000)),
            ],
        )

        log("drain: raw-SQL limits and the library")
        raw1 = Figure("raw SQL, 1 job per transaction")
        raw32 = Figure("raw SQL, 32 jobs per transaction")
        drains: dict[tuple[str, int, int, int], Figure] = {}
        cases: list[tuple[Figure, Callable[[], float]]] = [
            (raw1, lambda: raw_drain(url, count, 1)),
            (raw32, lambda: raw_drain(url, count, 32)),
        ]
        configs = [
            (mode, processes, concurrency, 1)
            for mode in ("lease", "transactional")
            for processes in (1, 2)
            for concurrency in (1, 8, 32)
        ]
        configs.insert(2, ("lease", 1, 16, 1))  # issue 19's targets name concurrency 16 too
        if not args.no_savepoint_batches:
            # A batch's jobs run one after another on one connection, so several
            # batches in flight (a quarter of the slots each) beat one big batch.
            configs += [("transactional", 1, c, max(2, c // 4)) for c in (8, 32)]
        for mode, processes, concurrency, batch in configs:
            label = f"{mode}{f', savepoint batches of {batch}' if batch > 1 else ''}"
            figure = Figure(f"{label}, {processes} process(es), concurrency {concurrency}")
            drains[(mode, processes, concurrency, batch)] = figure

            def drain(
                m: str = mode, p: int = processes, c: int = concurrency, b: int = batch
            ) -> float:
                return library_drain(
                    url, count, mode=m, processes=p, concurrency=c, savepoint_batch=b
                ).rate

            cases.append((figure, drain))
        repeat(reps, cases)

    with scratch(db.url) as empty, scratch(db.url) as big:
        log(f"flat cost: adding {done_rows:,} done and {failed_rows:,} failed rows")
        started = time.monotonic()
        raw.add_history(big, done_rows, failed_rows)
        log(f"  history added in {time.monotonic() - started:.0f}s")
        flat = {
            "raw_empty": Figure("raw SQL claim, 32 per transaction, empty table"),
            "raw_big": Figure("raw SQL claim, 32 per transaction, with history"),
            "lib_empty": Figure("lease, 1 process, concurrency 32, empty table"),
            "lib_big": Figure("lease, 1 process, concurrency 32, with history"),
        }

        def history_drain(target: str, keep: bool) -> float:
            return library_drain(
                target, count, mode="lease", processes=1, concurrency=32, fresh=not keep
            ).rate

        def raw_history(target: str, keep: bool) -> float:
            if not keep:
                raw.truncate(target)
            raw.fill(target, "noop", count)
            done, seconds = raw.drain(target, 32)
            return done / seconds

        repeat(
            reps,
            [
                (flat["raw_empty"], lambda: raw_history(empty, False)),
                (flat["raw_big"], lambda: raw_history(big, True)),
                (flat["lib_empty"], lambda: history_drain(empty, False)),
                (flat["lib_big"], lambda: history_drain(big, True)),
            ],
        )

        log(f"memory: one worker draining {rss_jobs:,} jobs")
        memory = library_drain(
            empty, rss_jobs, mode="lease", processes=1, concurrency=32, rss_every=1.0
        )

    elapsed = time.monotonic() - began
    report = render(
        host=host,
        settings=settings,
        reps=reps,
        count=count,
        enq=enq,
        raw1=raw1,
        raw32=raw32,
        drains=drains,
        flat=flat,
        history=(done_rows, failed_rows),
        memory=memory,
        rss_jobs=rss_jobs,
        elapsed=elapsed,
        command=command(),
    )
    print(report)
    written = write(args.output, report)
    if not args.no_chart:
        chart(written.with_suffix(".png"), enq, raw1, raw32, drains)


def render(
    *,
    host: dict[str, str],
    settings: dict[str, str],
    reps: int,
    count: int,
    enq: dict[str, Figure],
    raw1: Figure,
    raw32: Figure,
    drains: dict[tuple[str, int, int, int], Figure],
    flat: dict[str, Figure],
    history: tuple[int, int],
    memory: DrainReport,
    rss_jobs: int,
    elapsed: float,
    command: str,
) -> str:
    out: list[str] = []
    add = out.append
    add("# sa-jobqueue benchmark results\n")
    add(
        f"`{command}`, {time.strftime('%Y-%m-%d %H:%M %Z')}, {elapsed / 60:.1f} min. "
        f"Rates in jobs/s: median of {reps} repetition(s) (min-max). "
        f"Drains: {count:,} pre-enqueued no-op jobs, timed from the go signal to the last "
        "worker's exit; raw SQL is one psycopg connection running the same claim and "
        "complete statements.\n"
    )
    add("| measurement | jobs/s, median (min-max) | ratio |")
    add("|---|---|---|")
    add(
        f"| {enq['single'].name} | {enq['single'].cell()} | "
        f"{ratio(enq['single'], enq['raw_single'])} of raw single-row INSERT |"
    )
    add(f"| {enq['raw_single'].name} | {enq['raw_single'].cell()} | |")
    add(
        f"| {enq['many'].name} | {enq['many'].cell()} | "
        f"{ratio(enq['many'], enq['raw_many'])} of raw multi-row INSERT |"
    )
    add(f"| {enq['raw_many'].name} | {enq['raw_many'].cell()} | |")
    add(f"| {raw1.name} | {raw1.cell()} | the limit for transactional mode |")
    add(f"| {raw32.name} | {raw32.cell()} | the batched limit for lease mode |")
    for (mode, processes, concurrency, batch), figure in drains.items():
        base, base_name = (raw32, "raw batched") if mode == "lease" else (raw1, "raw 1/tx")
        note = f"{ratio(figure, base)} of {base_name}"
        if mode == "lease" and concurrency == 1:
            note += f"; {ratio(figure, raw1)} of raw 1/tx"
        if processes == 2:
            one = drains.get((mode, 1, concurrency, batch))
            if one is not None:
                note += f"; {figure.median / one.median:.2f}x 1 process"
        add(f"| {figure.name} | {figure.cell()} | {note} |")
    done_rows, failed_rows = history
    add(f"| {flat['raw_empty'].name} | {flat['raw_empty'].cell()} | |")
    add(
        f"| raw SQL claim, with {done_rows:,} done + {failed_rows:,} failed rows | "
        f"{flat['raw_big'].cell()} | {ratio(flat['raw_big'], flat['raw_empty'])} of empty |"
    )
    add(f"| {flat['lib_empty'].name} | {flat['lib_empty'].cell()} | |")
    add(
        f"| lease, 1 process, concurrency 32, with {done_rows:,} done + {failed_rows:,} failed "
        f"rows | {flat['lib_big'].cell()} | {ratio(flat['lib_big'], flat['lib_empty'])} of empty |"
    )
    mid = memory.rss_samples_kb[len(memory.rss_samples_kb) // 10] if memory.rss_samples_kb else 0
    add(
        f"| RSS of 1 worker (lease, concurrency 32) draining {rss_jobs:,} jobs | "
        f"{memory.rate:,.0f} jobs/s | start {memory.rss_start_kb / 1024:.1f} MiB, "
        f"after 10 % {mid / 1024:.1f} MiB, end {memory.rss_end_kb / 1024:.1f} MiB, "
        f"peak {memory.rss_peak_kb / 1024:.1f} MiB |"
    )
    add("")

    add("## Targets\n")
    lease32 = drains[("lease", 1, 32, 1)]
    near = [  # issue 19: near the raw-SQL limit at every concurrency (1 process, no-op jobs)
        ("lease mode, concurrency 1", drains[("lease", 1, 1, 1)], raw1, 0.85, "one-job-per-tx"),
        ("lease mode, concurrency 8", drains[("lease", 1, 8, 1)], raw32, 0.70, "batched"),
        ("lease mode, concurrency 16", drains[("lease", 1, 16, 1)], raw32, 0.70, "batched"),
        ("lease mode, concurrency 32", lease32, raw32, 0.85, "batched"),
        (
            "transactional mode, concurrency 1",
            drains[("transactional", 1, 1, 1)],
            raw1,
            0.80,
            "one-job-per-tx",
        ),
    ]
    for label, figure, base, share, limit in near:
        add(
            f"- {label} >= {100 * share:.0f} % of the raw {limit} limit: "
            f"{ratio(figure, base)} -- {verdict(figure.median >= share * base.median)}"
        )
    add(
        f"- enqueue, 1 per transaction >= 80 % of a raw single-row INSERT: "
        f"{ratio(enq['single'], enq['raw_single'])} -- "
        f"{verdict(enq['single'].median >= 0.8 * enq['raw_single'].median)}"
    )
    add(
        f"- lease mode, 1 process, concurrency 32 >= 60 % of the raw batched limit: "
        f"{ratio(lease32, raw32)} -- {verdict(lease32.median >= 0.6 * raw32.median)}"
    )
    add(
        f"- lease mode, 1 process, concurrency 32 >= 5,400 jobs/s (3x the fastest peer's "
        f"~1,800): {lease32.median:,.0f} -- {verdict(lease32.median >= 5_400)}"
    )
    tx = [f for (m, p, _, b), f in drains.items() if m == "transactional" and p == 1 and b == 1]
    best_tx = max(tx, key=lambda f: f.median)
    add(
        f"- transactional mode, 1 process >= 60 % of the raw one-job-per-transaction limit: "
        f"best {best_tx.name}: {ratio(best_tx, raw1)} -- "
        f"{verdict(best_tx.median >= 0.6 * raw1.median)}"
    )
    sp = [f for (m, p, _, b), f in drains.items() if m == "transactional" and p == 1 and b > 1]
    if sp:
        best_sp = max(sp, key=lambda f: f.median)
        add(
            f"- transactional mode with savepoint batches, 1 process, above that limit: "
            f"best {best_sp.name}: "
            f"{ratio(best_sp, raw1)} -- {verdict(best_sp.median > raw1.median)}"
        )
    add(
        f"- enqueue_many >= 50 % of a raw multi-row INSERT: "
        f"{ratio(enq['many'], enq['raw_many'])} -- "
        f"{verdict(enq['many'].median >= 0.5 * enq['raw_many'].median)}"
    )
    faster = [
        f"{mode} c={concurrency}: "
        f"{figure.median / drains[(mode, 1, concurrency, batch)].median:.2f}x"
        for (mode, processes, concurrency, batch), figure in drains.items()
        if processes == 2 and concurrency > 1
    ]
    lease2 = drains[("lease", 2, 32, 1)]
    add(
        f"- 2 processes drain faster than 1 (lease, concurrency 32): "
        f"{lease2.median / lease32.median:.2f}x -- "
        f"{verdict(lease2.median > lease32.median)}; all: {', '.join(faster)}"
    )
    add(
        f"- claim throughput with history >= 80 % of empty: raw "
        f"{ratio(flat['raw_big'], flat['raw_empty'])}, library "
        f"{ratio(flat['lib_big'], flat['lib_empty'])} -- "
        f"{verdict(flat['lib_big'].median >= 0.8 * flat['lib_empty'].median)}"
    )
    growth = (memory.rss_end_kb - mid) / mid if mid else 0.0
    add(
        f"- RSS flat while draining {rss_jobs:,} jobs: end is {100 * growth:+.1f} % of the "
        f"value after 10 % of the run -- {verdict(abs(growth) < 0.10)}"
    )
    add("")
    add("## Machine and PostgreSQL\n")
    add("| | |")
    add("|---|---|")
    for key, value in {**host, **settings}.items():
        add(f"| {key} | {value} |")
    add("")
    return "\n".join(out)


def chart(
    path: Path,
    enq: dict[str, Figure],
    raw1: Figure,
    raw32: Figure,
    drains: dict[tuple[str, int, int, int], Figure],
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[bench]'): no chart")
        return
    figures = [raw32, raw1, *drains.values(), enq["raw_many"], enq["many"]]
    names = [f.name for f in figures]
    medians = [f.median for f in figures]
    low = [f.median - min(f.rates) for f in figures]
    high = [max(f.rates) - f.median for f in figures]
    colors = [
        "#888888"
        if f.name.startswith("raw")
        else "#1f77b4"
        if f.name.startswith("lease")
        else "#2ca02c"
        if f.name.startswith("transactional")
        else "#ff7f0e"
        for f in figures
    ]
    fig, ax = plt.subplots(figsize=(10, 0.38 * len(figures) + 1.2))
    ax.barh(range(len(figures)), medians, xerr=[low, high], color=colors, capsize=2)
    ax.set_yticks(range(len(figures)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("jobs/s (median, min-max whiskers)")
    ax.set_title("sa-jobqueue: no-op throughput vs the raw-SQL limit (grey), same run")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    log(f"wrote {path}")
