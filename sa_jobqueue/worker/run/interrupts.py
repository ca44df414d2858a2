"""Giving up running attempts: a timeout fired, or the job was cancelled while it ran.

`Interrupts` records the attempt's end at once and frees its slot; a sync handler's thread
is replaced and its late report ignored, an async one's task is cancelled. See docs/tasks.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sa_jobqueue.tasks import Registry
from sa_jobqueue.worker.attempt import AttemptKey, Claimed, Outcome, Result
from sa_jobqueue.worker.completer import log_job
from sa_jobqueue.worker.running import RunningAttempts, format_timeout

__all__ = ["Interrupts"]


class Interrupts:
    """Gives up one worker's running attempts.

    Args:
        registry: the tasks (their timeouts and backoff).
        attempts: the running attempts' stop events, deadlines and handles.
        abandon_thread: starts a replacement handler thread (`ThreadPool.abandon`).
        report: hands an outcome to the completer and wakes the claim loop.
        owner: the worker's id, for the log lines.
    """

    def __init__(
        self,
        registry: Registry,
        attempts: RunningAttempts,
        *,
        abandon_thread: Callable[[], None],
        report: Callable[[Sequence[Outcome]], None],
        owner: str,
    ) -> None:
        self.registry = registry
        self.attempts = attempts
        self.abandon_thread = abandon_thread
        self.report = report
        self.owner = owner

    def timed_out(self, key: AttemptKey, job: Claimed) -> None:
        """The watchdog's callback: `job`'s attempt ran past its task's timeout."""
        task = self.registry.get(job.kind)
        timeout = task.timeout if task is not None and task.timeout is not None else 0.0
        backoff = task.backoff(job.attempts) if task is not None else 0.0
        log_job(
            logging.WARNING,
            job,
            "timed out after %gs; its slot is free again and its handler was told (ctx.cancelled)",
            timeout,
            event="timeout",
            owner=self.owner,
        )
        # It ran for its whole timeout at least: that is its duration (the mean that
        # sizes claims ahead must not see a stuck handler as a short one).
        duration = max(timeout, self.attempts.elapsed(key) or 0.0)
        outcome = Outcome(job, Result.FAIL, backoff, format_timeout(timeout), duration)
        self._give_up(key, outcome)

    def control(self, payload: str) -> None:
        """The listener's callback for the control channel: ``cancel <id>``."""
        verb, _, argument = payload.partition(" ")
        if verb == "cancel" and argument.isdigit():
            self.cancelled(int(argument))

    def cancelled(self, job_id: int, attempt: int | None = None) -> None:
        """`job_id` was cancelled (notification or heartbeat): stop its running attempt."""
        for key, job in self.attempts.cancel_attempts(job_id, attempt):
            self._give_up(key, Outcome(job, Result.CANCELLED))

    def _give_up(self, key: AttemptKey, outcome: Outcome) -> None:
        """Record `outcome` now and free the slot; the handler's own report is ignored."""
        cancel = self.attempts.handle(key)
        if callable(cancel):
            cancel()  # an async handler's task: it gets CancelledError, no thread is stuck
        else:
            self.abandon_thread()  # a handler thread is: start a replacement
        self.report([outcome])
