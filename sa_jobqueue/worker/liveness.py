"""A worker's liveness file: locked (``flock``) by its process for as long as it runs.

The kernel releases a ``flock`` when its process ends, however it ends (kill -9
included), so a lock another process can take is one whose holder is dead. A worker
takes its file at start (`LivenessFiles.hold`) and deletes it at a clean stop; a kill
leaves the file there, unlocked. Another worker that reads a row of its own host in the
registry looks at that worker's file (`LivenessFiles.probe`):

- the file is locked: the worker is alive, whatever its pid looks like from here;
- it exists and is not locked: the worker is dead, now, with no grace to wait;
- there is no such file: nothing is known (a worker in another container sharing the
  host's name and network has its files in its own ``/tmp``); the caller falls back
  on the pid and the heartbeat's age (`Registration.dead_here`).

A file's name is a digest of the database (its URL without the password), the jobs
table and the worker's id, in a directory of this user's under the system's temporary
directory (`liveness_directory`). Off POSIX (no ``fcntl``) nothing is held and every
probe knows nothing. See docs/workers-registry.md.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Held", "LivenessFiles", "Probe", "liveness_directory"]

#: Seconds `LivenessFiles.hold` waits for its file while another worker holds it (one
#: recovering a dead predecessor of the same id, for the length of a transaction).
HOLD_WAIT = 10.0

#: Seconds after which a dead worker's file nobody recovered (its row gone from the
#: registry) is deleted by the next worker that starts here (`LivenessFiles.hold`).
STALE_AFTER = 86_400.0


class Probe(enum.Enum):
    """What a worker's liveness file says of it."""

    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"


def liveness_directory() -> Path:
    """This user's directory of liveness files: ``<tmp>/sa-jobqueue-<uid>``."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"sa-jobqueue-{uid}"


class Held:
    """A liveness file this process holds locked; `release` unlocks and deletes it.

    Attributes:
        path: the file.
        found: whether the file was there before this process took it (a worker of
            that name ran here and did not stop cleanly).
    """

    def __init__(self, path: Path, fd: int, *, found: bool) -> None:
        self.path = path
        self.found = found
        self._fd: int | None = fd

    def release(self) -> None:
        """Delete the file, then unlock it (once; later calls do nothing)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
        self.unlock()

    def unlock(self) -> None:
        """Unlock the file and leave it there (once; later calls do nothing)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor releases the flock


class LivenessFiles:
    """The liveness files of the workers of one database and jobs table.

    Args:
        identity: the database and table, as text (`for_database` makes it).
        directory: where the files are (default: `liveness_directory`).
    """

    def __init__(self, identity: str, directory: Path | None = None) -> None:
        self.identity = identity
        self.directory = directory or liveness_directory()

    @classmethod
    def for_database(cls, url: object, table: str) -> LivenessFiles:
        """The files of the workers of the database at `url` (its password hidden) and `table`."""
        render = getattr(url, "render_as_string", None)
        text = render(hide_password=True) if callable(render) else str(url)
        database = getattr(url, "database", None)
        if str(getattr(url, "drivername", "")).startswith("sqlite") and database:
            # A relative file names another database in another directory.
            text += f"\n{os.path.abspath(database)}"
        return cls(f"{text}\n{table}")

    def path(self, worker_id: str) -> Path:
        """The liveness file of `worker_id`."""
        digest = hashlib.sha256(f"{self.identity}\n{worker_id}".encode()).hexdigest()[:32]
        return self.directory / f"{digest}.lock"

    def hold(self, worker_id: str) -> Held | None:
        """Take `worker_id`'s file for this process, waiting up to `HOLD_WAIT` s for it.

        None when it cannot be held (no ``fcntl``, no writable directory, another live
        process of this id holding it): the worker runs as before, recovered by its pid
        and heartbeat only.
        """
        if fcntl is None:
            return None
        deadline = time.monotonic() + HOLD_WAIT
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._private():
                return None
            self._collect()
            while True:
                path = self.path(worker_id)
                found = path.exists()
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                if _locked(fd) and _same_file(fd, path):
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()} {worker_id}\n".encode())
                    return Held(path, fd, found=found)
                os.close(fd)  # held by another, or deleted under us: again
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.05)
        except OSError:
            return None

    def _private(self) -> bool:
        """Whether the directory is this user's and nobody else's to write in.

        Another user able to plant an unlocked file there could make a live worker
        look dead: then the files say nothing.
        """
        try:
            status = self.directory.stat()
        except OSError:
            return False
        owner = os.getuid() if hasattr(os, "getuid") else status.st_uid
        return status.st_uid == owner and not status.st_mode & 0o022

    def _collect(self) -> None:
        """Delete the unlocked files not touched for `STALE_AFTER` seconds (dead workers')."""
        before = time.time() - STALE_AFTER
        for path in self.directory.glob("*.lock"):
            try:
                if path.stat().st_mtime >= before:
                    continue
                fd = os.open(path, os.O_RDWR)
            except OSError:
                continue
            try:
                if _locked(fd) and _same_file(fd, path):
                    path.unlink()
            except OSError:
                pass
            finally:
                os.close(fd)

    def probe(self, worker_id: str) -> tuple[Probe, Held | None]:
        """What `worker_id`'s file says, and (when `Probe.DEAD`) the file, now held here.

        The caller recovers the dead worker's jobs while holding its file, then calls
        `Held.release`: a new process of the same id waits for the file meanwhile
        (`hold`), so it claims nothing that the recovery would end.
        """
        if fcntl is None or not self._private():
            return Probe.UNKNOWN, None
        path = self.path(worker_id)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return Probe.UNKNOWN, None
        try:
            free = _locked(fd)
        except OSError:
            os.close(fd)
            return Probe.UNKNOWN, None
        if not free:
            os.close(fd)
            return Probe.ALIVE, None
        if not _same_file(fd, path):  # deleted since: its worker stopped or was recovered
            os.close(fd)
            return Probe.UNKNOWN, None
        return Probe.DEAD, Held(path, fd, found=True)


def _locked(fd: int) -> bool:
    """Take an exclusive ``flock`` on `fd` without waiting; whether it was taken."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd` (not deleted nor replaced)."""
    try:
        ours, named = os.fstat(fd), os.stat(path)
        return (ours.st_dev, ours.st_ino) == (named.st_dev, named.st_ino)
    except OSError:
        return False
