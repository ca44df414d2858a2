"""`TaskOptionsCheck`: claimed jobs that took the defaults instead of their task's options.

A process that enqueues a kind whose task it never imported writes the job with queue
``default`` and max_attempts 20; the worker, which has the task, says so once per kind.
See docs/enqueue.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sa_jobqueue.schema.model import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE
from sa_jobqueue.tasks import Registry
from sa_jobqueue.worker.attempt import Claimed

__all__ = ["TaskOptionsCheck"]

log = logging.getLogger("sa_jobqueue.worker")


class TaskOptionsCheck:
    """Warns, once per kind, when a claimed job holds the defaults where its task has options.

    Only a stored value equal to the library's default (queue ``default``,
    max_attempts 20) where the task registered here says otherwise counts: that is
    what a producer without the task writes (`enqueue.prepare` warns there too). A
    value the caller gave ``enqueue`` on purpose (``queue="urgent"``) is its choice and
    is not reported. The job runs as stored.

    Cost: nothing for a worker whose tasks all use the defaults; else one dict lookup
    per claimed job (two comparisons more for a kind not named yet).

    Args:
        registry: the worker's tasks, read once here.
    """

    def __init__(self, registry: Registry) -> None:
        #: kind -> (its task's queue, its task's max_attempts), each None where it is
        #: the default (nothing to tell from the row); kinds already named are removed.
        self._expected: dict[str, tuple[str | None, int | None]] = {}
        for task in registry:
            queue = task.queue if task.queue != DEFAULT_QUEUE else None
            attempts = task.max_attempts
            if attempts == DEFAULT_MAX_ATTEMPTS:
                attempts = None
            if queue is not None or attempts is not None:
                self._expected[task.kind] = (queue, attempts)

    def check(self, claimed: Sequence[Claimed]) -> None:
        """Log one warning for each kind in `claimed` whose job holds defaults, first time only."""
        expected = self._expected
        if not expected:
            return
        for job in claimed:
            options = expected.get(job.kind)
            if options is None:
                continue
            queue, attempts = options
            took = []
            if queue is not None and job.queue == DEFAULT_QUEUE:
                took.append(f"queue {DEFAULT_QUEUE!r} (its task: {queue!r})")
            if attempts is not None and job.max_attempts == DEFAULT_MAX_ATTEMPTS:
                took.append(f"max_attempts {DEFAULT_MAX_ATTEMPTS} (its task: {attempts})")
            if took:
                expected.pop(job.kind, None)
                _say(job, took)


def _say(job: Claimed, took: list[str]) -> None:
    log.warning(
        "job %d of kind %r was stored with the defaults, %s: the process that enqueued it "
        "likely did not import the module that defines its task, so the task's options were "
        "unknown there; the job runs as stored. Import that module where jobs of %r are "
        "enqueued, or pass queue= and max_attempts= to enqueue (docs/enqueue.md). Said once "
        "per kind.",
        job.id,
        job.kind,
        " and ".join(took),
        job.kind,
    )
