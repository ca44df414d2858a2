"""The SQLite driver: `SqliteDriver` (docs/databases.md)."""

from __future__ import annotations

from sa_jobqueue.driver.sqlite.driver import SqliteDriver

__all__ = ["SqliteDriver"]
