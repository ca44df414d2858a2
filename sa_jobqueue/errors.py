"""The exception tree. The two signals a handler may raise are in `sa_jobqueue.context`."""

from __future__ import annotations

__all__ = [
    "BatchClosedError",
    "ConfigurationError",
    "JobQueueError",
    "PayloadError",
    "ValidationError",
]


class JobQueueError(Exception):
    """Something went wrong in sa-jobqueue."""

    __module__ = "sa_jobqueue"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(JobQueueError):
    """A model, task or command-line setting is invalid."""

    __module__ = "sa_jobqueue"


class ValidationError(JobQueueError, ValueError):
    """An argument given to the queue is invalid.

    Attributes:
        field: the argument's name (``"kind"``, ``"payload"``, ``"priority"``...).
        value: the rejected value, as given.
    """

    __module__ = "sa_jobqueue"

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{field}={shown}: {problem}")


class PayloadError(ValidationError):
    """A payload cannot be stored as JSON (raised before anything is written).

    Attributes:
        path: where in the payload the problem is, e.g. ``payload["items"][2]``.
    """

    __module__ = "sa_jobqueue"

    def __init__(self, path: str, value: object, problem: str) -> None:
        self.path = path
        super().__init__(path, value, problem)
        self.field = "payload"


class BatchClosedError(JobQueueError):
    """A job was added to a batch after the transaction that made it had ended.

    Jobs join a batch (``jobs.batch``) only in that transaction; its callback may
    already have run. Start a new batch instead.
    """

    __module__ = "sa_jobqueue"
