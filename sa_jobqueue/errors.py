"""The exception tree. What a handler raises on purpose is in `sa_jobqueue.handler_exceptions`."""

from __future__ import annotations

__all__ = [
    "BatchClosedError",
    "ChildJobError",
    "ConfigurationError",
    "JobNotFoundError",
    "JobQueueError",
    "PayloadError",
    "ValidationError",
    "WaitTimeoutError",
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


class JobNotFoundError(JobQueueError, LookupError):
    """No job has this id (never committed, or deleted since: pruned, ``delete_finished``).

    Raised by `jobs.wait` when the row is not there when it starts waiting, or is
    gone when it reads the row again.

    Attributes:
        job_id: the id asked for.
    """

    __module__ = "sa_jobqueue"

    def __init__(self, job_id: int, message: str | None = None) -> None:
        self.job_id = job_id
        super().__init__(message or f"no job {job_id} in the table")


class WaitTimeoutError(JobQueueError, TimeoutError):
    """`jobs.wait` gave up: the job had not ended when its timeout passed.

    The job is not changed (it may still end later; wait again, or cancel it).

    Attributes:
        job_id: the job waited for.
        timeout: the timeout given, in seconds.
        status: the job's status when it was last read (``pending``, ``running``,
            ``waiting``).
    """

    __module__ = "sa_jobqueue"

    def __init__(self, job_id: int, timeout: float, status: str) -> None:
        self.job_id = job_id
        self.timeout = timeout
        self.status = status
        super().__init__(f"job {job_id} had not ended after {timeout:g}s (it is {status})")


class ChildJobError(JobQueueError):
    """A job that ``ctx.wait_for_job`` waited for ended ``failed`` or ``cancelled``.

    Raised in the waiting handler, which decides what follows: let it fail the
    attempt, or catch it and go on. How the job ended is recorded with the waiting
    job's steps, so every later run of its handler gets the same error.

    Attributes:
        job_id: the job waited for.
        status: how it ended (``failed`` or ``cancelled``).
        error: its ``last_error`` (None: it has none).
    """

    __module__ = "sa_jobqueue"

    def __init__(self, job_id: int, status: str, error: str | None) -> None:
        self.job_id = job_id
        self.status = status
        self.error = error
        why = f": {error}" if error else ""
        super().__init__(f"job {job_id} ended {status}{why}")
