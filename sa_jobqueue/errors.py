"""The exception tree, and the two signals a handler may raise."""

from __future__ import annotations

from datetime import timedelta

__all__ = [
    "ConfigurationError",
    "Discard",
    "JobQueueError",
    "PayloadError",
    "Retry",
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


class Retry(Exception):
    """Raised by a handler: run this job again after `delay`, not a failure of its logic.

    The job goes back to ``pending`` with ``run_at = now() + delay``. Like Oban's snooze,
    it does not use up the failure budget: ``attempts`` still counts the claim, and
    ``max_attempts`` grows by one with it. ``last_error`` keeps the reason, if any.

    Args:
        delay: how long to wait, as a ``timedelta`` or seconds (default: 0, due at once).
        reason: optional text kept in ``last_error``.
    """

    __module__ = "sa_jobqueue"

    def __init__(self, delay: timedelta | float = 0.0, reason: str = "") -> None:
        # The same rule as enqueue's delay: the database adds it to now(), so it must
        # stay within 100 years or the fenced retry update itself would fail.
        from sa_jobqueue.validation import check_delay

        seconds = check_delay("delay", delay)
        self.delay = seconds
        self.reason = reason
        super().__init__(reason or f"retry in {seconds:g}s")


class Discard(Exception):
    """Raised by a handler: move this job to ``failed`` (dead letter) now, keeping `reason`."""

    __module__ = "sa_jobqueue"

    def __init__(self, reason: str = "discarded") -> None:
        self.reason = reason
        super().__init__(reason)
