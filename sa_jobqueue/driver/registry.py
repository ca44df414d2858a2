"""The one place that picks a driver: by the dialect name of the engine or connection.

`driver_for` looks the dialect up in `DRIVERS` (``postgresql``, ``sqlite``, ``mariadb``
and ``mysql``) and builds that driver for the jobs model. An
unknown dialect is a `ConfigurationError` naming those supported; `check_worker_engine`
asks the driver whether a worker can run on an engine, and `worker_driver` builds a
worker's driver and the engine it runs on. See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine import Connection, Dialect, Engine

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.base import Driver
from sa_jobqueue.driver.mysql import engines as mysql_engines
from sa_jobqueue.driver.mysql.driver import MariadbDriver, MysqlDriver
from sa_jobqueue.driver.mysql.idle_bound import bound_idle_transactions
from sa_jobqueue.driver.postgres.driver import PostgresDriver
from sa_jobqueue.driver.sqlite import engines as sqlite_engines
from sa_jobqueue.driver.sqlite.driver import SqliteDriver
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import JobMixin

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "DEFAULT_LEASE",
    "DRIVERS",
    "DriverFactory",
    "check_worker_engine",
    "dialect_name",
    "driver_for",
    "queue_connection",
    "worker_async_engine",
    "worker_driver",
    "worker_engine",
]

#: The lease, in seconds, of kinds a driver was given no lease for.
DEFAULT_LEASE = 300.0


class DriverFactory(Protocol):
    """How a driver is built: the jobs model, and what its claims need to know."""

    def __call__(
        self,
        model: type[JobMixin],
        *,
        leases: Mapping[str, float],
        default_lease: float,
        limits: Mapping[str, Limits] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> Driver:
        """A driver for `model`.

        Args:
            model: the jobs model.
            leases: kind -> lease in seconds, written into each claim.
            default_lease: the lease of kinds not in `leases`.
            limits: kind -> its `Limits`, for the limited kinds: `job_claim` leaves
                them out, `job_claim_limited` claims them (docs/flow-control.md).
            kinds: the only kinds `job_claim` and `job_claim_queues` claim (None: any).
        """
        ...


#: Dialect name (``engine.dialect.name``) -> the driver for it.
DRIVERS: dict[str, DriverFactory] = {
    "mariadb": MariadbDriver,
    "mysql": MysqlDriver,
    "postgresql": PostgresDriver,
    "sqlite": SqliteDriver,
}

#: Dialect name -> (its check of a worker's engine, the engine a worker runs on), for
#: the databases whose workers need more than the engine as given.
_WORKER_ENGINES: dict[str, tuple[Callable[[Engine], None], Callable[[Engine], Engine]]] = {
    "sqlite": (sqlite_engines.check_worker_engine, sqlite_engines.worker_engine),
    "mariadb": (mysql_engines.check_worker_engine, mysql_engines.worker_engine),
    "mysql": (mysql_engines.check_worker_engine, mysql_engines.worker_engine),
}

#: Dialect name -> the engine of reads that must agree (`snapshot_engine`).
_SNAPSHOT_ENGINES: dict[str, Callable[[Engine], Engine]] = {
    "postgresql": lambda engine: engine.execution_options(
        postgresql_readonly=True, isolation_level="REPEATABLE READ"
    ),
    "sqlite": sqlite_engines.snapshot_engine,
    "mariadb": mysql_engines.snapshot_engine,
    "mysql": mysql_engines.snapshot_engine,
}

#: Dialect name -> what a connection a worker keeps for its own transactions needs.
_QUEUE_CONNECTIONS: dict[str, Callable[[Connection], None]] = {
    "mariadb": bound_idle_transactions,
    "mysql": bound_idle_transactions,
}

# Drivers made with the default options, by dialect and model: building one builds every
# statement it runs (a quarter of a second), and an operator's call (``cancel``) needs
# one each time. Drivers keep no state between calls, so one serves every caller.
_SHARED: dict[tuple[str, type[JobMixin]], Driver] = {}


def dialect_name(bind: Any) -> str:
    """The dialect name of `bind`: an Engine, AsyncEngine, Connection, Session, Dialect or name."""
    if isinstance(bind, str):
        return bind
    if isinstance(bind, Dialect):
        return str(bind.name)
    get_bind = getattr(bind, "get_bind", None)
    if callable(get_bind):  # a Session
        bind = get_bind()
    dialect = getattr(bind, "dialect", None)
    if dialect is None:
        raise ConfigurationError(f"no database dialect to choose a driver from in {bind!r}")
    return str(dialect.name)


def driver_for(
    bind: Any,
    model: type[JobMixin],
    *,
    leases: Mapping[str, float] | None = None,
    default_lease: float = DEFAULT_LEASE,
    limits: Mapping[str, Limits] | None = None,
    kinds: Sequence[str] | None = None,
) -> Driver:
    """The driver of `bind`'s database for `model`.

    Args:
        bind: an Engine, AsyncEngine, Connection, Session or Dialect, or a dialect name.
        model: the jobs model.
        leases: kind -> lease in seconds, written into each claim.
        default_lease: the lease of kinds not in `leases`.
        limits: kind -> its `Limits`: the limited kinds are claimed by
            `Driver.job_claim_limited` only.
        kinds: the only kinds `Driver.job_claim` claims (None: any kind).

    With the default options, the driver is made once per dialect and model, and shared.

    Raises:
        ConfigurationError: no driver for that dialect (the message names those there are).
    """
    name = dialect_name(bind)
    factory = DRIVERS.get(name)
    if factory is None:
        supported = ", ".join(sorted(DRIVERS))
        raise ConfigurationError(
            f"sa-jobqueue has no driver for the {name!r} dialect; supported: {supported}"
        )
    shared = not leases and default_lease == DEFAULT_LEASE and not limits and kinds is None
    if shared and (name, model) in _SHARED:
        return _SHARED[name, model]
    made = factory(
        model, leases=leases or {}, default_lease=default_lease, limits=limits, kinds=kinds
    )
    if shared:
        _SHARED[name, model] = made
    return made


def check_worker_engine(engine: Any, driver: Driver) -> None:
    """Refuse an engine a worker cannot run on, in one line naming what to use instead.

    `driver` is the one `driver_for` chose for `engine`. With LISTEN, its DBAPI must
    be one the driver's listening can use (psycopg 3 for PostgreSQL); a driver
    without LISTEN (`Driver.supports_listen_notify`) takes any DBAPI its dialect has.
    SQLite needs a database file (not ``sqlite://`` in memory). Anything but a
    synchronous `Engine` is left to the caller to judge.

    Raises:
        ConfigurationError: in one line, naming the URL to use.
    """
    if not isinstance(engine, Engine):
        return
    if driver.listening is not None:
        driver.listening.check_dialect(engine.dialect)
    prepared = _WORKER_ENGINES.get(dialect_name(engine))
    if prepared is not None:
        prepared[0](engine)


def worker_driver(
    engine: Engine,
    model: type[JobMixin],
    *,
    leases: Mapping[str, float],
    default_lease: float,
    limits: Mapping[str, Limits],
    kinds: Sequence[str],
) -> tuple[Driver, Engine]:
    """A worker's driver (`driver_for`), and the engine it runs on (`worker_engine`).

    The engine is checked first (`check_worker_engine`: its listening's DBAPI, a
    SQLite file). The arguments are `driver_for`'s.

    Raises:
        ConfigurationError: no driver for the dialect, or an engine a worker cannot use.
    """
    driver = driver_for(
        engine, model, leases=leases, default_lease=default_lease, limits=limits, kinds=kinds
    )
    check_worker_engine(engine, driver)
    return driver, worker_engine(engine)


def worker_engine(engine: Engine) -> Engine:
    """The engine a worker runs its own transactions on: `engine`, or a copy set up for it.

    On SQLite, a copy sharing `engine`'s pool whose transactions begin with ``BEGIN
    IMMEDIATE`` and wait up to 30 s for the write lock, on a file in WAL mode
    (`sqlite.engines.worker_engine`); on MariaDB and MySQL a copy whose transactions
    are READ COMMITTED (`mysql.engines.worker_engine`); on PostgreSQL, `engine` itself.
    """
    prepared = _WORKER_ENGINES.get(dialect_name(engine))
    return engine if prepared is None else prepared[1](engine)


def snapshot_engine(engine: Engine) -> Engine:
    """A copy of `engine` (its pool shared) whose transactions each read one snapshot.

    For a page or a report that reads the jobs in several statements (the dashboard's):
    a job that ends between two of them is then seen as it was at the first, not counted
    both ``running`` and ``done``. PostgreSQL: REPEATABLE READ, READ ONLY; MariaDB and
    MySQL: REPEATABLE READ; SQLite: a deferred ``BEGIN`` before the first read
    (`sqlite.engines.snapshot_engine`). Elsewhere `engine` as it is.
    """
    make = _SNAPSHOT_ENGINES.get(dialect_name(engine))
    return engine if make is None else make(engine)


def queue_connection(conn: Connection) -> Connection:
    """`conn`, set up as a connection a worker keeps for its own short transactions.

    The claim loop's and the heartbeats' connections. On MariaDB the server ends its
    session when a transaction of it sits idle 10 s (a worker frozen inside one), so
    the rows and locks it held come back to the other workers
    (`mysql.idle_bound.bound_idle_transactions`); the setting is undone when `conn`
    goes back to the pool. Elsewhere `conn` as it is.
    """
    prepare = _QUEUE_CONNECTIONS.get(conn.dialect.name)
    if prepare is not None:
        try:
            prepare(conn)
        except BaseException:
            conn.close()
            raise
    return conn


def worker_async_engine(engine: AsyncEngine) -> AsyncEngine:
    """`worker_engine` for the `AsyncEngine` of a worker's async transactional handlers.

    On SQLite (aiosqlite) its transactions begin with ``BEGIN IMMEDIATE`` as well; on
    MariaDB and MySQL they are READ COMMITTED.
    """
    from sqlalchemy.ext.asyncio import AsyncEngine

    prepared = _WORKER_ENGINES.get(dialect_name(engine))
    return engine if prepared is None else AsyncEngine(prepared[1](engine.sync_engine))
