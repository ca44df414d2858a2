"""`jobs.wait` and `jobs.wait_async`: block until a job has ended, woken by NOTIFY.

The waiter LISTENs on the table's ended channel (the driver's `Listening`) first, then
reads the job's row, then waits for a notification naming it (`statements.common.ended_notify`),
reading the row again when one arrives and every ``poll_interval`` seconds in case one
is lost. Without LISTEN (SQLite, MariaDB) it reads the row every ``poll_interval``, and
on SQLite also as soon as another connection committed (the driver's `Watching`).
Mixed into `JobQueue` as `WaitAPI`. See docs/durable.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic

from sqlalchemy import Connection, Engine, Select

from sa_jobqueue import statements
from sa_jobqueue.core.aio import is_async_engine, require_greenlet
from sa_jobqueue.core.validation import check_delay, check_job_id
from sa_jobqueue.driver import driver_for
from sa_jobqueue.errors import (
    ConfigurationError,
    JobNotFoundError,
    ValidationError,
    WaitTimeoutError,
)
from sa_jobqueue.ops.admin import JobInfo
from sa_jobqueue.ops.archived import find_archived
from sa_jobqueue.ops.wait_poolers import apooled, pooled
from sa_jobqueue.ops.wait_watch import AsyncRowWatch, RowWatch, async_row_watch, row_watch
from sa_jobqueue.schema.model import JobT
from sa_jobqueue.statements.common import ANY_ENDED

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["DEFAULT_POLL_INTERVAL", "POLL_WITHOUT_LISTEN", "WaitAPI", "names_job"]

#: Seconds between the waiter's safety reads of the row when no notification names it.
DEFAULT_POLL_INTERVAL = 5.0
#: Seconds between its reads of the row on a database without LISTEN (SQLite, MariaDB).
POLL_WITHOUT_LISTEN = 0.5

_ENDED = frozenset(statements.FINISHED_VALUES)


def names_job(payload: str, job_id: int) -> bool:
    """Whether an ended-channel payload (``"12 13 14"``, or ``"*"``) covers `job_id`.

    >>> names_job("12 13 14", 13), names_job("12 13 14", 1), names_job("*", 7)
    (True, False, True)
    """
    return payload == ANY_ENDED or str(job_id) in payload.split(" ")


class _Waiting:
    """One wait's clock and checks: its deadline, when to read the row, its errors."""

    def __init__(
        self, model: type[Any], job_id: object, timeout: object, poll_interval: object
    ) -> None:
        self.job_id = check_job_id(job_id)
        self.timeout = None if timeout is None else check_delay("timeout", timeout)
        # None: DEFAULT_POLL_INTERVAL with LISTEN, POLL_WITHOUT_LISTEN without (`hears`).
        self.poll_interval: float | None = None
        if poll_interval is not None:
            self.poll_interval = check_delay("poll_interval", poll_interval)
            if self.poll_interval <= 0:
                raise ValidationError("poll_interval", poll_interval, "must be more than 0 seconds")
        self.started = time.monotonic()
        self.model = model
        self.channel = self.listen_sql = self.unlisten_sql = ""  # set by `hears`
        self.read: Select[Any] = statements.get_job(model)
        self.params = {"job_id": self.job_id}
        self.status = "pending"

    def hears(self, engine: Any) -> bool:
        """Whether `engine`'s driver LISTENs (`Driver.listening`); takes its statements if so."""
        listening = driver_for(engine, self.model).listening
        if listening is None:
            self.poll_interval = self.poll_interval or POLL_WITHOUT_LISTEN
            return False
        self.poll_interval = self.poll_interval or DEFAULT_POLL_INTERVAL
        self.channel = listening.ended_channel
        self.listen_sql = listening.listen_sql(self.channel)
        self.unlisten_sql = listening.unlisten_sql(self.channel)
        return True

    def row(self, conn: Connection) -> Any:  # the jobs table's, or else its archive's
        live = conn.execute(self.read, self.params).first()
        return live or find_archived(conn, self.model, self.job_id)

    def ended(self, row: Any) -> JobInfo | None:
        """The job if `row` shows it ended; None if not yet; raise if there is no row."""
        if row is None:
            raise JobNotFoundError(self.job_id)
        job = JobInfo.from_row(row)
        self.status = job.status
        return job if job.status in _ENDED else None

    @property
    def interval(self) -> float:
        """Seconds between reads of the row (`poll_interval`, its default once `hears` ran)."""
        return self.poll_interval or DEFAULT_POLL_INTERVAL

    def pause(self) -> float:
        """Seconds to wait for a notification before the next read; raise past the timeout."""
        interval = self.interval
        if self.timeout is None:
            return interval
        left = self.timeout - (time.monotonic() - self.started)
        if left <= 0:
            raise WaitTimeoutError(self.job_id, self.timeout, self.status)
        return min(left, interval)

    def heard(self, channel: str, payload: str) -> bool:
        return channel == self.channel and names_job(payload, self.job_id)


def _check_engine(engine: object, call: str) -> None:
    if is_async_engine(engine):
        raise ConfigurationError(
            f"jobs.{call}() takes a sync Engine, not an AsyncEngine: "
            "use `await jobs.wait_async(async_engine, ...)` with it"
        )
    if not isinstance(engine, Engine):
        raise ConfigurationError(
            f"jobs.{call}() needs a sqlalchemy Engine, not {type(engine).__name__}"
        )


def _psycopg(connection: object, kind: type[Any]) -> Any:
    if not isinstance(connection, kind):
        raise ConfigurationError(
            "jobs.wait needs a psycopg 3 connection to LISTEN on (a postgresql+psycopg:// "
            f"URL), not {type(connection).__name__}"
        )
    return connection


def wait(
    engine: Engine, model: type[Any], job_id: object, timeout: object, poll_interval: object
) -> JobInfo:
    """`WaitAPI.wait` over `model`."""
    waiting = _Waiting(model, job_id, timeout, poll_interval)
    _check_engine(engine, "wait")
    with engine.connect() as conn:
        # Autocommit: a session inside a transaction block is delivered no notification.
        conn.execution_options(isolation_level="AUTOCOMMIT")
        if not waiting.hears(engine):  # no LISTEN on this database: a read per poll
            return _poll_on(conn, waiting, row_watch(conn, waiting.model))
        import psycopg  # here only: an application on SQLite or MariaDB never loads it

        raw = _psycopg(conn.connection.driver_connection, psycopg.Connection)
        if pooled(engine, conn, raw, waiting.interval):
            return _wait_on(conn, raw, waiting)  # no LISTEN: the reads every poll_interval
        conn.exec_driver_sql(waiting.listen_sql)
        try:
            job = _wait_on(conn, raw, waiting)
        except (JobNotFoundError, WaitTimeoutError):
            _unlisten(conn, raw, waiting)
            raise
        except BaseException:
            conn.invalidate()  # interrupted mid-wait: never hand it back to the pool
            raise
        _unlisten(conn, raw, waiting)
        return job


def _poll_on(conn: Connection, waiting: _Waiting, watch: RowWatch | None) -> JobInfo:
    """Read the row every poll interval until the job ended (no LISTEN to be woken by).

    With `watch` (SQLite), read it again as soon as another connection committed.
    """
    while True:
        seen = watch.version() if watch is not None else 0
        job = waiting.ended(waiting.row(conn))
        if job is not None:
            return job
        if watch is None:
            time.sleep(waiting.pause())
        else:
            watch.sleep(seen, waiting.pause())


async def _apoll_on(
    conn: AsyncConnection, waiting: _Waiting, watch: AsyncRowWatch | None
) -> JobInfo:
    """`_poll_on` on the event loop."""
    while True:
        seen = await watch.version() if watch is not None else 0
        job = waiting.ended(await conn.run_sync(waiting.row))
        if job is not None:
            return job
        if watch is None:
            await asyncio.sleep(waiting.pause())
        else:
            await watch.sleep(seen, waiting.pause())


def _wait_on(conn: Connection, raw: psycopg.Connection[Any], waiting: _Waiting) -> JobInfo:
    # LISTEN came first: an end committed from now on is heard, whatever the read sees.
    while True:
        job = waiting.ended(waiting.row(conn))
        if job is not None:
            return job
        pause = waiting.pause()
        deadline = time.monotonic() + pause
        while (left := deadline - time.monotonic()) > 0:
            heard = list(raw.notifies(timeout=left, stop_after=1))
            if any(waiting.heard(n.channel, n.payload) for n in heard):
                break


def _unlisten(conn: Connection, raw: psycopg.Connection[Any], waiting: _Waiting) -> None:
    """UNLISTEN, and drop what arrived meanwhile, before the connection goes back to the pool."""
    conn.exec_driver_sql(waiting.unlisten_sql)
    for _ in raw.notifies(timeout=0):
        pass


async def wait_async(
    engine: AsyncEngine, model: type[Any], job_id: object, timeout: object, poll_interval: object
) -> JobInfo:
    """`WaitAPI.wait_async` over `model`."""
    waiting = _Waiting(model, job_id, timeout, poll_interval)
    if not is_async_engine(engine):
        kind = type(engine).__name__
        hint = ": use jobs.wait(engine, ...) with it" if isinstance(engine, Engine) else ""
        raise ConfigurationError(f"jobs.wait_async() takes an AsyncEngine, not {kind}{hint}")
    require_greenlet("jobs.wait_async()")
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        if not waiting.hears(engine):  # no LISTEN on this database: a read per poll
            return await _apoll_on(conn, waiting, await async_row_watch(conn, waiting.model))
        fairy = await conn.get_raw_connection()
        import psycopg

        raw = _psycopg(fairy.driver_connection, psycopg.AsyncConnection)
        if await apooled(engine, conn, raw, waiting.interval):
            return await _await_on(conn, raw, waiting)  # no LISTEN: reads every poll_interval
        await conn.exec_driver_sql(waiting.listen_sql)
        try:
            job = await _await_on(conn, raw, waiting)
        except (JobNotFoundError, WaitTimeoutError):
            await _aunlisten(conn, raw, waiting)
            raise
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            raise
        await _aunlisten(conn, raw, waiting)
        return job


async def _await_on(
    conn: AsyncConnection, raw: psycopg.AsyncConnection[Any], waiting: _Waiting
) -> JobInfo:
    while True:
        job = waiting.ended(await conn.run_sync(waiting.row))
        if job is not None:
            return job
        pause = waiting.pause()
        deadline = time.monotonic() + pause
        while (left := deadline - time.monotonic()) > 0:
            heard = [n async for n in raw.notifies(timeout=left, stop_after=1)]
            if any(waiting.heard(n.channel, n.payload) for n in heard):
                break


async def _aunlisten(
    conn: AsyncConnection, raw: psycopg.AsyncConnection[Any], waiting: _Waiting
) -> None:
    await conn.exec_driver_sql(waiting.unlisten_sql)
    async for _ in raw.notifies(timeout=0):
        pass


class WaitAPI(Generic[JobT]):
    """Waiting for a job to end (mixed into `JobQueue`)."""

    model: type[JobT]

    def wait(
        self,
        engine: Engine,
        job_id: int,
        *,
        timeout: timedelta | float | None = None,
        poll_interval: timedelta | float | None = None,
    ) -> JobInfo:
        """Block until job `job_id` has ended (``done``, ``failed`` or ``cancelled``); return it.

        Example:
            >>> with Session(engine) as session, session.begin():          # doctest: +SKIP
            ...     job_id = jobs.enqueue(session, "render_pdf", {"id": 7}).id
            >>> job = jobs.wait(engine, job_id, timeout=30)                # doctest: +SKIP
            >>> job.status, job.result, job.last_error                     # doctest: +SKIP
            ('done', {'url': '...'}, None)

        Returns the row as `ops.admin.JobInfo`, the frozen record ``jobs.show``
        returns: plain data, detached from any session (``status``, ``result``,
        ``last_error``, ...). A job that has ended already is returned at once; a
        ``waiting`` job (``after=``) or one that will be retried has not ended.

        It takes one connection of `engine`'s pool for the whole wait, in
        autocommit, and LISTENs on the table's ended channel before it reads the
        row, so an end committed between the read and the wait is never missed.
        Workers NOTIFY the ids of the jobs each claim round ended (one ``pg_notify``
        per acknowledgement, sent at its COMMIT), as do ``jobs.cancel``, the sweeper's
        dead letters and the cancellation of waiting dependents; it reads
        the row again when its id arrives, and every `poll_interval` seconds anyway,
        so an end the channel does not announce (a raw SQL ``UPDATE``, a notification
        lost behind a transaction-mode pooler) is seen within `poll_interval`. It
        never polls faster. The connection is returned to the pool with ``UNLISTEN``
        (or discarded, when the wait is interrupted). Behind PgBouncer in
        transaction mode, pass an engine with a direct URL: a LISTEN through a
        transaction pooler hears nothing, and may stay on a pooled server
        connection. The first wait on an engine finds such a pooler (one more
        read, and a second connection only when a pooler answered), says so once
        in a warning, and its waits then read the row every `poll_interval`
        without LISTEN (docs/durable.md#behind-pgbouncer).

        Args:
            engine: a sync engine on a ``postgresql+psycopg://`` URL, or on SQLite
                (which reads the row when another connection committed, and every
                `poll_interval`) or MariaDB/MySQL (every `poll_interval`).
            job_id: the job's id, committed already (an uncommitted job is unknown).
            timeout: the most it waits (a timedelta or seconds; 0 reads the row once);
                None waits for as long as it takes.
            poll_interval: seconds between safety reads of the row (more than 0; None:
                `DEFAULT_POLL_INTERVAL`, or `POLL_WITHOUT_LISTEN` on a database
                without LISTEN/NOTIFY, SQLite and MariaDB/MySQL).

        Raises:
            WaitTimeoutError: the job had not ended within `timeout` (it is unchanged).
            JobNotFoundError: no job has that id (or its row was deleted meanwhile).
            ValidationError: `job_id`, `timeout` or `poll_interval` is invalid.
            ConfigurationError: `engine` is not a sync engine (on PostgreSQL, psycopg's).
        """
        return wait(engine, self.model, job_id, timeout, poll_interval)

    async def wait_async(
        self,
        engine: AsyncEngine,
        job_id: int,
        *,
        timeout: timedelta | float | None = None,
        poll_interval: timedelta | float | None = None,
    ) -> JobInfo:
        """`wait` for asyncio: ``job = await jobs.wait_async(async_engine, job_id, timeout=30)``.

        The same guarantees, errors and return value as `wait`, over one connection
        of an `AsyncEngine` on a ``postgresql+psycopg://`` URL; it waits on the
        event loop (never in a thread), so other tasks run meanwhile. Named like
        ``worker.run_async``: the engine-level twin (``a``-prefixed names, such as
        ``aenqueue``, take an `AsyncSession`). Cancelling the task ends the wait
        and discards its connection.
        """
        return await wait_async(engine, self.model, job_id, timeout, poll_interval)
