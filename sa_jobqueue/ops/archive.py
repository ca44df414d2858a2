"""The archive: finished jobs move to ``<table>_archive``; whole partitions age out.

`Archiver` is what a worker's maintenance thread runs with ``archive_after`` (one
worker of the table at a time, under the ``archive`` advisory lock): it creates the
archive's partitions ahead (one per `partition` of time, UTC-aligned), moves finished
jobs older than ``archive_after`` in short batches (`ArchiveOps.move`: one
transaction each, so a killed worker loses or duplicates nothing), and with
``archive_retention`` drops the partitions older than that (PostgreSQL: ``DETACH
... CONCURRENTLY`` then ``DROP``; MariaDB: ``DROP PARTITION``). The SQL is each
driver's (`Driver.archive`); SQLite has none (`Driver.supports_partitions`). See
docs/operations.md#archive-and-retention.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection

from sa_jobqueue.core.durations import check_duration
from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.driver.protocol.archive import FLOOR, ArchivePartition
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import archive_partition_name

__all__ = [
    "DEFAULT_ARCHIVE_BATCH",
    "DEFAULT_ARCHIVE_INTERVAL",
    "DEFAULT_PARTITION",
    "PARTITIONS_AHEAD",
    "Archiver",
    "Partition",
    "archive_now",
    "check_archive_options",
    "partitions",
]

log = logging.getLogger("sa_jobqueue.ops.archive")

#: The time range of one archive partition (``Worker(archive_partition=...)``).
DEFAULT_PARTITION = timedelta(days=1)
#: Partitions kept made ahead of now, beside the current one.
PARTITIONS_AHEAD = 2
#: Jobs moved per statement (each batch its own short transaction).
DEFAULT_ARCHIVE_BATCH = 1000
#: The most seconds between archive runs (shorter when ``archive_after`` is).
DEFAULT_ARCHIVE_INTERVAL = 60.0

_LOCK = "archive"
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
#: Most partitions one run adds to close a gap where ranges follow each other (MariaDB):
#: past that, the first one added spans the older part of the gap.
_MOST_FILLED = 400

#: One partition of the archive: its name and the ``finished_at`` range it holds.
Partition = ArchivePartition


def check_archive_options(
    driver: Driver,
    after: timedelta | None,
    retention: timedelta | None,
    partition: timedelta = DEFAULT_PARTITION,
    database: str = "this database",
) -> None:
    """Raise a `ConfigurationError` naming the bad archive option, or the database.

    `after` None turns the archive off (then `retention` must be None too); a
    database without partitions (`Driver.supports_partitions`) refuses it.
    """
    for name, value in (("archive_after", after), ("archive_retention", retention)):
        if value is not None:
            try:
                check_duration(name, value)
            except ValueError as error:
                raise ConfigurationError(str(error)) from None
    if after is None:
        if retention is not None:
            raise ConfigurationError("archive_retention goes with archive_after (no archive)")
        return
    if not driver.supports_partitions:
        raise ConfigurationError(
            f"archive_after needs partitions (PostgreSQL, MariaDB); {database} has none "
            "(retention= prunes finished jobs here: docs/operations.md#archive-and-retention)"
        )
    if not isinstance(partition, timedelta) or not (
        timedelta(minutes=1) <= partition <= timedelta(days=31)
        and partition.total_seconds() % 60 == 0
    ):
        raise ConfigurationError(
            f"archive_partition must be whole minutes between 1m and 31d, not {partition!r}"
        )


def partitions(conn: Connection, model: type[JobMixin]) -> list[Partition]:
    """The archive's partitions, oldest first (read from the catalog)."""
    return driver_for(conn, model).archive.partitions(conn)


class Archiver:
    """A worker's archive: partitions ahead, moves in batches, retention by partition.

    Args:
        model: the jobs model.
        after: finished jobs older than this move to the archive.
        retention: partitions wholly older than this are detached and dropped (None:
            kept).
        partition: the time range of one partition (default a day).
        driver: the table's driver (default: `driver_for` the first connection).
        batch_size: jobs moved per statement.
    """

    def __init__(
        self,
        model: type[JobMixin],
        after: timedelta,
        retention: timedelta | None = None,
        partition: timedelta = DEFAULT_PARTITION,
        driver: Driver | None = None,
        batch_size: int = DEFAULT_ARCHIVE_BATCH,
    ) -> None:
        self.model = model
        self.after = after
        self.retention = retention
        self.partition = partition
        self.driver = driver
        self.batch_size = batch_size
        self.interval = max(0.2, min(DEFAULT_ARCHIVE_INTERVAL, after.total_seconds() / 2))
        self._next = 0.0
        self._missing: bool | None = None  # the archive table, once looked for

    def maybe_run(self, conn: Connection, *, budget: float) -> int | None:
        """Archive on `conn` if the interval has passed; return the jobs moved, or None."""
        if time.monotonic() < self._next:
            return None
        moved, complete = self.run(conn, budget=budget)
        self._next = time.monotonic() + (0.0 if not complete else self.interval)
        if moved:
            log.info("archived %d finished jobs%s", moved, "" if complete else "; more left")
        if complete and self.retention is not None and not self._missing:
            self.expire(conn)
        return moved

    def _slot(self, instant: datetime) -> tuple[datetime, datetime]:
        step = self.partition
        low = _EPOCH + step * ((instant - _EPOCH) // step)
        return low, low + step

    def _ensure(self, conn: Connection, instant: datetime, known: list[Partition]) -> Partition:
        """The partition holding `instant`, made when missing (`known` is kept up to date)."""
        for found in known:
            if found.low <= instant < found.high:
                return found
        assert self.driver is not None  # noqa: S101 - run's first line
        if not self.driver.archive.partition_gaps:
            return self._follow(conn, instant, known)
        low, high = self._slot(instant)
        for found in known:  # another partition size made before: do not overlap
            if found.high <= instant:
                low = max(low, found.high)
            elif found.low > instant:
                high = min(high, found.low)
        return self._add(conn, Partition(self._name(low), low, high), known)

    def _follow(self, conn: Connection, instant: datetime, known: list[Partition]) -> Partition:
        """Where ranges follow each other: one partition per slot, up to `instant`'s.

        Past the last partition only (below it, one holds `instant`). With none yet,
        the first one made holds everything below its bound. A gap of more than
        `_MOST_FILLED` slots gets one partition for its older part.
        """
        low, high = self._slot(instant)
        if not known:
            return self._add(conn, Partition(self._name(low), FLOOR, high), known, first=True)
        highs = [high]
        while highs[-1] - self.partition > known[-1].high and len(highs) < _MOST_FILLED:
            highs.append(highs[-1] - self.partition)
        made = known[-1]
        for bound in reversed(highs):
            made = self._add(conn, Partition(self._name(made.high), made.high, bound), known)
        return made

    def _name(self, low: datetime) -> str:
        return archive_partition_name(self.model.__tablename__, low.strftime("%y%m%d%H%M"))

    def _add(
        self, conn: Connection, made: Partition, known: list[Partition], *, first: bool = False
    ) -> Partition:
        assert self.driver is not None  # noqa: S101 - run's first line
        self.driver.archive.partition_add(conn, made.name, made.low, made.high, first=first)
        known.append(made)
        log.info("archive partition %s made for [%s, %s)", made.name, made.low, made.high)
        return made

    def run(self, conn: Connection, *, budget: float | None = None) -> tuple[int, bool]:
        """Make partitions ahead, then move batches until none is left or `budget` ends.

        Returns:
            ``(jobs moved, complete)``: complete is False when the budget stopped it.
        """
        if self.driver is None:
            self.driver = driver_for(conn, self.model)
        archive = self.driver.archive
        if not self._has_table(conn):
            return 0, True
        deadline = None if budget is None else time.monotonic() + budget
        moved = 0
        known: list[Partition] | None = None
        while True:
            with conn.begin():
                if not self.driver.lock_try(conn, _LOCK):
                    return moved, True  # another worker archives this table now
                archive.bound_waits(conn)
                now = self.driver.clock_now(conn)
                bounds: dict[str, object] = {"before": now - self.after, "low": _EPOCH}
                bounds["high"] = now
                if known is None:  # once per run (a stale list fails a batch: next round)
                    known = partitions(conn, self.model)
                    if not known and not archive.partition_gaps:
                        # The first partition holds all below it: start at the oldest job's.
                        self._ensure(conn, archive.oldest(conn, bounds) or now, known)
                    for ahead in range(PARTITIONS_AHEAD + 1):
                        self._ensure(conn, now + self.partition * ahead, known)
                oldest = archive.oldest(conn, bounds)
                if oldest is None:
                    return moved, True
                target = self._ensure(conn, oldest, known)
                bounds.update(low=target.low, high=target.high, limit=self.batch_size)
                done = archive.move(conn, bounds)
            moved += done
            if done == 0:  # the oldest rows are locked by someone: next round
                return moved, True
            if deadline is not None and time.monotonic() >= deadline:
                return moved, False

    def _has_table(self, conn: Connection) -> bool:
        """Whether the archive table exists; said once, in one line, when it does not."""
        assert self.driver is not None  # noqa: S101 - run's first line
        if self._missing is None:
            with conn.begin():
                self._missing = not self.driver.archive.exists(conn)
            if self._missing:
                log.error(
                    "table %s_archive does not exist (revision sajq_0011): nothing is archived;"
                    " run sa-jobqueue migrate --table %s, then restart the worker",
                    self.model.__tablename__,
                    self.model.__tablename__,
                )
        return not self._missing

    def expire(self, conn: Connection) -> list[str]:
        """Drop the partitions older than the retention (`ArchiveOps.drop`).

        On a connection of its own in autocommit (PostgreSQL's ``DETACH ...
        CONCURRENTLY`` cannot run in a transaction block; MariaDB's ``DROP PARTITION``
        commits anyway). How each waits for the archive's readers:
        docs/operations.md#archive-and-retention. A drop cut off (a killed worker) is
        finished by the next run. One worker at a time: the others find the
        ``archive`` lock taken and leave it.
        """
        assert self.retention is not None  # noqa: S101 - maybe_run's guard
        with conn.begin():
            if self.driver is None:
                self.driver = driver_for(conn, self.model)
            if not self.driver.lock_try(conn, _LOCK):
                return []
            cutoff = self.driver.clock_now(conn) - self.retention
            old = [p for p in partitions(conn, self.model) if p.high <= cutoff]
            orphans = self.driver.archive.orphans(conn)
        if not old and not orphans:
            return []
        with conn.engine.connect() as own:
            own = own.execution_options(isolation_level="AUTOCOMMIT")
            dropped = self.driver.archive.drop(own, old, orphans)
        if dropped:
            log.info("archive retention dropped %s", ", ".join(dropped))
        return dropped


def archive_now(
    conn: Connection,
    model: type[JobMixin],
    *,
    after: timedelta,
    partition: timedelta = DEFAULT_PARTITION,
    batch_size: int = DEFAULT_ARCHIVE_BATCH,
) -> int:
    """Move every finished job older than `after` into the archive now; return how many.

    `conn` must have no transaction open. The worker's way, run once to the end.
    """
    driver = driver_for(conn, model)
    check_archive_options(driver, after, None, partition, conn.dialect.name)
    archiver = Archiver(model, after, None, partition, driver=driver, batch_size=batch_size)
    return archiver.run(conn)[0]
