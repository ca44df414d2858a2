"""The MariaDB and MySQL driver: `MysqlDriver` (docs/databases.md)."""

from __future__ import annotations

from sa_jobqueue.driver.mysql.driver import MysqlDriver

__all__ = ["MysqlDriver"]
