"""LISTEN/NOTIFY wake-ups on one dedicated connection; polling stays the safety net.

The `Listener` thread LISTENs (the driver's `Listening`) outside the engine's pool, calls
``on_wake(queue, run_at)`` per notification (`parse_payload`), reconnects with backoff, and
checks with a test notification that LISTEN hears at all. See docs/notifications.md.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import URL, Engine, create_engine
from sqlalchemy.pool import NullPool

from sa_jobqueue.core.poolers import LISTENER_FIX as FIX
from sa_jobqueue.core.poolers import POOLER_WARNING, connection_transaction_pooled
from sa_jobqueue.driver import Listening
from sa_jobqueue.retry import Backoff

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "APPLICATION_NAME",
    "LISTEN_READY_TIMEOUT",
    "PROBE_PREFIX",
    "Listener",
    "Notifier",
    "PollingNotifier",
    "WakeCallback",
    "parse_payload",
    "start_notifier",
]

log = logging.getLogger("sa_jobqueue.worker.listener")

#: ``application_name`` of the listener's connection, to spot it in ``pg_stat_activity``.
APPLICATION_NAME = "sa_jobqueue listener"

#: Payloads of the listener's own test notifications start with this; queue names
#: cannot contain ``?`` (`core.validation.NAME_PATTERN`), so no worker mistakes one for a queue.
PROBE_PREFIX = "?sa_jobqueue-probe "

# How often the listening loop returns to check for stop() and the health probe.
_TICK = 0.5


#: ``on_wake(queue, run_at)``: see `Listener`.
WakeCallback = Callable[[str | None, float | None], None]


class Notifier(Protocol):
    """What wakes an idle worker between polls."""

    connected: threading.Event  # set while notifications can arrive

    def start(self) -> None:
        """Begin delivering wake-ups."""
        ...

    def stop(self, timeout: float = 2.0) -> None:
        """Stop delivering wake-ups and release what it holds."""
        ...


class PollingNotifier:
    """A `Notifier` that never notifies: the worker relies on its polls alone.

    For ``listen=False`` and for setups where LISTEN cannot work (a
    transaction-mode pooler in front of the database).
    """

    def __init__(self) -> None:
        self.connected = threading.Event()  # never set: nothing can arrive

    def start(self) -> None:
        """Nothing to start."""

    def stop(self, timeout: float = 2.0) -> None:
        """Nothing to stop."""


def parse_payload(payload: str) -> tuple[str, float | None]:
    """Split a notification payload into ``(queue, run_at)``.

    ``run_at`` is None when a job of the queue is due now, else the earliest
    ``run_at`` of the statement's jobs in Unix seconds (database clock).

    >>> parse_payload("mail")
    ('mail', None)
    >>> parse_payload("mail 1764450000.25")
    ('mail', 1764450000.25)
    """
    queue, _, at = payload.rpartition(" ")
    if queue:
        try:
            return queue, float(at)
        except ValueError:
            pass  # a raw-SQL queue name with a space; served queue names have none
    return payload, None


class _Pooled(Exception):  # noqa: N818 - a signal between two methods, never raised out
    """`Listener._connect` found a transaction-mode pooler: no LISTEN, no reconnect."""


class Listener:
    """A daemon thread that LISTENs for enqueue notifications and wakes the worker.

    Args:
        engine: whose URL, connect arguments and pool events open the listener's own
            connection (a fresh one at each reconnect, never one of its pool).
        listening: the driver's `Listening`: the channels, the LISTEN statement.
        queues: the queues whose notifications wake the worker.
        on_wake: called from the listener thread with ``(queue, run_at)`` per
            notification of a served queue (`parse_payload`), and with
            ``(None, None)`` after each (re)connect.
        health_interval: seconds of silence after which the connection is probed.
        max_backoff: the longest wait between reconnection attempts, in seconds.
        url: connect here instead of to the engine's URL (a worker's
            ``listen_url``: a direct connection beside a transaction pooler).
        probe_timeout: seconds to wait for the test notification before warning
            that LISTEN hears nothing (None: send none).
        on_control: when given, the listener also LISTENs on the table's control
            channel (`Listening.control_channel`) and calls it with each payload
            there (``cancel <id>`` from `jobs.cancel`).

    Attributes:
        connected: set while the connection is up and LISTENing.
        hears: set once the listener's own test notification arrived.
        pooled: True once the listener found a transaction-mode pooler in the way
            (`core.poolers`): it sent no LISTEN, said so once, stopped; the worker polls.
        reconnects: how many times the connection was lost.
        backend_pid: the server process of the current connection (or None).
    """

    def __init__(
        self,
        engine: Engine,
        listening: Listening,
        queues: Collection[str],
        on_wake: WakeCallback,
        *,
        health_interval: float = 5.0,
        max_backoff: float = 5.0,
        url: URL | None = None,
        probe_timeout: float | None = 5.0,
        on_control: Callable[[str], None] | None = None,
    ) -> None:
        self.engine = engine
        # A pool of our own with the engine's creator, URL, connect_args and pool
        # events (or a listen_url's): every (re)connect opens a fresh connection,
        # never a pooled one that may have died with the server.
        self._own_engine = None if url is None else create_engine(url, poolclass=NullPool)
        self._pool = (self._own_engine or engine).pool.recreate()
        self.probe_timeout = probe_timeout
        self.hears = threading.Event()
        self._probe_deadline: float | None = None
        self._probe_payload = f"{PROBE_PREFIX}{id(self)}-{random.getrandbits(32)}"
        self.listening = listening
        self.channel = listening.queues_channel
        self.control_channel = listening.control_channel
        self.on_control = on_control
        self.queues = frozenset(queues)
        self.on_wake = on_wake
        self.health_interval = health_interval
        self.max_backoff = max_backoff
        # 0.05-0.1 s at first, doubling, at most `max_backoff`; the jitter spreads the
        # reconnects of many workers after a server restart.
        self._reconnect = Backoff(base=0.075, factor=2, cap=0.75 * max_backoff, jitter=1 / 3)
        self.connected = threading.Event()
        self.reconnects = 0
        self.pooled = False
        self.backend_pid: int | None = None
        self._stop = threading.Event()
        self._connection: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="sa_jobqueue-listener", daemon=True)

    def start(self) -> None:
        """Start listening in the background."""
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop listening and close the connection (within about half a second)."""
        self._stop.set()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._close()  # else the thread still uses it; it closes it on its way out
        self._pool.dispose()
        if self._own_engine is not None:
            self._own_engine.dispose()

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg  # the listener's only: a worker on SQLite or MariaDB never loads it

        fairy = self._pool.connect()
        connection = fairy.driver_connection
        if not isinstance(connection, psycopg.Connection):
            fairy.close()
            raise TypeError(
                f"the listener needs a psycopg 3 connection, not {type(connection).__name__}: "
                "use a postgresql+psycopg:// URL, or listen=False (--no-listen)"
            )
        fairy.detach()  # ours alone: never returned to any pool
        try:
            connection.autocommit = True
            connection.execute(f"SET application_name = '{APPLICATION_NAME}'")
            if not self.hears.is_set() and self._transaction_pooled(connection):
                raise _Pooled
            connection.execute(self.listening.listen_sql(self.channel))
            if self.on_control is not None:
                connection.execute(self.listening.listen_sql(self.control_channel))
            self._harden(connection)
        except BaseException:
            with contextlib.suppress(Exception):
                connection.close()
            raise
        self.backend_pid = connection.info.backend_pid
        return connection

    def _transaction_pooled(self, connection: psycopg.Connection[Any]) -> bool:
        """Whether `connection` goes through a transaction-mode pooler (`core.poolers`)."""
        return connection_transaction_pooled(connection, self._detached)

    def _detached(self) -> Any:
        """A fresh connection of the listener's pool, closed by its user, never pooled."""
        fairy = self._pool.connect()
        connection = fairy.driver_connection
        fairy.detach()
        return connection

    def _harden(self, connection: psycopg.Connection[Any]) -> None:
        """Make a probe on a half-open TCP socket fail within seconds instead of hanging."""
        try:
            sock = socket.socket(fileno=connection.fileno())
        except OSError:
            return
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                return  # a Unix socket cannot be half-open
            idle = max(1, int(self.health_interval))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            for name, value in (
                ("TCP_KEEPIDLE", idle),
                ("TCP_KEEPINTVL", idle),
                ("TCP_KEEPCNT", 3),
                # Unacknowledged data (our probe) for this long kills the connection.
                ("TCP_USER_TIMEOUT", 1000 * max(2, 2 * idle)),
            ):
                option = getattr(socket, name, None)
                if option is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.IPPROTO_TCP, option, value)
        finally:
            sock.detach()  # the fd stays psycopg's

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        self.backend_pid = None
        if connection is not None:
            try:
                connection.close()
            except Exception:  # a broken connection may fail to close
                log.debug("closing the listener connection failed", exc_info=True)

    def _run(self) -> None:
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    try:
                        self._connection = self._connect()
                    except _Pooled:
                        self.pooled = True
                        log.warning("listener: its connection %s; %s", POOLER_WARNING, FIX)
                        return
                    if self.reconnects:
                        log.info("listener reconnected to channel %s", self.channel)
                    self.connected.set()
                    failures = 0
                    if self.probe_timeout is not None and not self.hears.is_set():
                        self._send_probe()
                    # Whatever was enqueued while we were deaf is claimable now.
                    self.on_wake(None, None)
                    self._listen(self._connection)
                except Exception as exc:  # noqa: BLE001 - the listener must outlive any DB error
                    self.connected.clear()
                    self._close()
                    if self._stop.is_set():
                        return
                    failures += 1
                    self.reconnects += 1
                    # Jitter: many workers losing one server must not reconnect in step.
                    delay = self._reconnect(failures)
                    log.warning(
                        "listener connection lost (%s); polling meanwhile, reconnecting in %.2fs",
                        exc,
                        delay,
                    )
                    self._stop.wait(delay)
        finally:
            self.connected.clear()
            self._close()

    def _send_probe(self) -> None:
        """NOTIFY our channel from a second connection; `_listen` waits for it."""
        assert self.probe_timeout is not None  # noqa: S101 - the caller checked
        self._probe_deadline = time.monotonic() + self.probe_timeout
        try:
            connection = self._detached()  # closed below
            try:
                with connection.cursor() as cursor:
                    payload = (self.channel, self._probe_payload)
                    cursor.execute(self.listening.notify_sql(), payload)
                connection.commit()
            finally:
                connection.close()
        except Exception as exc:  # noqa: BLE001 - a failed test must not stop the listener
            self._probe_deadline = None
            log.warning("could not send the listener's test notification: %s", exc)

    def _check_probe(self, payload: str | None) -> None:
        if payload == self._probe_payload:
            self.hears.set()
            self._probe_deadline = None
        elif self._probe_deadline is not None and time.monotonic() > self._probe_deadline:
            self._probe_deadline = None  # warn once
            log.warning(
                "LISTEN on channel %s heard nothing of its own test notification within "
                "%.0fs: this connection cannot receive notifications (a transaction-mode "
                "pooler such as PgBouncer in between?), so the worker wakes only by "
                "polling. Give the listener a direct connection (--listen-url URL, "
                "listen_url=...) or poll on purpose (--no-listen, listen=False); "
                "see docs/pgbouncer.md",
                self.channel,
                self.probe_timeout,
            )

    def _listen(self, connection: psycopg.Connection[Any]) -> None:
        heard = time.monotonic()
        while not self._stop.is_set():
            for notify in connection.notifies(timeout=_TICK, stop_after=1):
                heard = time.monotonic()
                if notify.channel == self.control_channel and self.on_control is not None:
                    self.on_control(notify.payload)
                    continue
                if notify.payload.startswith(PROBE_PREFIX):
                    self._check_probe(notify.payload)
                    continue
                queue, run_at = parse_payload(notify.payload)
                if queue in self.queues:
                    self.on_wake(queue, run_at)
            if self._probe_deadline is not None:
                self._check_probe(None)
            if time.monotonic() - heard >= self.health_interval and not self._stop.is_set():
                # Silence: make sure the connection is still alive (a terminated
                # backend or a half-open socket would otherwise go unnoticed).
                connection.execute("SELECT 1")
                heard = time.monotonic()


#: How long a starting worker waits for its listener to LISTEN before it claims.
LISTEN_READY_TIMEOUT = 2.0


def start_notifier(
    engine: Engine,
    listening: Listening | None,
    queues: Collection[str],
    on_wake: WakeCallback,
    *,
    listen: bool,
    url: URL | None = None,
    on_control: Callable[[str], None] | None = None,
) -> Notifier:
    """Start a `Listener` when `listen` and `listening`, else a `PollingNotifier`; return it.

    A cancel sent just after the first claim travels on the control channel: this
    waits (at most `LISTEN_READY_TIMEOUT`) until it is LISTENed to, or only the next
    heartbeat (a third of a lease later) would find the job cancelled.
    """
    if not listen or listening is None:
        polling = PollingNotifier()
        polling.start()
        return polling
    listener = Listener(engine, listening, queues, on_wake, url=url, on_control=on_control)
    listener.start()
    deadline = time.monotonic() + LISTEN_READY_TIMEOUT
    # Not the whole wait when the listener found a pooler and stopped: the worker polls.
    while not listener.pooled and time.monotonic() < deadline:
        if listener.connected.wait(0.05):
            break
    return listener
