"""`PoolWatch`: says once when the engine's pool is smaller than the worker uses.

SQLAlchemy's `QueuePool` keeps `pool_size` connections; those it opens past that
("overflow") are closed when they come back while the pool is full. A worker whose
handlers each hold a connection (transactional mode, durable steps) at a concurrency
above the pool's size then opens and closes a server connection per use: a new
PostgreSQL backend each time. Measured on durable three-step jobs at concurrency 8
(``create_engine(url)``, pool_size 5): 58 to 153 new server sessions per 3,000 jobs
against 11 with ``pool_size=12``, the drain about 5 % slower at the median and 37 % in
its worst run (bench/steps-results.md). Nothing fails, so the maintenance thread looks
and logs it once.
See docs/workers.md#connection-budget.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine
from sqlalchemy.pool import QueuePool

__all__ = ["CONNECTIONS_BESIDE_HANDLERS", "PoolWatch", "pool_size_for"]

log = logging.getLogger("sa_jobqueue.worker")

#: Connections a worker holds beside one per handler thread: the claim loop, the
#: heartbeats and sweeper, the listener and the progress writer (docs/workers.md,
#: "Connection budget").
CONNECTIONS_BESIDE_HANDLERS = 4


def pool_size_for(concurrency: int) -> int:
    """The pool size a worker of `concurrency` handler threads wants: concurrency + 4."""
    return concurrency + CONNECTIONS_BESIDE_HANDLERS


class PoolWatch:
    """Logs one warning when `engine`'s pool, below concurrency + 4, opens past its size.

    Args:
        engine: the worker's engine (its pool may be shared with the application).
        concurrency: the worker's, for the size the warning asks for (concurrency + 4).
    """

    def __init__(self, engine: Engine, concurrency: int) -> None:
        self.engine = engine
        self.wanted = pool_size_for(concurrency)
        self.warned = False

    def check(self) -> bool:
        """Warn if the pool, smaller than concurrency + 4, is past its size now (once).

        Returns:
            True when it warned. A pool of at least concurrency + 4 may open a few
            more on demand (the CLI's does: a lease waited on while a caller's
            transaction holds the row), as docs/workers.md says: no warning.
        """
        if self.warned:
            return False
        pool = self.engine.pool
        # A QueuePool counts its connections past pool_size in overflow() (0 when
        # unbounded); NullPool and SQLite's pools open per use or keep one by design.
        if not isinstance(pool, QueuePool) or pool.size() >= self.wanted or pool.overflow() <= 0:
            return False
        self.warned = True
        log.warning(
            "the engine's pool keeps %d connections but %d are open now: each one past %d"
            " is opened and closed per use (a new database session each time); give the"
            " worker's engine create_engine(..., pool_size=%d), concurrency + 4"
            " (docs/workers.md#connection-budget)",
            pool.size(),
            pool.size() + pool.overflow(),
            pool.size(),
            self.wanted,
        )
        return True
