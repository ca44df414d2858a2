"""Workers killed, connections cut, PostgreSQL restarted; then an SQL oracle (make chaos).

Usage: ``python -m bench chaos [--jobs 2000] [--seconds 90] [--workers 4] [--concurrency 4]
[--lease 4] [--seed N] [--no-restart] [--keep-logs DIR] [--held-workers 2] [--held-jobs 1500]``.

The run starts its own throwaway PostgreSQL cluster (`sa_jobqueue.testing.local_cluster`,
never a shared server, since it restarts it), migrates it, and starts ``--workers``
real ``sa-jobqueue worker tests.support.chaos_app:jobs`` processes plus one idle *probe*
worker (queue ``probe``, polling every 60 s, so only NOTIFY wakes it promptly).
While jobs are enqueued over the window, the driver

* kill -9's a random worker every 3-6 s and starts a replacement;
* calls ``pg_terminate_backend`` every 1-2.5 s on a random connection of a random
  worker: its listener, a handler's open transaction, an idle one (claim loop,
  heartbeats, pool) or an active one;
* restarts PostgreSQL once, halfway, keeping it down for 2 s (no worker is
  restarted for it);
* every 8-12 s, stops one of the ``--held-workers`` (2) with SIGSTOP for longer than a
  lease and two sweeps, then resumes it with SIGCONT. Those workers serve queue
  ``held`` at concurrency 1 with claims ahead on (the default prefetch), and run
  ``--held-jobs`` short ``lease_held`` jobs, so they hold jobs claimed ahead of their
  one slot when they are stopped: the sweeper gives those to the other held worker;
* ``--flow-workers`` (1) serve queue ``flow`` in savepoint batches (``--savepoint-batch
  4``) and run ``--flow-groups`` (20) workflow groups: three transactional jobs and one
  enqueued after them, a batch of four and its callback;
* every 4-8 s, a caller's transaction sends ``jobs.signal`` to a running job and stays
  open for two leases (at least twice): the row stays locked, the lease must not be lost.

Each fault happens at least ``min_kills``/``min_terminations``/``min_stops`` times: the
fault window lasts until then, however slow the machine (a count of faults never
depends on timing).

Then it waits until every job has ended, SIGTERMs the surviving workers, and checks
with SQL over ``jobs``, ``chaos_effects`` (written by the handlers) and
``chaos_transitions`` (every status/attempts change of a job row, by trigger):
every job ended as its kind intends, nothing is lost or stuck (no job left waiting,
no release before its upstream jobs ended), transactional kinds
have exactly one effect, every extra run and every duplicate effect of a lease kind
is explained by a fault, every run of a handler matches a claim and no attempt ran
twice, no attempt started after its lease expired or the job was
claimed again (no double run of a job that had not started), there is no stale
write, no deadlock, and every surviving worker exited 0. It prints one summary table
and exits non-zero if a check failed.

`run()` is importable (the short CI variant in ``tests/acceptance/test_chaos.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, exc, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from bench.support.database import Database
from bench.support.workers import ROOT
from sa_jobqueue import migration
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.testing import LocalCluster, local_cluster
from sa_jobqueue.worker.listener import APPLICATION_NAME as LISTENER_NAME
from tests.support import chaos_app

CLI = str(Path(sys.executable).with_name("sa-jobqueue"))
WEIGHTS = {
    "lease_ok": 30,
    "tx_ok": 30,
    "lease_flaky": 12,
    "tx_flaky": 12,
    "lease_poison": 8,
    "tx_poison": 8,
}


@dataclass
class Config:
    """The knobs of one chaos run."""

    jobs: int = 2000
    seconds: float = 90.0
    workers: int = 4
    concurrency: int = 4
    lease: float = 4.0
    kill_every: tuple[float, float] = (3.0, 6.0)
    terminate_every: tuple[float, float] = (1.0, 2.5)
    restart: bool = True
    restart_at: float = 0.5  # fraction of the window
    down_for: float = 2.0  # seconds the server stays stopped
    quiet_after_restart: float = 10.0  # no terminations while wake-ups are measured
    poll_interval: float = 5.0
    sweep_interval: float = 1.0
    shutdown_timeout: float = 15.0
    drain_timeout: float = 240.0
    seed: int | None = None
    log_dir: str | None = None
    held_workers: int = 2
    held_jobs: int = 1500
    held_burst: int = 300  # enqueued right before each stop, so the victim holds some
    # Held workers keep their claims ahead while a slow handler runs (`--ahead-wait`), so
    # what they hold when resumed is left to the check before each start (`LeaseCheck`: a job
    # whose lease may have expired never starts).
    held_ahead_wait: float = 60.0
    stop_every: tuple[float, float] = (8.0, 12.0)
    stop_for: float | None = None  # None: a lease, two sweep intervals and a second
    min_kills: int = 2
    min_terminations: int = 3
    min_stops: int = 1
    # Workflows run in savepoint batches: `flow_workers` workers of queue ``flow`` with
    # ``--savepoint-batch 4``, `flow_groups` groups each of three transactional jobs and
    # one job enqueued after them, and a batch of four with a callback: every release
    # must happen once, never before its upstream jobs ended.
    flow_workers: int = 1
    flow_groups: int = 20
    # Signal holds: a caller's transaction sends `jobs.signal` to a running job and stays
    # open for two leases; the job's live worker must keep its lease (no rerun unexplained).
    signal_every: tuple[float, float] = (4.0, 8.0)
    min_signal_holds: int = 2


@dataclass
class Proc:
    """One worker process the driver started."""

    name: str
    proc: subprocess.Popen[bytes]
    started: float
    log: Path
    probe: bool = False
    held: bool = False
    flow: bool = False
    killed: float | None = None
    exit_code: int | None = None
    stopped: float | None = None  # SIGSTOP'd at, until SIGCONT


@dataclass
class Report:
    """What a run measured, and which checks failed."""

    config: Config
    rows: list[tuple[str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.failures

    def add(self, name: str, value: object, *, expect: str = "") -> None:
        """A table row."""
        self.rows.append((name, f"{value}{f'  (expect {expect})' if expect else ''}"))

    def check(self, name: str, value: int, *, limit: int = 0) -> None:
        """A row that fails the run when `value` exceeds `limit`."""
        verdict = "ok" if value <= limit else "FAIL"
        self.rows.append((name, f"{value}  {verdict}"))
        self.figures[name] = value
        if value > limit:
            self.failures.append(f"{name}: {value} (at most {limit} allowed)")

    def table(self) -> str:
        """The summary table, as Markdown."""
        width = max(len(name) for name, _ in self.rows)
        lines = [f"| {'measure'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
        lines += [f"| {name.ljust(width)} | {value} |" for name, value in self.rows]
        return "\n".join(lines)


def socket_owners(port: int) -> dict[int, int]:
    """Client TCP port -> pid of the local process holding that connection to `port`."""
    out = subprocess.run(
        ["ss", "-tnpH", "state", "established", f"( dport = :{port} )"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    pattern = r':(\d+)\s+\S+:\d+\s+users:\(\("[^"]*",pid=(\d+)'
    return {int(m[1]): int(m[2]) for m in re.finditer(pattern, out)}


def _pid(worker_id: str | None) -> int | None:
    """The pid inside a ``host:pid:random`` worker id."""
    if not worker_id:
        return None
    try:
        return int(worker_id.rsplit(":", 2)[1])
    except (IndexError, ValueError):
        return None


def _fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    values = sorted(values)
    return f"p50 {statistics.median(values):.2f} s, max {values[-1]:.2f} s (n={len(values)})"


class Driver:
    """Starts workers, injects faults, enqueues jobs; then judges the database."""

    def __init__(self, config: Config, cluster: LocalCluster, log_dir: Path) -> None:
        self.config = config
        self.cluster = cluster
        self.url = cluster.url
        self.log_dir = log_dir
        self.rng = random.Random(config.seed)
        self.db = create_engine(
            f"{self.url}?application_name=chaos-driver",
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
        )
        self.procs: list[Proc] = []
        self.serial = 0
        self.kills: list[tuple[float, int]] = []  # (time, pid)
        self.terminated: list[tuple[float, int, str]] = []  # (time, worker pid, category)
        self.stops: list[tuple[int, float, float]] = []  # (pid, SIGSTOP at, SIGCONT at)
        self.extra_jobs = 0  # the bursts enqueued for the stops, and the workflows
        self.flows: list[tuple[int, list[int]]] = []  # (a job that waited, what for)
        self.signal_holds: list[tuple[float, int]] = []  # (time, job id held)
        self.hold_jobs = 0  # long jobs enqueued after the window for an owed hold
        self.died: list[str] = []  # workers that exited on their own
        self.restart_window: tuple[float, float] | None = None
        self.job_ids: list[int] = []
        self.probes: list[tuple[int, float]] = []  # (job id, enqueued at)
        self.max_connections: dict[str, int] = defaultdict(int)
        self.over_bound: list[str] = []  # what a worker held when it exceeded the bound
        self.cut_backends: set[int] = set()  # terminated: may linger a moment in the view
        self.deadlocks = 0
        self._last_deadlocks: int | None = None
        self._stop_sampling = threading.Event()
        self.t0 = time.time()

    # -- database helpers -------------------------------------------------

    def sql(self, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Run `statement`, retrying for 60 s while the server is away."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.db.connect() as connection:
                    result = connection.execute(text(statement), params or {})
                    return list(result.all()) if result.returns_rows else []
            except exc.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def enqueue(self, items: list[dict[str, Any]]) -> list[int]:
        """Enqueue with idempotency keys, so a retry after a cut commit adds nothing."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with Session(self.db.execution_options(isolation_level="READ COMMITTED")) as s:
                    with s.begin():
                        rows = chaos_app.jobs.enqueue_many(s, items)
                    return [row.id for row in rows]
            except exc.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- workers ----------------------------------------------------------

    def start_worker(self, *, probe: bool = False, held: bool = False, flow: bool = False) -> Proc:
        self.serial += 1
        name = (
            "chaos-probe"
            if probe
            else f"chaos-held{self.serial}"
            if held
            else f"chaos-w{self.serial}f"
            if flow
            else f"chaos-w{self.serial}"
        )
        log = self.log_dir / f"{name}.log"
        env = {
            **os.environ,
            "CHAOS_DATABASE_URL": f"{self.url}?application_name=chaos-app-{self.serial}",
            "CHAOS_LEASE": str(self.config.lease),
        }
        command = [
            CLI,
            "worker",
            "tests.support.chaos_app:jobs",
            "--database-url",
            f"{self.url}?application_name={name}",
            "--queue",
            "probe" if probe else "held" if held else "flow" if flow else "chaos",
            "--concurrency",
            "1" if probe or held else str(self.config.concurrency),
            "--poll-interval",
            "60" if probe else str(self.config.poll_interval),
            "--sweep-interval",
            str(self.config.sweep_interval),
            "--shutdown-timeout",
            str(self.config.shutdown_timeout),
            "--log-level",
            "WARNING",
            *(("--ahead-wait", str(self.config.held_ahead_wait)) if held else ()),
            *(("--savepoint-batch", "4") if flow else ()),
        ]
        with log.open("ab") as out:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
        worker = Proc(name, proc, time.time(), log, probe=probe, held=held, flow=flow)
        self.procs.append(worker)
        return worker

    def alive(self, *, probe: bool | None = False) -> list[Proc]:
        return [
            p
            for p in self.procs
            if p.killed is None and p.exit_code is None and (probe is None or p.probe == probe)
        ]

    def kill_one(self) -> None:
        victims = [p for p in self.alive() if p.stopped is None]
        if not victims:
            return
        victim = self.rng.choice(victims)
        victim.proc.send_signal(signal.SIGKILL)
        victim.killed = time.time()
        self.kills.append((victim.killed, victim.proc.pid))
        victim.proc.wait()
        self.start_worker(held=victim.held, flow=victim.flow)

    def stop_one(self) -> None:
        """SIGSTOP a held worker while it holds jobs claimed ahead; `resume_due` resumes it.

        A burst of `held_burst` short jobs first, then the stop as soon as the victim
        holds three or more (one running, the rest claimed ahead of its one slot).
        """
        victims = [p for p in self.alive() if p.held and p.stopped is None]
        if len(victims) < 2:
            return  # keep one held worker running, to take over the stopped one's jobs
        victim = self.rng.choice(victims)
        burst = len(self.stops) + sum(1 for p in self.procs if p.stopped is not None)
        self.job_ids += self.enqueue(
            [
                {
                    "kind": chaos_app.HELD_KIND,
                    "payload": {"ms": 0},
                    "idempotency_key": f"held-burst:{self.serial}:{burst}:{n}",
                }
                for n in range(self.config.held_burst)
            ]
        )
        self.extra_jobs += self.config.held_burst
        pattern = f"%:{victim.proc.pid}:%"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            [(held,)] = self.sql(
                "SELECT count(*) FROM jobs WHERE status = 'running' AND locked_by LIKE :p",
                {"p": pattern},
            )
            if held >= 3:
                break
            time.sleep(0.005)
        victim.proc.send_signal(signal.SIGSTOP)
        victim.stopped = time.time()

    def resume_due(self, *, all_now: bool = False) -> None:
        """SIGCONT the stopped workers whose stop has lasted `stop_for`."""
        config = self.config
        stop_for = config.stop_for or config.lease + 2 * config.sweep_interval + 1.0
        for p in self.procs:
            if p.stopped is not None and (all_now or time.time() >= p.stopped + stop_for):
                p.proc.send_signal(signal.SIGCONT)
                self.stops.append((p.proc.pid, p.stopped, time.time()))
                p.stopped = None

    def faults_owed(self) -> bool:
        """Whether a fault's minimum count is not reached yet, or a stopped worker waits."""
        config = self.config
        return (
            len(self.kills) < config.min_kills
            or len(self.terminated) < config.min_terminations
            or len(self.signal_holds) < config.min_signal_holds
            or (len(self.stops) < config.min_stops and config.held_workers >= 2)
            or any(p.stopped is not None for p in self.procs)
        )

    def reap(self) -> None:
        """Workers that exited without being told to are a failure; replace them."""
        for p in self.alive(probe=None):
            code = p.proc.poll()
            if code is not None:
                p.exit_code = code
                self.died.append(f"{p.name} (pid {p.proc.pid}) exited {code} on its own")
                self.start_worker(probe=p.probe, held=p.held, flow=p.flow)

    def terminate_one(self) -> None:
        by_pid = {p.proc.pid: p for p in self.alive(probe=None)}
        owners = socket_owners(self.cluster.port)
        rows = [row for row in self.worker_backends() if owners.get(row.client_port) in by_pid]
        groups: dict[str, list[Any]] = defaultdict(list)
        for row in rows:
            if row.query.lstrip().upper().startswith("LISTEN"):
                category = "listener"
            elif row.state and row.state.startswith("idle in transaction"):
                category = "handler transaction"
            elif row.state == "active":
                category = "active statement"
            else:
                category = "idle (loop, heartbeat, pool)"
            groups[category].append(row)
        if not groups:
            return
        category = self.rng.choice(sorted(groups))
        row = self.rng.choice(groups[category])
        self.cut_backends.add(row.pid)
        done = self.sql("SELECT pg_terminate_backend(:pid)", {"pid": row.pid})
        if done and done[0][0]:
            self.terminated.append((time.time(), owners[row.client_port], category))

    def worker_backends(self) -> list[Any]:
        """The backends of worker processes (their own names, and the listener's)."""
        return self.sql(
            "SELECT pid, application_name, state, query, client_port FROM pg_stat_activity "
            "WHERE (application_name LIKE 'chaos-w%' OR application_name = 'chaos-probe' "
            "OR application_name = :listener) AND pid <> pg_backend_pid()",
            {"listener": LISTENER_NAME},
        )

    def sample(self) -> None:
        """Every 0.5 s: connections per worker, and deadlocks (across restarts)."""
        while not self._stop_sampling.wait(0.5):
            try:
                with self.db.connect() as connection:
                    deadlocks = connection.execute(
                        text("SELECT coalesce(sum(deadlocks), 0) FROM pg_stat_database")
                    ).scalar_one()
                backends = self.worker_backends()
            except exc.OperationalError:
                continue
            owners = socket_owners(self.cluster.port)
            names = {p.proc.pid: p.name for p in self.procs}
            held = [
                (names[owners[b.client_port]], b)
                for b in backends
                if owners.get(b.client_port) in names and b.pid not in self.cut_backends
            ]
            per_worker = Counter(name for name, _ in held)
            for name, count in per_worker.items():
                if count > self.max_connections[name] and count > self.bound():
                    what = [f"{b.state}: {b.query[:40]!r}" for n, b in held if n == name]
                    self.over_bound.append(f"{name} held {count}: {what}")
                self.max_connections[name] = max(self.max_connections[name], count)
            deadlocks = int(deadlocks)
            if self._last_deadlocks is not None and deadlocks >= self._last_deadlocks:
                self.deadlocks += deadlocks - self._last_deadlocks
            elif self._last_deadlocks is not None:
                self.deadlocks += deadlocks  # statistics were reset by the restart
            self._last_deadlocks = deadlocks

    # -- the run ----------------------------------------------------------

    def enqueue_flows(self) -> None:
        """The workflows of the savepoint-batch workers: chains and batches, in queue ``flow``."""
        jobs = chaos_app.jobs
        for group in range(self.config.flow_groups):
            deadline = time.monotonic() + 60
            while True:
                try:
                    committed = self.db.execution_options(isolation_level="READ COMMITTED")
                    with Session(committed) as s, s.begin():
                        ids = self._flow_group(s, jobs, group)
                    break
                except exc.OperationalError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            self.job_ids += ids
            self.extra_jobs += len(ids)

    def _flow_group(self, s: Session, jobs: Any, group: int) -> list[int]:
        def one(key: str, **options: Any) -> int:
            payload = chaos_app.payload_for("tx_ok", self.rng.randint(20, 120))
            job = jobs.enqueue(
                s, "tx_ok", payload, queue="flow", idempotency_key=f"flow:{group}:{key}", **options
            )
            return int(job.id)

        upstream = [one(f"up{n}") for n in range(3)]
        dependent = one("after", after=upstream)
        batch = jobs.batch(s, callback=("tx_ok", chaos_app.payload_for("tx_ok", 10)))
        members = batch.enqueue_many(
            [
                {"kind": "tx_ok", "payload": chaos_app.payload_for("tx_ok", 20), "queue": "flow"}
                for _ in range(4)
            ]
        )
        member_ids = [int(m.id) for m in members]
        self.flows += [(dependent, upstream), (batch.id, member_ids)]
        return [*upstream, dependent, batch.id, *member_ids]

    def hold_signal(self, *, owed: bool = False) -> None:
        """Send `jobs.signal` to a running chaos job; keep the transaction open two leases.

        A short job may end between the pick and the signal: another is picked, a few
        times. When a hold is `owed` (after the window) and none runs, a job long enough to
        be held is enqueued (counted in `extra_jobs`) and the next pick finds it.
        """
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            rows = self.sql(
                "SELECT id FROM jobs WHERE queue = 'chaos' AND status = 'running' "
                "ORDER BY random() LIMIT 1"
            )
            if not rows:
                if not owed:
                    return
                ms = int(3 * self.config.lease * 1000)
                key = f"hold:{len(self.signal_holds)}"
                item = {
                    "kind": "lease_ok",
                    "payload": {"ms": ms, "fail": 0},
                    "idempotency_key": key,
                }
                ids = self.enqueue([item])
                if ids[0] not in self.job_ids:
                    self.job_ids += ids
                    self.extra_jobs += 1
                    self.hold_jobs += 1
                time.sleep(0.2)
                continue
            job_id = int(rows[0][0])
            try:
                committed = self.db.execution_options(isolation_level="READ COMMITTED")
                with Session(committed) as s, s.begin():
                    chaos_app.jobs.signal(s, job_id, "ping", {"held": True})
                    self.signal_holds.append((time.time(), job_id))
                    time.sleep(2 * self.config.lease)
                return
            except ValidationError:
                continue  # it ended meanwhile: pick another
            except exc.OperationalError:
                return  # the server went away: no hold this time

    def plan(self) -> list[list[dict[str, Any]]]:
        """The jobs, in batches enqueued every 0.5 s over the first 70 % of the window."""
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        items = []
        for n in range(self.config.jobs):
            kind = self.rng.choices(kinds, weights)[0]
            payload = chaos_app.payload_for(kind, self.rng.randint(50, 400), self.rng.randint(1, 2))
            items.append({"kind": kind, "payload": payload, "idempotency_key": f"chaos:{n}"})
        held = [
            {"kind": chaos_app.HELD_KIND, "payload": {"ms": 0}, "idempotency_key": f"held:{n}"}
            for n in range(self.config.held_jobs if self.config.held_workers else 0)
        ]
        batches = max(1, int(self.config.seconds * 0.7 / 0.5))
        size = -(-len(items) // batches)
        held_size = -(-len(held) // batches)
        return [
            items[i * size : (i + 1) * size] + held[i * held_size : (i + 1) * held_size]
            for i in range(batches)
            if items[i * size : (i + 1) * size] or held[i * held_size : (i + 1) * held_size]
        ]

    def run(self) -> None:
        config = self.config
        sampler = threading.Thread(target=self.sample, daemon=True)
        sampler.start()
        self.start_worker(probe=True)
        for _ in range(config.workers):
            self.start_worker()
        for _ in range(config.held_workers):
            self.start_worker(held=True)
        for _ in range(config.flow_workers):
            self.start_worker(flow=True)
        batches = self.plan()
        self.t0 = time.time()
        end = self.t0 + config.seconds
        restart_at = self.t0 + config.seconds * config.restart_at
        next_batch = self.t0
        next_kill = self.t0 + self.rng.uniform(*config.kill_every)
        next_term = self.t0 + self.rng.uniform(*config.terminate_every)
        next_probe = self.t0 + 1.0
        next_stop = self.t0 + self.rng.uniform(*config.stop_every)
        next_hold = self.t0 + self.rng.uniform(*config.signal_every)
        holding: threading.Thread | None = None
        flows_due = config.flow_workers > 0
        quiet_until = 0.0
        give_up = end + 120.0  # the minimum fault counts are owed at most this long
        while (now := time.time()) < end or (self.faults_owed() and now < give_up):
            over = now >= end
            self.reap()
            self.resume_due()
            if batches and now >= next_batch:
                self.job_ids += self.enqueue(batches.pop(0))
                next_batch += 0.5
            if flows_due and now >= self.t0 + 1.0:
                self.enqueue_flows()
                flows_due = False
            if now >= next_hold and (holding is None or not holding.is_alive()):
                owed = over and len(self.signal_holds) < config.min_signal_holds
                if not over or owed:
                    holding = threading.Thread(
                        target=self.hold_signal, kwargs={"owed": owed}, daemon=True
                    )
                    holding.start()
                next_hold = time.time() + self.rng.uniform(*config.signal_every)
            if config.restart and self.restart_window is None and now >= restart_at:
                down = time.time()
                self.cluster.stop("fast")
                time.sleep(config.down_for)
                self.cluster.start()
                self.restart_window = (down, time.time())
                quiet_until = time.time() + config.quiet_after_restart
                next_probe = time.time()
                continue
            probe_every = 0.25 if now < quiet_until else 1.0
            if now >= next_probe:
                n = len(self.probes)
                [job_id] = self.enqueue([{"kind": "probe", "idempotency_key": f"probe:{n}"}])
                self.probes.append((job_id, time.time()))
                next_probe = time.time() + probe_every
            # After the window, a fault whose minimum is not reached happens at once.
            if over:
                if len(self.kills) < config.min_kills:
                    next_kill = now
                if len(self.terminated) < config.min_terminations:
                    next_term = now
                if len(self.stops) < config.min_stops and not self.stopped_now():
                    next_stop = now
            if now >= next_kill and (not over or len(self.kills) < config.min_kills):
                if now >= quiet_until:
                    self.kill_one()
                next_kill = time.time() + self.rng.uniform(*config.kill_every)
            if now >= next_term and (not over or len(self.terminated) < config.min_terminations):
                if now >= quiet_until:
                    self.terminate_one()
                next_term = time.time() + self.rng.uniform(*config.terminate_every)
            if now >= next_stop and (not over or len(self.stops) < config.min_stops):
                if now >= quiet_until and not self.stopped_now():
                    self.stop_one()
                next_stop = time.time() + self.rng.uniform(*config.stop_every)
            time.sleep(0.05)
        self.resume_due(all_now=True)
        if holding is not None:
            holding.join()
        for batch in batches:  # only when the window was too short to enqueue them all
            self.job_ids += self.enqueue(batch)
        if flows_due:
            self.enqueue_flows()

    def wait_until_finished(self) -> float:
        """Wait for every job to end (no fault any more); return how long it took."""
        started = time.time()
        deadline = time.monotonic() + self.config.drain_timeout
        while time.monotonic() < deadline:
            self.reap()
            [(left,)] = self.sql(
                "SELECT count(*) FROM jobs WHERE status NOT IN ('done', 'failed', 'cancelled')"
            )
            if left == 0:
                break
            time.sleep(0.5)
        return time.time() - started

    def stopped_now(self) -> bool:
        """Whether a worker is stopped (SIGSTOP) now."""
        return any(p.stopped is not None for p in self.procs)

    def stop_workers(self) -> None:
        """SIGTERM every surviving worker and collect its exit code."""
        self.resume_due(all_now=True)
        survivors = self.alive(probe=None)
        # A replacement still importing has no signal handler yet (SIGTERM would
        # kill it with -15): let each one get started first.
        youngest = max((p.started for p in survivors), default=0.0)
        time.sleep(max(0.0, youngest + 5.0 - time.time()))
        for p in survivors:
            p.proc.send_signal(signal.SIGTERM)
        for p in survivors:
            try:
                p.exit_code = p.proc.wait(timeout=self.config.shutdown_timeout + 15)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.exit_code = p.proc.wait()
                self.died.append(f"{p.name} did not stop within the shutdown timeout")
        self._stop_sampling.set()

    # -- the oracle -----------------------------------------------------------

    def judge(self, drain_seconds: float) -> Report:
        config = self.config
        report = Report(config)
        jobs = self.sql(
            "SELECT id, kind, queue, status, attempts, locked_until, locked_by FROM jobs"
        )
        chaos_jobs = [j for j in jobs if j.queue in ("chaos", "held", "flow")]
        effects = self.sql(
            "SELECT job_id, attempt, kind, worker, phase, extract(epoch FROM at)::float8 AS at "
            "FROM chaos_effects ORDER BY id"
        )
        transitions = self.sql(
            "SELECT job_id, old_status, new_status, old_attempts, new_attempts, old_locked_by, "
            "new_locked_by, last_error, extract(epoch FROM at)::float8 AS at "
            "FROM chaos_transitions ORDER BY id"
        )
        wrong_end = self.sql(
            "SELECT id, kind, status FROM jobs WHERE queue IN ('chaos', 'held', 'flow') "
            "AND status <> "
            "CASE WHEN kind LIKE '%poison' THEN 'failed' ELSE 'done' END"
        )
        stuck = self.sql("SELECT id FROM jobs WHERE status = 'running' OR locked_until IS NOT NULL")
        tx_effects_wrong = self.sql(
            "SELECT j.id, j.status, count(e.id) FROM jobs j LEFT JOIN chaos_effects e "
            "ON e.job_id = j.id AND e.phase = 'ok' WHERE j.kind LIKE 'tx_%' "
            "GROUP BY j.id, j.status "
            "HAVING count(e.id) <> CASE WHEN j.status = 'done' THEN 1 ELSE 0 END"
        )
        attempts_wrong = self.sql(
            "SELECT j.id FROM jobs j LEFT JOIN chaos_transitions t ON t.job_id = j.id "
            "AND t.old_status = 'pending' AND t.new_status = 'running' "
            "GROUP BY j.id, j.attempts HAVING count(t.id) <> j.attempts"
        )
        unclaimed_starts = self.sql(
            "SELECT e.job_id, e.attempt FROM chaos_effects e WHERE e.phase = 'start' "
            "AND NOT EXISTS (SELECT 1 FROM chaos_transitions t WHERE t.job_id = e.job_id "
            "AND t.new_status = 'running' AND t.new_attempts = e.attempt "
            "AND t.new_locked_by = e.worker)"
        )
        twice_started = self.sql(
            "SELECT job_id, attempt FROM chaos_effects WHERE phase = 'start' "
            "GROUP BY job_id, attempt HAVING count(*) > 1"
        )
        # Invariant 16: an attempt that had not started never starts once its lease may have
        # expired. Its handler's first line (`began`) ran after the job was claimed again, or
        # after the attempt ended otherwise (the sweeper, a release): a held job started late.
        late_starts = self.sql(
            "SELECT e.job_id, e.attempt FROM chaos_effects e WHERE e.phase = 'start' "
            "AND e.began IS NOT NULL AND EXISTS (SELECT 1 FROM chaos_transitions t "
            "WHERE t.job_id = e.job_id AND t.at < e.began AND ("
            "(t.new_status = 'running' AND t.new_attempts > e.attempt) OR "
            "(t.old_status = 'running' AND t.old_attempts = e.attempt "
            "AND t.new_status <> 'running')))"
        )
        not_last = self.sql(
            "SELECT t.job_id FROM chaos_transitions t JOIN jobs j ON j.id = t.job_id "
            "WHERE t.old_status = 'running' AND t.new_status = 'done' "
            "AND t.old_attempts <> j.attempts"
        )

        # Attempts: claim, start marker, how each ended.
        marks: dict[tuple[int, int], set[str]] = defaultdict(set)
        ok_effects: dict[int, list[Any]] = defaultdict(list)
        for e in effects:
            marks[(e.job_id, e.attempt)].add(f"{e.phase}:{e.worker}")
            if e.phase == "ok":
                ok_effects[e.job_id].append(e)
        claims: dict[tuple[int, int], Any] = {}
        ends: dict[tuple[int, int], Any] = {}
        for t in transitions:
            if t.old_status == "pending" and t.new_status == "running":
                claims[(t.job_id, t.new_attempts)] = t
            elif t.old_status == "running" and (t.job_id, t.old_attempts) not in ends:
                ends[(t.job_id, t.old_attempts)] = t

        killed = {pid: at for at, pid in self.kills}
        lease = config.lease

        def cause(job_id: int, attempt: int) -> str:
            """Why attempt `attempt` of `job_id` did not finish the job."""
            claim = claims.get((job_id, attempt))
            end = ends.get((job_id, attempt))
            if claim is None:
                return "unexplained"
            worker = claim.new_locked_by
            start_mark = f"start:{worker}" in marks[(job_id, attempt)]
            error = (end.last_error or "") if end is not None else ""
            if end is not None and f"fail:{worker}" in marks[(job_id, attempt)]:
                return "deliberate failure"
            pid = _pid(worker)
            end_at = end.at if end is not None else time.time()
            if pid in killed and killed[pid] >= claim.at - 0.5:
                return "worker killed"
            for stopped_pid, stop_at, cont_at in self.stops:
                if stopped_pid == pid and claim.at <= cont_at + 0.5 and end_at >= stop_at - 0.5:
                    return "worker stopped (SIGSTOP)"
            if error.startswith("released unstarted"):
                # Held ahead too long behind a slow handler, given back (docs/workers.md).
                return "given back unstarted" if not start_mark else "unexplained"
            if error.startswith("released at worker shutdown"):
                return "released at shutdown" if not start_mark else "unexplained"
            if self.restart_window is not None:
                down, up = self.restart_window
                if claim.at <= up + 2 * lease and end_at >= down - 0.5:
                    return "server restart"
            for at, wpid, _ in self.terminated:
                if wpid == pid and claim.at - 1 <= at <= end_at + 0.5:
                    return "connection terminated"
            return "unexplained"

        reruns: Counter[str] = Counter()
        unstarted: Counter[str] = Counter()
        duplicates: Counter[str] = Counter()
        stale_writes = 0
        for job in chaos_jobs:
            for attempt in range(1, job.attempts + 1):
                claim = claims.get((job.id, attempt))
                worker = claim.new_locked_by if claim is not None else None
                started = f"start:{worker}" in marks[(job.id, attempt)]
                if not started:
                    unstarted[cause(job.id, attempt)] += 1
                elif attempt < job.attempts:
                    reruns[cause(job.id, attempt)] += 1
                end = ends.get((job.id, attempt))
                # A fenced write (done, fail, retry) must come from the attempt's own run
                # (one whose start mark was lost to an outage may still fail, fenced).
                fenced = end is not None and not (end.last_error or "").startswith(
                    ("lease expired", "released at worker shutdown", "released unstarted")
                )
                if (
                    end is not None
                    and fenced
                    and (
                        end.old_locked_by != worker
                        or (
                            end.new_status == "done"
                            and f"ok:{worker}" not in marks[(job.id, attempt)]
                        )
                    )
                ):
                    stale_writes += 1
            if job.kind in chaos_app.LEASE_KINDS:
                oks = ok_effects[job.id]
                # The completing attempt's effect need not be the last one written: a
                # stopped (SIGSTOP) worker's run resumes and writes its own after it.
                final = [o for o in oks if o.attempt == job.attempts]
                for extra in [o for o in oks if o.attempt != job.attempts] + final[1:]:
                    duplicates[cause(job.id, extra.attempt)] += 1
                if oks and job.status == "done" and not final:
                    stale_writes += 1  # the done mark is not the last run's

        report.add("jobs (lease / transactional)", self._mix(chaos_jobs))
        report.add("window / drain after it", f"{config.seconds:.0f} s / {drain_seconds:.1f} s")
        report.add(
            "workers x concurrency",
            f"{config.workers} x {config.concurrency} (+1 probe worker); "
            f"{len(self.procs)} processes started",
        )
        report.add("kills (kill -9, replaced)", len(self.kills))
        report.add(
            "stops (SIGSTOP of a worker holding claims ahead, then SIGCONT)", len(self.stops)
        )
        report.figures.update(
            jobs=len(chaos_jobs),
            kills=len(self.kills),
            terminated=len(self.terminated),
            stops=len(self.stops),
            restarts=1 if self.restart_window else 0,
            reruns=dict(reruns),
            duplicates=dict(duplicates),
        )
        by_category = Counter(c for _, _, c in self.terminated)
        categories = ", ".join(f"{k}: {v}" for k, v in sorted(by_category.items()))
        report.add("connections terminated", f"{len(self.terminated)} ({categories})")
        report.add("server restarts", 1 if self.restart_window else 0)
        report.check("lost (missing or not ended)", self._lost(chaos_jobs))
        report.check("ended wrong (not done, or poison not failed)", len(wrong_end))
        report.check("stuck (running or locked) after drain", len(stuck))
        report.check("transactional jobs without exactly 1 effect", len(tx_effects_wrong))
        report.check("attempts != claims recorded", len(attempts_wrong))
        report.check("runs of an attempt never claimed", len(unclaimed_starts))
        report.check("attempts whose handler ran twice", len(twice_started))
        report.check(
            "double runs of jobs that had not started (a start after the lease expired)",
            len(late_starts),
        )
        report.check("done by an attempt that was not the last", len(not_last))
        report.check("stale writes", stale_writes)
        report.add(
            "reruns by cause",
            ", ".join(f"{k}: {v}" for k, v in sorted(reruns.items())) or "none",
        )
        report.add(
            "claims never started, by cause",
            ", ".join(f"{k}: {v}" for k, v in sorted(unstarted.items())) or "none",
        )
        report.add(
            "lease duplicates by cause",
            ", ".join(f"{k}: {v}" for k, v in sorted(duplicates.items())) or "none",
        )
        report.check(
            "unexplained reruns/duplicates/unstarted claims",
            reruns["unexplained"] + duplicates["unexplained"] + unstarted["unexplained"],
        )
        report.check("deadlocks (pg_stat_database)", self.deadlocks)
        report.add("signal holds (2 leases each)", len(self.signal_holds))
        report.figures["signal holds (2 leases each)"] = len(self.signal_holds)
        report.figures["jobs enqueued for an owed hold"] = self.hold_jobs
        report.check("jobs released before their upstream ended", len(self._early_releases()))
        report.check(
            "jobs a savepoint batch left waiting",
            len(self.sql("SELECT id FROM jobs WHERE status = 'waiting'")),
        )
        bound = self.bound()
        worst = max(
            (n for name, n in self.max_connections.items() if name.startswith("chaos-w")),
            default=0,
        )
        report.check(f"max connections of one worker (bound {bound})", worst, limit=bound)
        report.check("workers that died on their own", len(self.died))
        nonzero = [p for p in self.procs if p.killed is None and p.exit_code != 0]
        report.check("survivors not exiting 0 on SIGTERM", len(nonzero))
        report.failures += [f"{p.name} exited {p.exit_code} on SIGTERM" for p in nonzero]
        report.failures += self.over_bound[:3]
        self._recovery(report, claims, ends, transitions)
        tracebacks = sum(
            len(re.findall(r"^Traceback", p.log.read_text(errors="replace"), re.MULTILINE))
            for p in self.procs
        )
        report.check("tracebacks in worker logs", tracebacks)
        for message in self.died:
            report.failures.append(message)
        return report

    def bound(self) -> int:
        """The most connections one worker may hold: the claim loop, heartbeats, the
        listener, a transaction per handler; and while signal holds run, the waiting
        heartbeat of the job whose row a hold keeps locked."""
        holds = self.config.min_signal_holds > 0 or bool(self.signal_holds)
        return self.config.concurrency + 3 + (1 if holds else 0)

    def _early_releases(self) -> list[int]:
        """Jobs that waited (a dependent, a callback) whose first start came before an
        upstream job's end: a release that came too early."""
        early = []
        for job_id, upstream in self.flows:
            rows = self.sql(
                "SELECT (SELECT min(e.at) FROM chaos_effects e WHERE e.job_id = :id "
                "AND e.phase = 'start') < (SELECT max(finished_at) FROM jobs "
                "WHERE id = ANY(:upstream))",
                {"id": job_id, "upstream": upstream},
            )
            if rows and rows[0][0]:
                early.append(job_id)
        return early

    def _mix(self, jobs: list[Any]) -> str:
        lease = sum(1 for j in jobs if j.kind in chaos_app.LEASE_KINDS)
        poison = sum(1 for j in jobs if j.kind in chaos_app.POISON_KINDS)
        flaky = sum(1 for j in jobs if j.kind in chaos_app.FLAKY_KINDS)
        return f"{len(jobs)} ({lease} / {len(jobs) - lease}; {flaky} flaky, {poison} poison)"

    def _lost(self, jobs: list[Any]) -> int:
        ended = {j.id for j in jobs if j.status in ("done", "failed")}
        held = self.config.held_jobs if self.config.held_workers else 0
        return sum(1 for job_id in self.job_ids if job_id not in ended) + (
            self.config.jobs + held + self.extra_jobs - len(set(self.job_ids))
        )

    def _recovery(
        self,
        report: Report,
        claims: dict[tuple[int, int], Any],
        ends: dict[tuple[int, int], Any],
        transitions: list[Any],
    ) -> None:
        # Kill -> the job's next claim.
        next_claim: dict[tuple[int, int], float] = {}
        for job_id, attempt in claims:
            following = claims.get((job_id, attempt + 1))
            if following is not None:
                next_claim[(job_id, attempt)] = following.at
        kill_delays = []
        recovered = []
        for at, pid in self.kills:
            for key, claim in claims.items():
                end = ends.get(key)
                interrupted = _pid(claim.new_locked_by) == pid and claim.at < at
                if interrupted and end is not None and end.at > at:
                    recovered.append(end.at - at)
                if interrupted and (end is None or end.at > at) and key in next_claim:
                    kill_delays.append(next_claim[key] - at)
        # The sweeper makes the job due at once; it is then claimed in queue order,
        # behind whatever backlog is due before it.
        report.add("kill -> lease expired, job pending again", _fmt(recovered))
        report.add("kill -> job claimed again", _fmt(kill_delays))
        report.figures["kill_to_recovered"] = recovered
        report.figures["kill_to_restart"] = kill_delays
        if self.restart_window is not None:
            down, up = self.restart_window
            # Held workers are left out: the other one may have claimed every held job; so
            # are flow workers, whose workflows may all have ended before the restart.
            before = {
                p.proc.pid
                for p in self.procs
                if not p.probe and not p.held and not p.flow and p.started < down
            } - {pid for at, pid in self.kills if at < up}
            after = [t for t in transitions if t.at > up]
            claim_at = [
                t.at for t in after if t.new_status == "running" and _pid(t.new_locked_by) in before
            ]
            done_at = [t.at for t in after if t.new_status == "done"]
            report.add("server down (restart took)", f"{up - down:.2f} s")
            report.add(
                "server back -> first claim / first done",
                f"{min(claim_at) - up:.2f} s / {min(done_at) - up:.2f} s"
                if claim_at and done_at
                else "never",
            )
            resumed = {_pid(t.new_locked_by) for t in after if t.new_status == "running"} & before
            # No kill in the quiet window after the restart: every worker alive across
            # it must claim again without being restarted.
            report.add(
                "workers alive across the restart that claimed again",
                f"{len(resumed)} of {len(before)}",
            )
            report.check("restart survivors that never claimed again", len(before - resumed))
            self._wakeups(report, up, claims)

    def _wakeups(self, report: Report, up: float, claims: dict[tuple[int, int], Any]) -> None:
        claimed_at = {job_id: c.at for (job_id, attempt), c in claims.items() if attempt == 1}
        latencies = [
            (at, max(0.0, claimed_at[job_id] - at))
            for job_id, at in self.probes
            if job_id in claimed_at
        ]
        baseline = [lat for at, lat in latencies if at < self.restart_window[0]]  # type: ignore[index]
        after = [(at, lat) for at, lat in latencies if at > up]
        report.add("wake-up latency before the restart", _fmt(baseline))
        window = [(at, lat) for at, lat in after if at < up + self.config.quiet_after_restart]
        first = next(
            (i for i in range(len(window)) if all(lat < 1.0 for _, lat in window[i:])),
            None,
        )
        if first is None or not window:
            report.add("server back -> wake-ups resumed", "never within the quiet window")
            report.failures.append("wake-ups did not resume after the restart")
        else:
            report.add(
                "server back -> wake-ups resumed",
                f"{window[first][0] - up:.2f} s (every probe after it claimed in < 1 s; "
                f"probe worker polls every 60 s)",
            )
            report.figures["wakeups_resumed"] = window[first][0] - up
        never = sum(1 for job_id, _ in self.probes if job_id not in claimed_at)
        report.check("probes never claimed", never)


def run(
    *,
    jobs: int = 2000,
    seconds: float = 90.0,
    workers: int = 4,
    concurrency: int = 4,
    out: Callable[[str], None] = print,
    inspect: Callable[[Driver, Report], None] | None = None,
    **options: Any,
) -> Report:
    """One chaos run on a throwaway cluster; returns the `Report` (check ``.ok``).

    `inspect`, if given, is called with the driver and the report while the cluster
    still runs (the tests plant violations with it to show the oracle catches them).
    """
    config = Config(jobs=jobs, seconds=seconds, workers=workers, concurrency=concurrency, **options)
    if config.seed is None:
        config.seed = random.randrange(2**31)
    with contextlib.ExitStack() as stack:
        if config.log_dir:
            log_dir = Path(config.log_dir)
            log_dir.mkdir(parents=True, exist_ok=True)
        else:
            log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos_")))
        cluster = stack.enter_context(local_cluster(max_connections="200"))
        migration.upgrade(cluster.url)
        setup = create_engine(cluster.url, poolclass=NullPool)
        chaos_app.install(setup)
        setup.dispose()
        driver = Driver(config, cluster, log_dir)
        out(
            f"chaos: seed {config.seed}, {jobs} jobs, {seconds:.0f} s, {workers} workers x "
            f"{concurrency}, lease {config.lease:g} s, cluster on port {cluster.port}"
        )
        try:
            driver.run()
            out(f"chaos: fault window over, {len(driver.kills)} kills; draining")
            drained = driver.wait_until_finished()
        finally:
            driver.stop_workers()
        report = driver.judge(drained)
        if inspect is not None:
            inspect(driver, report)
        driver.db.dispose()
        if not report.ok and not config.log_dir:
            keep = Path(tempfile.mkdtemp(prefix="chaos_logs_"))
            for p in driver.procs:
                with contextlib.suppress(OSError):
                    (keep / p.log.name).write_bytes(p.log.read_bytes())
            report.add("worker logs kept in", keep)
    return report


#: A throwaway cluster of its own, never the runner's server: it restarts it.
SERVER = False
QUICK = ["--jobs", "200", "--seconds", "20", "--workers", "2", "--held-jobs", "200"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-restart", dest="restart", action="store_false")
    parser.add_argument("--keep-logs", dest="log_dir", default=None)
    parser.add_argument("--held-workers", type=int, default=2)
    parser.add_argument("--held-jobs", type=int, default=1500)
    parser.add_argument("--flow-workers", type=int, default=1)
    parser.add_argument("--flow-groups", type=int, default=20)


def main(args: argparse.Namespace, db: Database) -> int:
    """The runner's entry: one run with `args`, its table, and 0 when every check held."""
    report = run(
        jobs=args.jobs,
        seconds=args.seconds,
        workers=args.workers,
        concurrency=args.concurrency,
        lease=args.lease,
        seed=args.seed,
        restart=args.restart,
        log_dir=args.log_dir,
        held_workers=args.held_workers,
        held_jobs=args.held_jobs,
        flow_workers=args.flow_workers,
        flow_groups=args.flow_groups,
    )
    print()
    print(report.table())
    print()
    if report.ok:
        print("chaos: PASS")
        return 0
    print("chaos: FAIL")
    for failure in report.failures:
        print(f"  - {failure}")
    return 1
