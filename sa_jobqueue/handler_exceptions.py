"""What a handler raises to end its attempt on purpose: `Retry` (later) and `Discard` (now).

Both are importable from `sa_jobqueue`; the worker turns each into its row update
(docs/tasks.md).
"""

from __future__ import annotations

from datetime import timedelta

from sa_jobqueue.core.step_options import never_retried
from sa_jobqueue.core.validation import check_delay

__all__ = ["Discard", "Retry"]


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
        seconds = check_delay("delay", delay)
        _check_reason("Retry", reason)
        self.delay = seconds
        self.reason = reason
        super().__init__(reason or f"retry in {seconds:g}s")


class Discard(Exception):
    """Raised by a handler: move this job to ``failed`` (dead letter) now, keeping `reason`."""

    __module__ = "sa_jobqueue"

    def __init__(self, reason: str = "discarded") -> None:
        _check_reason("Discard", reason)
        self.reason = reason
        super().__init__(reason)


def _check_reason(raised: str, reason: object) -> None:
    """Refuse a non-text reason where it is raised, not later in the worker.

    The reason is kept in ``last_error`` (cut to `worker.attempt.MAX_ERROR_LENGTH`
    characters, NULs escaped, when it is recorded).
    """
    if not isinstance(reason, str):
        raise TypeError(
            f"{raised}(reason=...) must be a str, not {type(reason).__name__}: "
            f"pass str(...) or json.dumps(...) of it"
        )


# A `Step`'s retries end at once on either, as the attempt does (docs/durable.md).
never_retried(Retry, Discard)
