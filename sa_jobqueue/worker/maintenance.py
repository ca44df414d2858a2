"""Heartbeats, the sweeper, retention and the archive: the worker's maintenance thread.

On a connection of its own, `Maintenance` extends leases, heartbeats the worker's
registry row, sweeps expired leases (and expired registry rows) and moves the ended jobs'
log into the counters under an advisory lock (and folds their minutes older than any
chart reads into hours), ends the jobs past their task's deadline,
prunes by retention, archives finished jobs and enqueues periodic ticks. See
docs/workers.md, docs/durable.md ("Deadlines") and docs/observability.md ("Counters").
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from sqlalchemy import Connection, Engine, exc

from sa_jobqueue.driver import Driver, queue_connection
from sa_jobqueue.driver.protocol.counters import COMPACT_BATCH, FOLD_AFTER, FOLD_BATCH
from sa_jobqueue.driver.protocol.deadlines import DeadlinePass
from sa_jobqueue.logs import log_job
from sa_jobqueue.ops.archive import Archiver
from sa_jobqueue.ops.retention import Pruner
from sa_jobqueue.periodic import PeriodicEnqueuer
from sa_jobqueue.worker.attempt import AttemptKey, Claimed
from sa_jobqueue.worker.lease_waiters import LeaseWaiters
from sa_jobqueue.worker.pool_watch import PoolWatch
from sa_jobqueue.worker.registration import Registration

__all__ = ["SWEEP_BATCH", "Maintenance"]

log = logging.getLogger("sa_jobqueue.worker")

#: Expired leases recovered per sweep statement.
SWEEP_BATCH = 500
#: At most this many `COMPACT_BATCH` moves of the ended jobs' log per sweep, one transaction each.
COMPACT_ROUNDS = 20
#: At most this many `FOLD_BATCH` folds of old counter minutes per sweep, one transaction each.
FOLD_ROUNDS = 5
#: Seconds until the next fold once one ran out of minutes to fold (a few come due a minute).
FOLD_INTERVAL = 600.0
#: Seconds between two looks for dead workers of this host (one registry read).
DEAD_CHECK_INTERVAL = 1.0


class Maintenance:
    """Keeps a worker's leases alive and recovers other workers' expired ones.

    Args:
        engine: where its connection comes from.
        driver: runs the heartbeat and sweep operations.
        owner: the worker's id (the heartbeat's fence).
        leases: the lease lengths in use (seconds); the shortest sets the tick.
        sweep_interval: seconds between sweeps.
        pruner: retention, run at most once per tick within half a tick.
        running: a snapshot of the worker's claimed, unrecorded jobs.
        on_recovered: called after a sweep made jobs claimable.
        stopped: set when the worker stops; ends `run`.
        periodic: enqueues the due ticks of periodic schedules (about once a second).
        on_cancelled: called with a running job the heartbeat found cancelled (the
            fallback for a missed cancel notification).
        on_renewed: called with the attempts a heartbeat extended and the monotonic
            time just before it was sent (`InFlight.renewed`: a job claimed ahead
            starts without a check while its lease is fresh).
        registration: the worker's registry row, heartbeat from here; the sweeper
            deletes the rows that expired (None: no registry).
        deadlines: ``(kind, seconds)`` of the worker's tasks with a ``deadline``: each
            sweep ends their jobs past it (`Registry.deadlines`).
        archiver: moves finished jobs to the archive and drops its old partitions
            (None: no archive), within half a tick.
        pool_watch: looked at each tick: warns once when the engine's pool, smaller
            than the worker's concurrency + 4, opens connections past its size (None:
            not looked at).
    """

    def __init__(
        self,
        engine: Engine,
        driver: Driver,
        owner: str,
        *,
        leases: Sequence[float],
        sweep_interval: float,
        pruner: Pruner,
        running: Callable[[], list[Claimed]],
        on_recovered: Callable[[], None],
        stopped: threading.Event,
        periodic: PeriodicEnqueuer | None = None,
        on_cancelled: Callable[[Claimed], None] | None = None,
        on_renewed: Callable[[set[AttemptKey], float], None] | None = None,
        registration: Registration | None = None,
        deadlines: Sequence[tuple[str, float]] = (),
        archiver: Archiver | None = None,
        pool_watch: PoolWatch | None = None,
    ) -> None:
        self.archiver = archiver
        self.pool_watch = pool_watch
        self.registration = registration
        self.deadlines = tuple(deadlines)
        self.on_renewed = on_renewed
        self.engine = engine
        self.owner = owner
        self.sweep_interval = sweep_interval
        self.pruner = pruner
        self.running = running
        self.on_recovered = on_recovered
        self.stopped = stopped
        # Tick at a third of the shortest lease: a job claimed right after a pass is
        # still extended in time.
        self.tick = max(0.05, min(min(leases, default=300.0) / 3, sweep_interval))
        # Runtime schedules can appear at any time: every worker looks for due ticks.
        self.periodic = periodic
        if self.periodic is not None:
            self.tick = min(self.tick, self.periodic.interval)
        self.on_cancelled = on_cancelled
        self.driver = driver
        # Leases whose rows another transaction holds locked: waited for, not skipped.
        self.waiters = LeaseWaiters(engine, driver, owner)
        self._dead_checked = -float("inf")
        self._fold_due = -float("inf")  # monotonic time of the next fold

    def run(self) -> None:
        """Heartbeats, sweeps and pruning until `stopped`; the thread's target.

        Each running job's lease is extended once a third of it has passed since its
        claim (or its last extension), so a live job's lease never runs out while
        one heartbeat may fail. Any error is logged and retried: this thread keeps
        the leases alive and must outlive a lost connection or a restarting server.
        """
        last_sweep = time.monotonic()
        beats: dict[AttemptKey, float] = {}  # (id, attempts) -> last extension
        lost: set[AttemptKey] = set()
        conn: Connection | None = None
        failures = 0
        with contextlib.suppress(exc.SQLAlchemyError):
            conn = queue_connection(self.engine.connect())  # before the handlers fill the pool
        while not self.stopped.wait(self.tick if failures == 0 else min(self.tick, 0.5)):
            try:
                if conn is None or conn.invalidated or conn.closed:
                    conn = queue_connection(self.engine.connect())
                self._beat(conn, beats, lost)
                if self.registration is not None:
                    self.registration.maybe_beat(conn)
                # A dead worker of this host: its jobs are recovered now, not at lease end.
                due = time.monotonic() - last_sweep >= self.sweep_interval
                if self._dead_found(conn) or due:
                    self.sweep(conn)
                    last_sweep = time.monotonic()
                self.pruner.maybe_run(conn, budget=self.tick / 2)
                if self.archiver is not None:
                    self.archiver.maybe_run(conn, budget=self.tick / 2)
                if self.periodic is not None:
                    self.periodic.maybe_run(conn)
                if self.pool_watch is not None:
                    self.pool_watch.check()
                failures = 0
            except Exception as error:  # noqa: BLE001 - see the docstring: never die
                failures += 1
                log.warning("database error in heartbeats/sweeper (%s); retrying", error)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.invalidate()
                        conn.close()
                conn = None
        self.waiters.stop()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _beat(
        self, conn: Connection, beats: dict[AttemptKey, float], lost: set[AttemptKey]
    ) -> None:
        """Extend the leases that are a third used up; log each lease found lost once."""
        now = time.monotonic()
        jobs = self.running()
        live = {j.key for j in jobs}
        for key in [k for k in beats if k not in live]:
            del beats[key]
        lost &= live
        renewed = self.waiters.renewed()
        for key, sent in renewed.items():
            beats[key] = max(sent, beats.get(key, sent))
            if self.on_renewed is not None:
                self.on_renewed({key}, sent)
        waiting = self.waiters.waiting()
        due = [
            j
            for j in jobs
            if j.key not in lost
            and j.key not in waiting
            and now - beats.get(j.key, j.claimed_at) >= j.lease / 3
        ]
        if not due:
            return
        held = self._extend(conn, due)
        if held and self.on_renewed is not None:
            self.on_renewed(held, now)
        missed = [j for j in due if j.key not in held]
        owned = self._owned(conn, missed) if missed else set()
        gone = [j for j in missed if j.key not in owned]
        cancelled = self._cancelled(conn, gone) if gone else set()
        still_running = {j.key for j in self.running()}
        for job in due:
            key = job.key
            if key in held:
                beats[key] = now
            elif key in owned:
                # Its row is locked by another transaction: a caller's (jobs.signal,
                # enqueue(after=[...]), the app's FOR UPDATE) or its own uncommitted done.
                # Waiting there on a connection of its own, the heartbeat goes first once
                # the lock is released, so the lease cannot run out under a live handler.
                self.waiters.wait_for([job])
            elif key in still_running:
                lost.add(key)
                if key in cancelled and self.on_cancelled is not None:
                    self.on_cancelled(job)  # its log line says "cancelled"
                    continue
                log_job(
                    log,
                    logging.WARNING,
                    job,
                    "heartbeat found the lease lost (expired and reclaimed by another worker)",
                    event="lease_lost",
                    worker_id=self.owner,
                )

    def _extend(self, conn: Connection, jobs: list[Claimed]) -> set[AttemptKey]:
        """Run the fenced heartbeat for `jobs`; return the attempts still held."""
        with conn.begin():
            return self.driver.job_heartbeat(conn, jobs, self.owner)

    def _cancelled(self, conn: Connection, jobs: list[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, those whose row is ``cancelled``."""
        with conn.begin():
            return self.driver.jobs_cancelled(conn, jobs)

    def _owned(self, conn: Connection, jobs: list[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, those still running under this worker (as last committed)."""
        with conn.begin():
            return self.driver.jobs_still_owned(conn, jobs, self.owner)

    def _dead_found(self, conn: Connection) -> bool:
        """Whether this host has a dead worker (`Registration.dead_here`), looked at each second."""
        if self.registration is None or time.monotonic() - self._dead_checked < DEAD_CHECK_INTERVAL:
            return False
        self._dead_checked = time.monotonic()
        with conn.begin():
            return bool(self.registration.dead_here(conn))

    def sweep_once(self) -> None:
        """Sweep on a connection of its own (at start and in `drain`); log a failure."""
        try:
            with self.engine.connect() as conn:
                self.sweep(conn)
        except exc.SQLAlchemyError as error:
            log.warning("sweeping expired leases failed (%s); will retry", error)

    def sweep(self, conn: Connection) -> int:
        """Recover expired leases and end jobs past their deadline; return how many changed.

        Leases (and the counters' compaction and fold) only if no other worker is sweeping;
        deadlines in any case.
        """
        recovered = self._sweep_leases(conn) + self._end_past_deadlines(conn)
        if recovered:
            self.on_recovered()
        self._compact_counters(conn)
        self._fold_counters(conn)
        return recovered

    def _sweep_leases(self, conn: Connection) -> int:
        """Recover expired leases, if no other worker is sweeping; return how many."""
        recovered = 0
        with conn.begin():
            if not self.driver.lock_try(conn, "sweep"):
                return 0
            if self.registration is not None:
                # This host's workers whose process is gone: their leases end now, and the
                # sweep below recovers their jobs as expired ones (docs/workers-registry.md).
                self.registration.end_dead(conn)
                # Only the rows: their jobs keep their leases (docs/workers-registry.md).
                self.registration.expire(conn)
            while True:
                rows = self.driver.job_sweep(conn, SWEEP_BATCH)
                for row in rows:
                    log_job(
                        log,
                        logging.WARNING,
                        row,
                        "lease expired, now %s",
                        row.status,
                        event="expired",
                        worker_id=self.owner,
                    )
                recovered += len(rows)
                # Other workers claim them now, not at their next poll (NOTIFY at COMMIT).
                self.driver.queue_notify(conn, [r.queue for r in rows if r.status == "pending"])
                # Leases that ran out of attempts are dead letters: their dependents
                # are released in this transaction (docs/workflows.md).
                dead = [(row.id, row.status) for row in rows if row.status == "failed"]
                if dead:  # but those that compensate now (docs/durable.md): not ended
                    owed = set(self.driver.compensations_owe(conn, [d[0] for d in dead], "failed"))
                    dead = [d for d in dead if d[0] not in owed]
                if dead:
                    self.driver.dependents_release(conn, dead)
                if len(rows) < SWEEP_BATCH:
                    break
        return recovered

    def _compact_counters(self, conn: Connection) -> None:
        """Move the ended jobs' log into the counters, under the sweep's lock.

        Up to `COMPACT_ROUNDS` batches of `COMPACT_BATCH` log rows, each its own
        transaction, after the leases' sweep has committed: a backlog (a bulk cancel of
        100,000 jobs logs 100,000 rows) holds neither the recovered jobs' rows nor, on
        SQLite, the file's write lock for the whole of it (100,000 rows in one transaction
        took 1.0 s on SQLite and 2.1 s on MariaDB here, every other writer waiting on
        SQLite).
        """
        for _ in range(COMPACT_ROUNDS):
            with conn.begin():
                if not self.driver.lock_try(conn, "sweep"):
                    return
                if self.driver.counters_compact(conn, COMPACT_BATCH) < COMPACT_BATCH:
                    return

    def _fold_counters(self, conn: Connection) -> None:
        """Fold the counters' minutes older than `FOLD_AFTER` into hours, under the sweep's lock.

        Up to `FOLD_ROUNDS` batches, each its own transaction (a short hold of the lock);
        once a batch finds fewer than `FOLD_BATCH` rows, the next look waits `FOLD_INTERVAL`
        (each look reads past every hour folded before).
        """
        if time.monotonic() < self._fold_due:
            return
        before = datetime.now(timezone.utc) - FOLD_AFTER
        for _ in range(FOLD_ROUNDS):
            with conn.begin():
                if not self.driver.lock_try(conn, "sweep"):
                    return
                if self.driver.counters_fold(conn, before, FOLD_BATCH) < FOLD_BATCH:
                    self._fold_due = time.monotonic() + FOLD_INTERVAL
                    return

    def _end_past_deadlines(self, conn: Connection) -> int:
        """End the jobs of this worker's kinds past their deadline, in one transaction.

        Not under the sweep's lock: the worker that holds it may not have these tasks.
        Workers that share a task may run it at once; locked rows are skipped.
        """
        if not self.deadlines:
            return 0
        with conn.begin():
            return sum(self._end_past_deadline(conn, *deadline) for deadline in self.deadlines)

    def _end_past_deadline(self, conn: Connection, kind: str, seconds: float) -> int:
        """End the unfinished jobs of `kind` created over `seconds` ago; return how many.

        Their dependents are released and their end is announced (``jobs.wait``) in
        the same transaction.
        """
        error = f"deadline passed: not finished within {seconds:g}s of its creation"
        ended = 0
        while True:
            ids = self.driver.jobs_fail_past_deadline(
                conn, DeadlinePass(kind, seconds, SWEEP_BATCH, error)
            )
            for job_id in ids:
                log.warning(
                    "job %d %s failed for good: %s",
                    job_id,
                    kind,
                    error,
                    extra={"event": "deadline", "job_id": job_id, "kind": kind},
                )
            # Those with compensable steps compensate now (docs/durable.md): not ended.
            owed = set(self.driver.compensations_owe(conn, ids, "failed")) if ids else set()
            if ended_ids := [job_id for job_id in ids if job_id not in owed]:
                self.driver.dependents_release(conn, [(job_id, "failed") for job_id in ended_ids])
                self.driver.ended_announce(conn, ended_ids)
            ended += len(ids)
            if len(ids) < SWEEP_BATCH:
                return ended
