"""sa-jobqueue: a durable PostgreSQL job queue for SQLAlchemy 2.x applications.

Example:
    >>> from sa_jobqueue import JobMixin, JobQueue       # doctest: +SKIP
    >>> class Job(JobMixin, Base):                      # doctest: +SKIP
    ...     __tablename__ = "jobs"
    >>> jobs = JobQueue(Job)                            # doctest: +SKIP
"""

from __future__ import annotations

from sa_jobqueue.context import Discard, JobContext, Retry
from sa_jobqueue.errors import (
    ConfigurationError,
    JobQueueError,
    PayloadError,
    ValidationError,
)
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.model import JobMixin, Status

__all__ = [
    "ConfigurationError",
    "Discard",
    "JobContext",
    "JobMixin",
    "JobQueue",
    "JobQueueError",
    "PayloadError",
    "Retry",
    "Status",
    "ValidationError",
]

__version__ = "0.1.0"
