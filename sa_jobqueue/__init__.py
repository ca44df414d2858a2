"""sa-jobqueue: a durable PostgreSQL job queue for SQLAlchemy 2.x applications.

Example:
    >>> from sa_jobqueue import JobMixin, JobQueue       # doctest: +SKIP
    >>> class Job(JobMixin, Base):                      # doctest: +SKIP
    ...     __tablename__ = "jobs"
    >>> jobs = JobQueue(Job)                            # doctest: +SKIP

Importing the package loads only the exception tree; every other public name is imported
at its first use (PEP 562). See docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sa_jobqueue.errors import (
    BatchClosedError,
    ChildJobError,
    ConfigurationError,
    JobNotFoundError,
    JobQueueError,
    PayloadError,
    ValidationError,
    WaitTimeoutError,
)

if TYPE_CHECKING:
    from sa_jobqueue.context import JobContext
    from sa_jobqueue.core.step_options import Step
    from sa_jobqueue.enqueue.batch import Batch
    from sa_jobqueue.handler_exceptions import Discard, Retry
    from sa_jobqueue.jobqueue import JobQueue
    from sa_jobqueue.schema.model import JobMixin, Status

__all__ = [
    "Batch",
    "BatchClosedError",
    "ChildJobError",
    "ConfigurationError",
    "Discard",
    "JobContext",
    "JobMixin",
    "JobNotFoundError",
    "JobQueue",
    "JobQueueError",
    "PayloadError",
    "Retry",
    "Status",
    "Step",
    "ValidationError",
    "WaitTimeoutError",
]

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported at the name's first use.
_LAZY = {
    "Batch": "sa_jobqueue.enqueue.batch",
    "Discard": "sa_jobqueue.handler_exceptions",
    "JobContext": "sa_jobqueue.context",
    "Retry": "sa_jobqueue.handler_exceptions",
    "JobQueue": "sa_jobqueue.jobqueue",
    "JobMixin": "sa_jobqueue.schema.model",
    "Status": "sa_jobqueue.schema.model",
    "Step": "sa_jobqueue.core.step_options",
}


if not TYPE_CHECKING:  # mypy sees the imports above, and so still flags a misspelt name

    def __getattr__(name: str) -> Any:
        """Import a public name's module at the name's first use, and keep the name."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'sa_jobqueue' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})
