"""A real PgBouncer in front of the test PostgreSQL, for the pooler tests.

`running_pgbouncer(database_url)` starts Debian's ``pgbouncer`` on a free port with
a config and auth file of its own in a temporary directory, and yields a
`PgBouncer` whose `url(mode)` reaches the same database through it in
``transaction`` or ``session`` pooling. As root it runs as the ``postgres`` user
(PgBouncer refuses root). It is stopped (and its directory removed) afterwards.

`.ci/run` installs ``pgbouncer`` when it is missing. Without it, the tests that
need one fail and say how to install it: they never skip.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import URL, make_url

HOW_TO = (
    "PgBouncer is not installed: the pooler tests need it "
    "(Debian/Ubuntu: apt-get update && apt-get install -y pgbouncer; .ci/run does this)"
)

MODES = ("transaction", "session")


class NoPgBouncerError(RuntimeError):
    """PgBouncer is missing or would not start."""


def _binary() -> str:
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )
    if found is None:
        raise NoPgBouncerError(HOW_TO)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgBouncer:
    """A running PgBouncer: where it listens and how to reach the database through it."""

    port: int
    target: URL
    log_path: Path

    def url(self, mode: str, *, prepare_threshold: str | None = None) -> str:
        """A URL of the test database through this PgBouncer in `mode` pooling."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        url = self.target.set(host="127.0.0.1", port=self.port, database=mode)
        if prepare_threshold is not None:
            url = url.update_query_dict({"prepare_threshold": prepare_threshold})
        return url.render_as_string(hide_password=False)

    def log(self) -> str:
        """What PgBouncer logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _config(directory: Path, target: URL, port: int, pool_size: int) -> Path:
    server = (
        f"host={target.host or '127.0.0.1'} port={target.port or 5432} dbname={target.database}"
    )
    user = target.username or "postgres"
    server += f" user={user}"
    if target.password:
        server += f" password={target.password}"
    (directory / "users.txt").write_text(f'"{user}" "{target.password or ""}"\n')
    ini = directory / "pgbouncer.ini"
    ini.write_text(
        "\n".join(
            [
                "[databases]",
                *(f"{mode} = {server} pool_mode={mode}" for mode in MODES),
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {directory / 'users.txt'}",
                f"logfile = {directory / 'pgbouncer.log'}",
                f"pidfile = {directory / 'pgbouncer.pid'}",
                "pool_mode = transaction",
                "max_client_conn = 500",
                f"default_pool_size = {pool_size}",
                "ignore_startup_parameters = extra_float_digits,options",
                "",
            ]
        )
    )
    return ini


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise NoPgBouncerError(f"pgbouncer exited with {process.returncode}: {text[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise NoPgBouncerError(f"pgbouncer did not listen on port {port} within 20s")


@contextlib.contextmanager
def running_pgbouncer(database_url: str, *, pool_size: int = 20) -> Iterator[PgBouncer]:
    """Start PgBouncer in front of `database_url`'s server and database; stop it after.

    `pool_size`: the server connections per pool (PgBouncer's ``default_pool_size``).
    """
    binary = _binary()
    target = make_url(database_url)
    directory = Path(tempfile.mkdtemp(prefix="sa_jobqueue_pgbouncer_"))
    command = [binary, str(directory / "pgbouncer.ini")]
    try:
        port = _free_port()
        _config(directory, target, port, pool_size)
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root.
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                raise NoPgBouncerError(
                    "PgBouncer refuses to run as root, and there is no 'postgres' user to "
                    "run it as (useradd --system postgres)"
                ) from None
            os.chown(directory, account.pw_uid, account.pw_gid)
            for path in directory.iterdir():
                os.chown(path, account.pw_uid, account.pw_gid)
            command = ["runuser", "-u", "postgres", "--", *command]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            log = directory / "pgbouncer.log"
            _wait_until_listening(port, process, log)
            yield PgBouncer(port=port, target=target, log_path=log)
        finally:
            if process.poll() is None:
                # runuser passes SIGTERM on to pgbouncer, which then exits.
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
