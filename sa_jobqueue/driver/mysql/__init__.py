"""The MariaDB and MySQL drivers: `MysqlDriver`, `MariadbDriver` (docs/databases.md)."""

from __future__ import annotations

from sa_jobqueue.driver.mysql.driver import MariadbDriver, MysqlDriver

__all__ = ["MariadbDriver", "MysqlDriver"]
