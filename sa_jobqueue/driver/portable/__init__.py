"""The driver protocol in portable statements, for databases without PostgreSQL's SQL.

SQLite and MariaDB/MySQL have no data-modifying CTEs, no arrays and (MySQL) no
``UPDATE ... RETURNING``, so each operation here is a few plain statements in the
caller's transaction, written once for both; what differs between them is a
`Dialect` (`dialect`): the clock, date arithmetic, row locks, ``RETURNING``.
`PortableDriver` joins one mixin per family of the protocol. The SQLite and MySQL
drivers (`sa_jobqueue.driver.sqlite`, `sa_jobqueue.driver.mysql`) are it with their
`Dialect` and capabilities. See docs/databases.md.
"""

from __future__ import annotations

from sa_jobqueue.driver.portable.driver import PortableDriver
from sa_jobqueue.driver.portable.sql import Dialect

__all__ = ["Dialect", "PortableDriver"]
