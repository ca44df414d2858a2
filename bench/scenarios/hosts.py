"""N worker hosts against one PostgreSQL, each in its own network namespace (make bench-hosts).

Usage: ``python -m bench hosts [--hosts 1,2,4,8] [--jobs 50000] [--concurrency 16]
[--skip-unless-permitted]`` (as root). With ``--skip-unless-permitted`` (what
``make bench`` passes) a machine where this process cannot make a network namespace
(not root, no ``ip``, or a container without ``CAP_SYS_ADMIN``) prints why on stderr
and exits 0 instead of failing.

The bench makes everything it talks to, and removes it afterwards, even on failure:

- a throwaway PostgreSQL cluster from the machine's binaries (`LocalCluster`, run as
  the ``postgres`` user), with ``fsync`` and ``synchronous_commit`` on (a real commit
  cost, unlike the test suite's ``fsync = off``) and ``pg_stat_statements`` loaded;
  it listens ONLY on the host-side veth addresses below (no loopback, no other
  interface), and its ``pg_hba.conf`` admits only the bench's subnet;
- per host ``i`` a network namespace ``sajq-h<i>`` and a veth pair ``sajq<i>h``
  (host side, ``10.213.<i>.1/30``) / ``sajq<i>n`` (in the namespace,
  ``10.213.<i>.2/30``). The worker of host ``i`` runs in its namespace
  (``ip netns exec``) and reaches the server at ``10.213.<i>.1``: its only route.

For each N it fills ``--jobs`` due no-op jobs, starts N `bench/support/drive.py` workers at
``--concurrency`` (each in its namespace), times go -> last worker done, and reads
the server's counters around the drain: commits (``pg_stat_database.xact_commit``),
WAL bytes (``pg_current_wal_lsn()``), the claim statement's calls and rows
(``pg_stat_statements``), index tuples read from the pending index
(``pg_stat_user_indexes``) and dead tuples left. The workers count, client side,
claims that returned fewer rows than they asked for. It prints one table, the raw
one-job-per-transaction commit rate of the same cluster as the ceiling reference,
and the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg

from bench.support import raw
from bench.support.database import Database
from bench.support.timing import log
from bench.support.workers import Workers, module_command
from sa_jobqueue import migration
from sa_jobqueue.testing import LocalCluster

SUBNET = "10.213"
MAX_HOSTS = 8
DRAIN_TIMEOUT = 300.0  # seconds for one drain, all workers together
#: Claims are the only statements of the worker that lock with SKIP LOCKED.
CLAIM_QUERY = "%SKIP LOCKED%"
#: A PostgreSQL of its own, on the hosts' veth addresses (not the runner's server).
SERVER = False
QUICK = ["--hosts", "1,2", "--jobs", "1000", "--raw-jobs", "500"]


def ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def host_address(i: int) -> str:
    return f"{SUBNET}.{i}.1"


def remove_hosts(count: int) -> None:
    """Delete the namespaces and links of hosts 1..count (only the bench's own names)."""
    for i in range(1, count + 1):
        ip("netns", "del", f"sajq-h{i}", check=False)  # takes the namespace's veth end along
        ip("link", "del", f"sajq{i}h", check=False)  # the host end, if the pair outlived it


def add_host(i: int) -> None:
    namespace, outside, inside = f"sajq-h{i}", f"sajq{i}h", f"sajq{i}n"
    ip("netns", "add", namespace)
    ip("link", "add", outside, "type", "veth", "peer", "name", inside)
    ip("link", "set", inside, "netns", namespace)
    ip("addr", "add", f"{host_address(i)}/30", "dev", outside)
    ip("link", "set", outside, "up")
    ip("-n", namespace, "addr", "add", f"{SUBNET}.{i}.2/30", "dev", inside)
    ip("-n", namespace, "link", "set", inside, "up")
    ip("-n", namespace, "link", "set", "lo", "up")


@contextlib.contextmanager
def hosts(count: int) -> Iterator[None]:
    """Make `count` namespaces with their veth pairs; remove them whatever happens."""
    taken = subprocess.run(
        ["ip", "-4", "route"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    remove_hosts(MAX_HOSTS)  # leftovers of an interrupted run (our names only)
    if f"{SUBNET}." in taken:
        raise RuntimeError(f"{SUBNET}.0.0/16 is already routed here; refusing to use it")
    try:
        for i in range(1, count + 1):
            add_host(i)
        yield
    finally:
        remove_hosts(MAX_HOSTS)


@contextlib.contextmanager
def cluster(count: int) -> Iterator[LocalCluster]:
    """A throwaway cluster reachable only at the host-side veth addresses."""
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if not bindirs:
        raise RuntimeError("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
    listen = ",".join(host_address(i) for i in range(1, count + 1))
    server = LocalCluster(
        Path(bindirs[0]),
        fsync="on",
        synchronous_commit="on",
        max_connections=str(count * 24 + 20),
        shared_preload_libraries="pg_stat_statements",
        listen_addresses=listen,  # given after the default 127.0.0.1, so it wins
    )
    try:
        server.init()
        with (server.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {SUBNET}.0.0/16 trust\n")
        server.start()
        yield server
    finally:
        server.destroy()


@dataclass
class Counters:
    commits: int
    wal: int
    claim_calls: int
    claim_rows: int
    index_read: int

    @classmethod
    def read(cls, url: str) -> Counters:
        with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
            row = conn.execute(
                "SELECT (SELECT xact_commit FROM pg_stat_database "
                "        WHERE datname = current_database()),"
                " pg_current_wal_lsn() - '0/0'::pg_lsn,"
                " (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
                "        WHERE query LIKE %s AND query LIKE 'WITH%%'),"
                " (SELECT coalesce(sum(rows), 0) FROM pg_stat_statements "
                "        WHERE query LIKE %s AND query LIKE 'WITH%%'),"
                " (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes "
                "        WHERE indexrelname = 'ix_jobs_pending')",
                (CLAIM_QUERY, CLAIM_QUERY),
            ).fetchone()
            assert row is not None
            return cls(*(int(v) for v in row))


def dead_tuples(url: str) -> tuple[int, int]:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT n_dead_tup, autovacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs'"
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


def drain(
    url_of: dict[int, str], count: int, concurrency: int
) -> tuple[float, list[dict[str, Any]]]:
    """Start one worker per host, drain, return (seconds go -> last done, reports)."""
    commands = [
        ["ip", "netns", "exec", f"sajq-h{i}", *drive]
        for i, url in url_of.items()
        for drive in [module_command("bench.support.drive", url, concurrency, "--count-claims")]
    ]
    with Workers(commands) as workers:
        started = workers.go()
        reports = workers.reports(DRAIN_TIMEOUT)
    return max(r["end"] for r in reports) - started, reports


def on_term(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(f"signal {signum}")  # unwinds through the finally blocks: cleanup runs


def namespaces_refused() -> str | None:
    """Why this process cannot make a network namespace, or None when it can.

    Tries it: ``ip netns add`` of a name of the bench's own, then deletes it.
    """
    if os.geteuid() != 0:
        return "it makes network namespaces: run it as root"
    probe = "sajq-probe"
    try:
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    except FileNotFoundError:
        return "no `ip` command (iproute2) on this machine"
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", default="1,2,4,8")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--raw-jobs", type=int, default=5_000)
    parser.add_argument(
        "--skip-unless-permitted",
        action="store_true",
        help="exit 0 with a message where network namespaces cannot be made",
    )


def main(args: argparse.Namespace, db: Database) -> None:
    counts = [int(n) for n in args.hosts.split(",")]
    if not counts or min(counts) < 1 or max(counts) > MAX_HOSTS:
        raise SystemExit(f"--hosts: between 1 and {MAX_HOSTS} each, got {args.hosts!r}")
    refused = namespaces_refused()
    if refused and args.skip_unless_permitted:
        print(f"bench scenario hosts skipped: {refused}", file=sys.stderr)
        return
    if refused:
        raise SystemExit(f"bench scenario hosts: {refused}")
    signal.signal(signal.SIGTERM, on_term)
    top = max(counts)
    rows = []
    with hosts(top), cluster(top) as server:
        url_of = {
            i: f"postgresql+psycopg://postgres@{host_address(i)}:{server.port}/postgres"
            for i in range(1, top + 1)
        }
        admin = url_of[1]  # from the host side: its own address on sajq1h
        log(f"cluster on port {server.port}, listening on {top} veth addresses only")
        migration.upgrade(admin)
        with psycopg.connect(raw.dsn(admin), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            settings = {
                name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                for name in ("server_version", "fsync", "synchronous_commit", "listen_addresses")
            }
        raw.truncate(admin)
        raw.fill(admin, "noop", args.raw_jobs)
        done, seconds = raw.drain(admin, 1)
        raw_rate = done / seconds
        raw.truncate(admin)
        raw.fill(admin, "noop", args.raw_jobs)
        done, seconds = raw.drain(admin, 32)
        raw32_rate = done / seconds
        log(f"raw: {raw_rate:,.0f} commits/s one job each; {raw32_rate:,.0f} jobs/s 32 each")
        for n in counts:
            raw.truncate(admin)
            raw.fill(admin, "noop", args.jobs)
            with psycopg.connect(raw.dsn(admin), autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE jobs")
                conn.execute("SELECT pg_stat_statements_reset()")
            time.sleep(1.5)  # let the fill's statistics reach shared memory
            before = Counters.read(admin)
            seconds, reports = drain(
                {i: url_of[i] for i in range(1, n + 1)}, args.jobs, args.concurrency
            )
            time.sleep(1.5)  # the workers flushed their statistics at exit; the server's too
            after = Counters.read(admin)
            done = raw.count_done(admin)
            warnings = sum(r["warnings"] for r in reports)
            if done != args.jobs or warnings:
                raise RuntimeError(f"N={n}: {done} of {args.jobs} done, {warnings} warnings")
            dead, autovacuums = dead_tuples(admin)
            claims = {k: sum(r["claims"][k] for r in reports) for k in reports[0]["claims"]}
            rows.append(
                {
                    "hosts": n,
                    "rate": args.jobs / seconds,
                    "commits_per_job": (after.commits - before.commits) / args.jobs,
                    "wal_per_job": (after.wal - before.wal) / args.jobs,
                    "claims": claims,
                    "claim_calls": after.claim_calls - before.claim_calls,
                    "claim_rows": after.claim_rows - before.claim_rows,
                    "index_per_job": (after.index_read - before.index_read) / args.jobs,
                    "dead": dead,
                    "autovacuums": autovacuums,
                }
            )
            log(f"N={n}: {args.jobs / seconds:,.0f} jobs/s; claims {claims}")
    load = os.getloadavg()
    print(f"server: {settings}; {args.jobs:,} no-op jobs per drain, one run each")
    print(
        f"raw loop on the same cluster: {raw_rate:,.0f} jobs/s one job per transaction "
        f"(= commits/s), {raw32_rate:,.0f} jobs/s 32 per transaction"
    )
    print(
        f"| hosts (x{args.concurrency}) | jobs/s | vs 1 host | commits/job | WAL/job | "
        "claims (client) | rows/claim | short claims | empty claims | "
        "pending-index tuples read/job | dead tuples after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = rows[0]["rate"]
    flat = None
    for previous, row in zip([None, *rows], rows, strict=False):
        if previous is not None and flat is None and row["rate"] < previous["rate"] * 1.1:
            flat = previous["hosts"]
        c = row["claims"]
        print(
            f"| {row['hosts']} | {row['rate']:,.0f} | {row['rate'] / base:.2f}x | "
            f"{row['commits_per_job']:.3f} | {row['wal_per_job']:,.0f} B | "
            f"{c['claims']:,} (server {row['claim_calls']:,}) | "
            f"{c['rows'] / max(c['claims'], 1):.1f} | {c['short']:,} | {c['empty']:,} | "
            f"{row['index_per_job']:.2f} | {row['dead']:,} |"
        )
    if flat is None:
        print("flattens: not within the hosts measured (each doubling gained >= 10 %)")
    else:
        print(f"flattens: at {flat} host(s) (the next step gained < 10 %)")
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
