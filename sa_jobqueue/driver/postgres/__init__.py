"""The PostgreSQL driver (`PostgresDriver`) and the statements it runs.

See docs/architecture.md.
"""

from __future__ import annotations

from sa_jobqueue.driver.postgres.driver import PostgresDriver

__all__ = ["PostgresDriver"]
