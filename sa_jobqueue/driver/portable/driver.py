"""`PortableDriver`: the `Driver` protocol in portable statements, one mixin per family."""

from __future__ import annotations

from sa_jobqueue.driver.portable.claims import PortableClaims
from sa_jobqueue.driver.portable.completion import PortableLifecycle
from sa_jobqueue.driver.portable.control import PortableControl
from sa_jobqueue.driver.portable.deadlines import PortableDeadlines
from sa_jobqueue.driver.portable.enqueue import PortableEnqueue
from sa_jobqueue.driver.portable.schedules import PortableSchedules
from sa_jobqueue.driver.portable.steps import PortableSteps
from sa_jobqueue.driver.protocol.notifications import Listening

__all__ = ["PortableDriver"]


class PortableDriver(
    PortableClaims,
    PortableLifecycle,
    PortableEnqueue,
    PortableSteps,
    PortableSchedules,
    PortableControl,
    PortableDeadlines,
):
    """`Driver` for a database without PostgreSQL's SQL; a subclass gives its `Dialect`.

    Each call runs on the caller's connection and never commits. Without LISTEN/NOTIFY,
    `listening` is None: workers poll, and wake at once for jobs their own process
    enqueued (docs/databases.md).
    """

    listening: Listening | None = None
    supports_listen_notify = False
    supports_asynchronous_commit = False
    supports_writing_ctes = False
    supports_statement_timeout = False
    supports_row_estimates = False
