"""A worker's row in the worker registry: inserted at start, heartbeat, deleted at a clean stop.

`Registration` runs the driver's registry operations (`Driver.worker_register` and co.)
for one worker: `register` when it starts, `maybe_beat` on each maintenance tick (one
upsert every third of ``gone_after``), `expire` in the sweeper's transaction (other
workers' rows that ran out), `end_dead` there too (the jobs of this host's workers whose
process is gone), `deregister` when it stops. See docs/workers-registry.md.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence

from sqlalchemy import Connection, Engine, exc

from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.driver.protocol.control import WorkerElsewhere, WorkerInfo, WorkerOnHost
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.worker.liveness import Held, LivenessFiles, Probe

__all__ = ["DEAD_GRACE", "Registration", "process_alive"]

log = logging.getLogger("sa_jobqueue.worker")

#: Seconds a row's heartbeat must be old at least before its worker, its pid gone, counts
#: as dead; and at least half of that worker's ``gone_after`` (`dead_here`).
DEAD_GRACE = 1.0


def _grace(row: WorkerOnHost) -> float:
    """How old `row`'s heartbeat must be before a gone pid makes it dead: half its gone_after."""
    return max(DEAD_GRACE, (row.expires_at - row.heartbeat_at).total_seconds() / 2)


def process_alive(pid: int) -> bool:
    """Whether process `pid` of this host may be running (any doubt: True).

    No such process (``ProcessLookupError``) or a zombie (ended, not yet reaped) is dead.
    A live pid counts as alive even if it was reused by another program: the worker's
    jobs then wait for their leases, as they would on another host. Off POSIX: True.
    """
    if os.name != "posix" or pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:  # no /proc (macOS), or it ended meanwhile
        return True


def _version() -> str:
    from sa_jobqueue import __version__  # the package's top, imported late (no cycle)

    return __version__


class Registration:
    """The registry row of one worker.

    Args:
        model: the jobs model.
        worker_id: the worker's id (its ``locked_by``).
        queues: the queues it claims from.
        kinds: the kinds it has handlers for.
        concurrency: its handler slots.
        gone_after: seconds after its last heartbeat at which the row counts as gone.
        driver: runs the registry's operations (default: `driver_for` the first
            engine or connection it is given).
    """

    def __init__(
        self,
        model: type[JobMixin],
        worker_id: str,
        *,
        queues: Sequence[str],
        kinds: Sequence[str],
        concurrency: int,
        gone_after: float,
        driver: Driver | None = None,
        liveness: LivenessFiles | None = None,
    ) -> None:
        self.model = model
        self.liveness = liveness
        self._held: Held | None = None
        self.driver = driver
        self.worker_id = worker_id
        self.gone_after = gone_after
        #: Seconds between heartbeats: a third of `gone_after`, so two may fail.
        self.interval = gone_after / 3
        #: The row's values, refreshed at each heartbeat.
        self.info = WorkerInfo(
            worker_id=worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=_version(),
            queues=tuple(sorted(queues)),
            kinds=tuple(sorted(kinds)),
            concurrency=concurrency,
            gone_after=gone_after,
        )
        self._beaten_at = -float("inf")

    def register(self, engine: Engine) -> None:
        """Hold the liveness file, insert (or refresh) the row; a failure is logged and retried.

        A live row of the same id held by another process (another host or pid: two
        workers given one ``worker_id``) is warned about, once: the two then share one
        registry row and one ``locked_by``, so the registry, ``sa-jobqueue workers`` and
        the running counts cannot tell them apart (fencing still holds, by attempt).
        A worker restarted with its id before its old row expired gets the warning too,
        and when its liveness file was left here unlocked (its previous process killed
        on this host), the leases of the jobs that process ran end now: the sweep at
        start recovers them (`_take_back`).
        """
        if self.liveness is None:
            self.liveness = LivenessFiles.for_database(engine.url, str(self.model.__tablename__))
        if self._held is None:
            self._held = self.liveness.hold(self.worker_id)
        try:
            with engine.begin() as conn:
                other = self._driver(conn).worker_elsewhere(conn, self.info)
                taken_back = self._take_back(conn, other)
                self.beat(conn)
        except exc.SQLAlchemyError as error:
            log.warning("registering worker %s failed (%s); will retry", self.worker_id, error)
            return
        if other is not None and not taken_back:
            log.warning(
                "worker id %s is registered by a live worker on host %s, pid %s (heartbeat "
                "%.0f s ago): two workers share this id, so the registry and `sa-jobqueue "
                "workers` cannot tell them apart; give each its own worker_id (or none, for "
                "a generated one). A worker restarted before its old row expired is fine.",
                self.worker_id,
                other.host,
                other.pid,
                other.age,
            )

    def _take_back(self, conn: Connection, other: WorkerElsewhere | None) -> bool:
        """End the leases of this id's dead previous process on this host (caller's transaction).

        Only when its liveness file was found here, left unlocked (`Held.found`): a
        process of this id ran in this file system and is gone. Not when the id's live
        row is another host's (two workers sharing an id). Whether it did.
        """
        held = self._held
        if held is None or not held.found or (other is not None and other.host != self.info.host):
            return False
        held.found = False  # once per process start
        ended = self._driver(conn).leases_end(conn, [self.worker_id])
        if ended:
            log.warning(
                "worker %s restarted on this host (%s): its previous process is gone; the "
                "leases of its %d running jobs end now",
                self.worker_id,
                self.info.host,
                ended,
                extra={"event": "worker_dead", "dead_worker_id": self.worker_id},
            )
        return True

    def _driver(self, bind: Engine | Connection) -> Driver:
        if self.driver is None:
            self.driver = driver_for(bind, self.model)
        return self.driver

    def beat(self, conn: Connection) -> None:
        """Run the upsert now, in `conn`'s transaction."""
        self._beaten_at = time.monotonic()
        self._driver(conn).worker_register(conn, self.info)

    def maybe_beat(self, conn: Connection) -> None:
        """Heartbeat the row when `interval` seconds passed since the last time.

        A failure is logged (once per interval) and does not propagate: the lease
        heartbeats and the sweeps that share the maintenance thread must go on.
        """
        if time.monotonic() - self._beaten_at >= self.interval:
            try:
                with conn.begin():
                    self.beat(conn)
            except exc.SQLAlchemyError as error:
                log.warning(
                    "heartbeat of worker %s's registry row failed (%s)", self.worker_id, error
                )

    def expire(self, conn: Connection) -> list[str]:
        """Delete the rows that ran out (in the caller's transaction); return their ids."""
        gone = self._driver(conn).workers_expire(conn)
        for worker_id in gone:
            log.warning("worker %s stopped heartbeating; its registry row is gone", worker_id)
        return gone

    def dead_here(self, conn: Connection) -> list[str]:
        """Ids of this host's registered workers whose process is gone: a plain read.

        A row of another worker whose ``host`` is this one's, and whose liveness file
        is here and unlocked (`worker.liveness`): its process ended, now. With no file
        here (a worker in another pid namespace and file system of a host sharing its
        name: a container on the host's network), its pid no longer runs
        (`process_alive`) and its heartbeat is older than half its ``gone_after`` (and
        `DEAD_GRACE`): it beats every third of ``gone_after``, so a row half that old has
        missed one beat and a half, and a live worker's jobs are never taken. A locked
        file is a live worker. A pid means nothing on another host: those rows are never
        looked at here.
        """
        found = self._dead(conn)
        for _, held in found:
            if held is not None:
                held.unlock()
        return [worker_id for worker_id, _ in found]

    def _dead(self, conn: Connection) -> list[tuple[str, Held | None]]:
        """`dead_here`'s ids, each with its liveness file, held, when that says so."""
        driver = self._driver(conn)
        dead: list[tuple[str, Held | None]] = []
        unknown: list[WorkerOnHost] = []
        for row in driver.workers_on_host(conn, self.info.host):
            if row.worker_id == self.worker_id:
                continue
            probe, held = (
                (Probe.UNKNOWN, None)
                if self.liveness is None
                else self.liveness.probe(row.worker_id)
            )
            if probe is Probe.DEAD:
                dead.append((row.worker_id, held))
            elif probe is Probe.UNKNOWN and not process_alive(row.pid):
                unknown.append(row)
        if unknown:
            now = driver.clock_now(conn)
            dead += [
                (r.worker_id, None)
                for r in unknown
                if (now - r.heartbeat_at).total_seconds() > _grace(r)
            ]
        return dead

    def end_dead(self, conn: Connection) -> list[str]:
        """End the leases of `dead_here`'s workers and delete their rows (caller's transaction).

        The sweep that follows in the same transaction recovers their jobs as expired
        leases (`LeaseOps.leases_end`). A dead worker's liveness file is held meanwhile
        and deleted after. Returns the dead workers' ids.
        """
        dead = self._dead(conn)
        driver = self._driver(conn)
        ended_all = False
        try:
            for worker_id, _ in dead:
                ended = driver.leases_end(conn, [worker_id])
                driver.worker_deregister(conn, worker_id)
                log.warning(
                    "worker %s of this host (%s) is gone: its process no longer runs; the "
                    "leases of its %d running jobs end now",
                    worker_id,
                    self.info.host,
                    ended,
                    extra={"event": "worker_dead", "dead_worker_id": worker_id},
                )
            ended_all = True
        finally:  # a failed recovery leaves the files for the next look
            for _, held in dead:
                if held is not None and ended_all:
                    held.release()
                elif held is not None:
                    held.unlock()
        return [worker_id for worker_id, _ in dead]

    def deregister(self, engine: Engine) -> None:
        """Delete the row (a clean stop), then the liveness file; a failure is logged.

        A row that could not be deleted expires; the file goes in any case.
        """
        try:
            with engine.begin() as conn:
                self._driver(conn).worker_deregister(conn, self.worker_id)
        except exc.SQLAlchemyError as error:
            log.warning("deregistering worker %s failed (%s)", self.worker_id, error)
        finally:
            if self._held is not None:
                self._held.release()
                self._held = None
