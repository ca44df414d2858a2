"""The soak's report: bench/soak-results.md and its plot, bench/soak-results.png."""

from __future__ import annotations

import argparse
from typing import Any

from bench.support import results
from bench.support.database import machine
from bench.support.timing import log


def plot(samples: list[dict[str, float]], title: str) -> str:
    """Draw the jobs table's size and tuples over time; return the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s["minute"] for s in samples]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    top.plot(minutes, [s["jobs_size"] / 2**20 for s in samples], "o-", label="jobs (table)")
    top.plot(minutes, [s["archive_size"] / 2**20 for s in samples], "s-", label="jobs_archive")
    top.set_ylabel("pg_total_relation_size, MiB")
    top.legend()
    top.grid(alpha=0.3)
    top.set_title(title)
    bottom.plot(minutes, [s["n_dead_tup"] for s in samples], "o-", label="jobs n_dead_tup")
    bottom.plot(minutes, [s["n_live_tup"] for s in samples], "s-", label="jobs n_live_tup")
    bottom.plot(minutes, [s["pending"] for s in samples], "^-", label="pending")
    bottom.set_ylabel("rows")
    bottom.set_xlabel("minutes")
    bottom.legend()
    bottom.grid(alpha=0.3)
    figure.tight_layout()
    path = results.place(results.BENCH / "soak-results.png")
    figure.savefig(path, dpi=90)
    plt.close(figure)
    log(f"wrote {path}")
    return path.name


def write(
    args: argparse.Namespace,
    samples: list[dict[str, float]],
    check: dict[str, Any],
    verdicts: list[str],
    settings: dict[str, str],
    load_before: str,
    load_after: str,
) -> None:
    """Write the soak's markdown report beside its plot."""
    png = plot(
        samples,
        f"soak: {args.rate} jobs/s, {args.minutes:g} min, archive after {args.archive_after},"
        f" partitions {args.archive_partition}, retention {args.archive_retention}",
    )
    rows = [
        "| minute | jobs size | live | dead | autovacuums | archive size | pending | enqueued |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in samples:
        rows.append(
            f"| {s['minute']:.1f} | {s['jobs_size'] / 2**20:.1f} MiB | {s['n_live_tup']:,.0f}"
            f" | {s['n_dead_tup']:,.0f} | {s['autovacuum_count']:.0f}"
            f" | {s['archive_size'] / 2**20:.1f} MiB | {s['pending']:,.0f}"
            f" | {s['enqueued']:,.0f} |"
        )
    sizes = [s["jobs_size"] for s in samples]
    dead = [s["n_dead_tup"] for s in samples]
    lines = [
        "# Soak: a steady enqueue rate with the archive on, autovacuum on",
        "",
        "```",
        results.command(),
        "```",
        "",
        "`bench/scenarios/soak.py`: a throwaway PostgreSQL the run starts with **autovacuum"
        " on** (and fsync on; the machine's own server runs with autovacuum off),"
        f" {args.workers} `sa-jobqueue worker bench.support.app:jobs` processes"
        f" (`--concurrency {args.concurrency} --archive-after {args.archive_after}"
        f" --archive-partition {args.archive_partition}"
        f" --archive-retention {args.archive_retention}`), lease-mode no-op jobs enqueued"
        f" with `enqueue_many` every 0.1 s at {args.rate:,} jobs/s for {args.minutes:g} min,"
        f" a sample every {args.sample_every:g} s.",
        "",
        f"![size and dead tuples over time]({png})",
        "",
        "## Verdicts",
        "",
        *[f"- `{line}`" for line in verdicts],
        "",
        f"- enqueued {check['enqueued']:,} jobs in {check['seconds']:.0f} s"
        f" ({check['rate']:,.1f} jobs/s); drained at the end: {check['drained']}",
        f"- found done by SQL: {check['found']:,} = {check['in_jobs']:,} in jobs"
        f" + {check['in_live_partitions']:,} in the live partitions"
        f" + {check['in_dropped_partitions']:,} counted in the partitions dropped since;"
        f" lost: {check['lost']:,}; sum of ids matches: {check['ids_match']};"
        f" ids in both tables: {check['duplicated_live']}",
        f"- jobs by status at the end: {check['by_status']}",
        f"- archive partitions seen: {check['partitions_seen']} from {check['first']}"
        f" to {check['last']}, dropped by the retention: {check['partitions_dropped']},"
        f" gaps: {check['gaps'] or 'none'}, dropped before counted:"
        f" {check['partitions_uncounted'] or 'none'}",
        f"- jobs table: {min(sizes) / 2**20:.1f} to {max(sizes) / 2**20:.1f} MiB,"
        f" dead tuples at most {max(dead):,.0f}; sampler errors: {check['sampler_errors'] or 0}",
        "",
        "## Samples",
        "",
        *rows,
        "",
        "## Where",
        "",
        "Server: " + ", ".join(f"{k} {v}" for k, v in settings.items()) + ".",
        "",
        "Machine: "
        + ", ".join(f"{k} {v}" for k, v in machine().items() if "load" not in k)
        + f"; load average (1, 5, 15 min) before: {load_before}, after: {load_after}.",
        "",
    ]
    results.write(results.BENCH / "soak-results.md", "\n".join(lines))
