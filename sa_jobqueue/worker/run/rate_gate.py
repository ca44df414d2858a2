"""Before a rate-limited handler starts: move its claim's stamp to now, or do not start it.

A rate limit counts attempt starts (docs/flow-control.md). The claim logs each job's
stamp as it leases it, but the handler may start later: after the jobs before it in
a savepoint batch, on a loaded machine, in a worker that was stopped. Started late,
the stamps no longer say when the handlers started, and the starts of one window
bunch. So the start itself is checked: under the kind's lock, the stamps of the
window that ends now are counted without this job's own; when they leave room, its
stamp moves to now and the handler starts; when they do not, its stamp is dropped
and the job goes back to ``pending`` (a fenced release, no attempt used) for a
later claim. The starts log then holds every start at the time it started.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine, exc

from sa_jobqueue.driver import Driver
from sa_jobqueue.worker.attempt import Claimed

__all__ = ["RateGate"]

log = logging.getLogger("sa_jobqueue.worker")


class RateGate:
    """Decides whether a rate-limited job may start now (one short transaction).

    Args:
        engine: where its transaction gets a connection.
        driver: runs `Driver.job_start_rated`.
    """

    def __init__(self, engine: Engine, driver: Driver) -> None:
        self.engine = engine
        self.driver = driver

    @staticmethod
    def applies(job: Claimed) -> bool:
        """Whether `job` was claimed under a rate limit (its claim wrote a stamp)."""
        return job.rate_stamp is not None

    def check(self, job: Claimed) -> bool | None:
        """True: start it now; False: its window is full; None: the database did not answer."""
        try:
            with self.engine.connect() as conn, conn.begin():
                return self.driver.job_start_rated(conn, job)
        except exc.SQLAlchemyError as error:
            log.warning(
                "logging the start of rate-limited job %d failed (%s); giving it back",
                job.id,
                error,
            )
            return None
