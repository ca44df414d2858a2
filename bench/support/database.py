"""The database a scenario measures, its scratch databases, and what the reports say of it."""

from __future__ import annotations

import contextlib
import os
import platform
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The server settings a report lists beside its figures (PostgreSQL).
SETTINGS = (
    "server_version",
    "max_connections",
    "shared_buffers",
    "work_mem",
    "synchronous_commit",
    "fsync",
    "wal_level",
    "max_wal_size",
    "checkpoint_timeout",
    "autovacuum",
    "jit",
)


@dataclass(frozen=True)
class Database:
    """A database server a scenario runs on: its dialect's name and a URL to reach it.

    `url` is the server's URL (``postgresql+psycopg://postgres@host/postgres``); a
    scenario makes its own scratch databases there (`scratch`) and drops them after.
    Scenarios that start a server of their own get an empty `url`.
    """

    name: str
    url: str

    @classmethod
    def from_url(cls, url: str) -> Database:
        """The database at `url`, named after its dialect (``postgresql``, ``sqlite``...)."""
        return cls(url.split(":", 1)[0].split("+", 1)[0], url)


@contextlib.contextmanager
def scratch(
    server_url: str, prefix: str = "sa_jobqueue_bench", *, migrate: bool = True
) -> Iterator[str]:
    """A scratch database on `server_url`, migrated (unless not `migrate`), dropped after."""
    from sa_jobqueue import migration
    from sa_jobqueue.testing import scratch_database

    with scratch_database(server_url, prefix=prefix) as url:
        if migrate:
            migration.upgrade(url)
        yield url


@contextlib.contextmanager
def scratch_sqlite(directory: Path, prefix: str = "sa_jobqueue_bench") -> Iterator[str]:
    """A scratch SQLite file in `directory` (WAL) with the bench's tables; removed after.

    The tables come from `create_all` of the benchmark's model (`bench.support.app`), as
    an application on SQLite makes them.
    """
    from sqlalchemy import create_engine

    from bench.support.app import Base

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{prefix}_{uuid.uuid4().hex[:12]}.db"
    url = f"sqlite:///{path}"
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")  # kept in the file
        Base.metadata.create_all(engine)
    finally:
        engine.dispose()
    try:
        yield url
    finally:
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            leftover.unlink(missing_ok=True)


@contextlib.contextmanager
def scratch_mysql(server_url: str, prefix: str = "sa_jobqueue_bench") -> Iterator[str]:
    """A scratch database on a MariaDB/MySQL server with the bench's tables; dropped after."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    from bench.support.app import Base

    server = make_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server.set(database=""), poolclass=NullPool)
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4"))
        url = server.set(database=name).render_as_string(hide_password=False)
        try:
            engine = create_engine(url, poolclass=NullPool)
            Base.metadata.create_all(engine)
            engine.dispose()
            yield url
        finally:
            with admin.begin() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    finally:
        admin.dispose()


def literal_sql(statement: Any) -> str:
    """`statement` as PostgreSQL text with its parameters written in (for ``EXPLAIN``)."""
    from sqlalchemy.dialects import postgresql

    compiled = statement.compile(
        dialect=postgresql.psycopg.dialect(), compile_kwargs={"literal_binds": True}
    )
    return str(compiled)


def machine() -> dict[str, str]:
    """The machine a run measured on: CPU, memory, load, OS and versions."""
    import psycopg
    import sqlalchemy

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError), open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "cpu": f"{cpu} x {os.cpu_count()}",
        "memory": memory,
        "load average at start": load,
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlalchemy / psycopg": f"{sqlalchemy.__version__} / {psycopg.__version__}",
    }


def pg_settings(url: str) -> dict[str, str]:
    """The server's `SETTINGS`, as ``pg_settings`` shows them."""
    import psycopg

    from bench.support import raw

    with psycopg.connect(raw.dsn(url)) as conn:
        rows = conn.execute(
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", (list(SETTINGS),)
        ).fetchall()
    found = {name: f"{setting}{' x ' + unit if unit else ''}" for name, setting, unit in rows}
    return {name: found[name] for name in SETTINGS if name in found}


@contextlib.contextmanager
def autovacuum_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster with autovacuum on, as production runs; its URL.

    The machine's own server runs with ``autovacuum = off``; the archive's retention and
    the soak measure on this one instead (`sa_jobqueue.testing.local_cluster`: the
    machine's binaries, a temporary directory and a free port, removed after), with
    ``fsync`` on as in production (``local_cluster`` turns it off by default).
    """
    from sa_jobqueue.testing import local_cluster

    with local_cluster(autovacuum="on", fsync="on") as cluster:
        yield cluster.url
