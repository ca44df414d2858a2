"""sa-jobqueue beside PGQueuer and procrastinate, same PostgreSQL, one run (make bench-peers).

Usage: ``python -m bench peers [--reps N] [--jobs N] [--enqueues N] [--only-enqueue]``
(``--only-enqueue``: the enqueue row alone, no drains).
The peers are installed into a virtualenv of their own (``bench/out/peers-venv-3.11``,
one per Python, made on first use with pip; a peer that does not install there leaves
its targets "not measured" with the reason) and driven by ``bench/support/peer_drive.py``;
sa-jobqueue runs from this checkout. Every drain gets a fresh scratch database, holds `--jobs`
pre-enqueued no-op jobs, and runs each library's own "until empty" mode in one
process; the repetitions interleave the libraries (rotating who goes first), so all
see the same load. Enqueue: `--enqueues` single-job enqueues, one transaction each.

Concurrency C maps to each library's documented knob:

- sa-jobqueue: ``jobs.worker(engine, concurrency=C).drain()`` (C handler threads,
  claims of up to C jobs per round), lease mode, sync no-op handler;
- PGQueuer: ``QueueManager.run(mode=drain, batch_size=C, max_concurrent_tasks=2C)``
  (its floor for max_concurrent_tasks is twice the batch), async no-op entrypoint;
- procrastinate: ``app.run_worker_async(concurrency=C, wait=False)``, async no-op task.

Targets (issue: performance and scale): sa-jobqueue's drain at least 3x PGQueuer's
at concurrency 16 and 32; its single enqueue at least 0.8x PGQueuer's.

What a job costs (issue 42 item 4), from every drain at concurrency 16: the worker's CPU
(its process, every thread, from the worker's start to its return) plus the PostgreSQL
server's (every process of the server, read from ``/proc`` around the drain: server-wide,
so the bench should be the machine's only client), per 10,000 jobs; and the worker
process's peak RSS (``VmHWM``: its imports, start and drain). Targets: both at most
the lowest peer's. The server's CPU needs the server on this machine; elsewhere the CPU
target is "not measured".

Beside each drain at 16 and 32 runs the ceiling any worker of that concurrency meets on
this server: `bench/support/raw.py`'s claim-and-complete loop in SQL alone, at the
worker's batch size (``C + prefetch`` jobs per transaction, as the ``drain_limit`` scenario). Where
that loop is below 3x PGQueuer's drain in the same run, no worker reaches the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import venv
from dataclasses import dataclass
from pathlib import Path

from bench import targets
from bench.support import pythons
from bench.support.database import Database
from bench.support.results import BENCH
from bench.support.throughput import enqueue_single, library_drain, raw_drain
from bench.support.timing import postmaster_of, server_cpu_seconds
from sa_jobqueue import migration
from sa_jobqueue.testing import scratch_database
from sa_jobqueue.worker.config import DEFAULT_PREFETCH

PEERS = ("pgqueuer", "procrastinate")
PACKAGES = ("pgqueuer>=1.6", "procrastinate>=3.10", "asyncpg>=0.29", "psycopg[binary,pool]>=3.2")
CONCURRENCIES = (1, 16, 32)
#: The concurrencies whose drains have a target, measured beside their ceiling.
CEILING_AT = (16, 32)
#: The concurrency whose drains give what a job costs (CPU, peak RSS), and its targets.
COST_AT = 16
CPU_TARGET = "42.4 CPU per job drained (worker + database) / lowest peer's"
RSS_TARGET = "42.4 worker's peak RSS / lowest peer's"
#: One per Python: a ``--python 3.13`` run measures the peers on 3.13 too.
VENV = BENCH / "out" / f"peers-venv-{pythons.version()}"
#: The peers' side, run by path in their virtualenv (it imports nothing of this checkout).
PEER_DRIVE = BENCH / "support" / "peer_drive.py"
QUICK = ["--reps", "1", "--jobs", "300", "--enqueues", "100"]


class NotInstalledError(RuntimeError):
    """Some of `PACKAGES` do not install on this Python: their figures cannot be had."""

    def __init__(self, packages: list[str]) -> None:
        super().__init__(f"{', '.join(packages)} does not install on Python {pythons.version()}")
        self.packages = packages


def peers_python() -> Path:
    """The peers' interpreter; the virtualenv is made (and the peers installed) once.

    Raises `NotInstalledError` naming the packages that did not install (remembered in the
    virtualenv, so the next run says so at once; delete it to try again).
    """
    python = VENV / "bin" / "python"
    missing = VENV / "not-installed.txt"
    if not python.exists():
        venv.create(VENV, with_pip=True)
        install = [python, "-m", "pip", "install", "--quiet"]
        failed = [p for p in PACKAGES if subprocess.run([*install, p], check=False).returncode]
        missing.write_text("".join(f"{p}\n" for p in failed))
    failed = missing.read_text().split() if missing.exists() else []
    if failed:
        raise NotInstalledError(failed)
    return python


def peer(python: Path, name: str, url: str, action: str, count: int, concurrency: int) -> dict:
    done = subprocess.run(
        [python, PEER_DRIVE, name, url, action, str(count), str(concurrency)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Drained:
    """One drain: jobs/s, and what it cost (0 where not measured: the raw loop's)."""

    rate: float
    worker_cpu: float = 0.0
    server_cpu: float = 0.0
    max_rss_kb: int = 0


def drain(
    python: Path,
    who: str,
    server_url: str,
    count: int,
    concurrency: int,
    postmaster: int | None = None,
) -> Drained:
    """`who`'s drain of `count` no-op jobs on a fresh scratch database; with `postmaster`,
    the server's CPU over it too."""
    with scratch_database(server_url, prefix="sajq_peers") as url:
        if who == "raw":  # the ceiling: claim and complete in SQL, at the worker's batch
            migration.upgrade(url)
            return Drained(raw_drain(url, count, concurrency + DEFAULT_PREFETCH))
        if who == "sa-jobqueue":
            migration.upgrade(url)
            ours = library_drain(
                url, count, mode="lease", processes=1, concurrency=concurrency,
                postmaster=postmaster,
            )  # fmt: skip
            return Drained(ours.rate, ours.cpu_seconds, ours.server_cpu_seconds, ours.max_rss_kb)
        peer(python, who, url, "install", 0, 1)
        peer(python, who, url, "fill", count, 1)
        before = server_cpu_seconds(postmaster) if postmaster is not None else 0.0
        result = peer(python, who, url, "drain", count, concurrency)
        server = server_cpu_seconds(postmaster) - before if postmaster is not None else 0.0
        if result["done"] != count:
            raise RuntimeError(f"{who} drained {result['done']} of {count} jobs")
        return Drained(
            float(result["rate"]), result["cpu_seconds"], server, int(result["max_rss_kb"])
        )


def enqueue(python: Path, who: str, server_url: str, count: int, action: str = "enqueue") -> float:
    with scratch_database(server_url, prefix="sajq_peers") as url:
        if who == "sa-jobqueue":
            migration.upgrade(url)
            return enqueue_single(url, count)
        peer(python, who, url, "install", 0, 1)
        return float(peer(python, who, url, action, count, 1)["rate"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--enqueues", type=int, default=1000)
    parser.add_argument("--only-enqueue", action="store_true", help="skip the drains")


def main(args: argparse.Namespace, db: Database) -> None:
    concurrencies = () if args.only_enqueue else CONCURRENCIES
    try:
        python = peers_python()
    except NotInstalledError as error:
        for concurrency in CEILING_AT if concurrencies else ():
            target = f"8 drain / PGQueuer at concurrency {concurrency}"
            print("- " + targets.unmeasured(target, f"{error.packages[0]} does not install"))
        if COST_AT in concurrencies:
            for target in (CPU_TARGET, RSS_TARGET):
                print("- " + targets.unmeasured(target, f"{error.packages[0]} does not install"))
        return
    who_all = ("sa-jobqueue", *PEERS)
    drains: dict[tuple[str, int], list[float]] = {}
    costs: dict[str, list[Drained]] = {}
    enqueues: dict[str, list[float]] = {}
    url = db.url
    postmaster = postmaster_of(url)
    for rep in range(args.reps):
        order = who_all[rep % 3 :] + who_all[: rep % 3]
        for concurrency in concurrencies:
            ceiling = ("raw",) if concurrency in CEILING_AT else ()
            for who in order + ceiling:
                if who != "raw" and concurrency == COST_AT:
                    drained = drain(python, who, url, args.jobs, concurrency, postmaster)
                    costs.setdefault(who, []).append(drained)
                else:
                    drained = drain(python, who, url, args.jobs, concurrency)
                drains.setdefault((who, concurrency), []).append(drained.rate)
        for who in order:
            enqueues.setdefault(who, []).append(enqueue(python, who, url, args.enqueues))
        # PGQueuer's enqueue autocommits (one round trip); sa-jobqueue's joins the
        # caller's transaction (BEGIN, INSERT, COMMIT). This row shows PGQueuer's
        # cost when it joins one too.
        in_tx = enqueue(python, "pgqueuer", url, args.enqueues, "enqueue_tx")
        enqueues.setdefault("pgqueuer_tx", []).append(in_tx)

    def median(values: list[float]) -> float:
        return statistics.median(values)

    print(
        f"\n{args.jobs:,} no-op jobs per drain, {args.enqueues:,} single enqueues; "
        f"median of {args.reps} interleaved repetitions (jobs/s)\n"
    )
    print("| measurement | sa-jobqueue | PGQueuer | procrastinate | sa-jobqueue / PGQueuer |")
    print("|---|---|---|---|---|")
    for concurrency in concurrencies:
        row = [median(drains[(who, concurrency)]) for who in who_all]
        print(
            f"| drain, concurrency {concurrency} | {row[0]:,.0f} | {row[1]:,.0f} | "
            f"{row[2]:,.0f} | {row[0] / row[1]:.2f}x |"
        )
    row = [median(enqueues[who]) for who in who_all]
    print(
        f"| enqueue, 1 per transaction | {row[0]:,.0f} | {row[1]:,.0f} | {row[2]:,.0f} | "
        f"{row[0] / row[1]:.2f}x |"
    )
    in_tx = median(enqueues["pgqueuer_tx"])
    print(
        f"| enqueue, 1 per explicit transaction (BEGIN, INSERT, COMMIT) | {row[0]:,.0f} | "
        f"{in_tx:,.0f} | - | {row[0] / in_tx:.2f}x |"
    )
    for concurrency in CEILING_AT if concurrencies else ():
        raw, ours, pg = (median(drains[(who, concurrency)]) for who in ("raw", *who_all[:2]))
        print(
            f"| the ceiling at concurrency {concurrency}: raw SQL claim-and-complete, "
            f"{concurrency + DEFAULT_PREFETCH} per transaction | {raw:,.0f} "
            f"(sa-jobqueue at {ours / raw:.0%} of it) | {pg:,.0f} | - | {raw / pg:.2f}x |"
        )
    if costs:
        print_costs(costs, args.jobs, postmaster is not None)
    print("\nTargets:")
    for concurrency in CEILING_AT if concurrencies else ():
        ratio = median(drains[("sa-jobqueue", concurrency)]) / median(
            drains[("pgqueuer", concurrency)]
        )
        print("- " + targets.record(f"8 drain / PGQueuer at concurrency {concurrency}", ratio, 3.0))
        ceiling = median(drains[("raw", concurrency)]) / median(drains[("pgqueuer", concurrency)])
        if ceiling < 3.0:
            print(
                f"  (out of reach in this run: the raw SQL loop itself drains {ceiling:.2f}x "
                "PGQueuer here, below 3x)"
            )
    if costs:
        record_costs(costs, args.jobs, postmaster is not None)
    ratio = median(enqueues["sa-jobqueue"]) / median(enqueues["pgqueuer"])
    verdict = "holds" if ratio >= 0.8 else "does not hold"
    print(f"- single enqueue >= 0.8x PGQueuer: {ratio:.2f}x -- {verdict}")
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def cpu_per_10k(runs: list[Drained], jobs: int) -> tuple[float, float]:
    """Median worker and server CPU seconds per 10,000 jobs over `runs`."""
    scale = 10_000 / jobs
    return (
        statistics.median(r.worker_cpu for r in runs) * scale,
        statistics.median(r.server_cpu for r in runs) * scale,
    )


def print_costs(costs: dict[str, list[Drained]], jobs: int, server: bool) -> None:
    """The cost table: CPU per 10,000 jobs and peak RSS, per library, at `COST_AT`."""
    print(
        f"\nWhat a job costs, drains at concurrency {COST_AT} (median of "
        f"{len(next(iter(costs.values())))}): CPU seconds per 10,000 jobs, peak RSS\n"
    )
    print("| library | worker CPU | PostgreSQL CPU (server-wide) | both | worker peak RSS, MiB |")
    print("|---|---:|---:|---:|---:|")
    for who, runs in costs.items():
        worker, database = cpu_per_10k(runs, jobs)
        rss = statistics.median(r.max_rss_kb for r in runs) / 1024
        shown = f"{database:.2f}" if server else "not measured (the server is not on this machine)"
        both = f"{worker + database:.2f}" if server else "-"
        print(f"| {who} | {worker:.2f} | {shown} | {both} | {rss:.1f} |")


def record_costs(costs: dict[str, list[Drained]], jobs: int, server: bool) -> None:
    """The item 4 targets: sa-jobqueue's CPU per job and peak RSS against the lowest peer's."""
    peers = [who for who in PEERS if who in costs]
    ours = costs["sa-jobqueue"]
    if server:
        total = sum(cpu_per_10k(ours, jobs))
        lowest = min(sum(cpu_per_10k(costs[who], jobs)) for who in peers)
        print("- " + targets.record(CPU_TARGET, total / lowest, 1.0, at_most=True))
    else:
        print("- " + targets.unmeasured(CPU_TARGET, "the PostgreSQL server is not on this machine"))
    rss = statistics.median(r.max_rss_kb for r in ours)
    lowest_rss = min(statistics.median(r.max_rss_kb for r in costs[who]) for who in peers)
    print("- " + targets.record(RSS_TARGET, rss / lowest_rss, 1.0, at_most=True))
