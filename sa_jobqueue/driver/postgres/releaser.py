"""`Releaser`: the release step of workflows, down the graph, with the NOTIFY of what it made due.

`PostgresDriver.dependents_release` runs it, for the worker's fenced ends and for the
operator's ``cancel``; `Releaser.upstream_results` reads what a released job waited for
(its ``ctx.upstream``). Never commits. See docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from sa_jobqueue.driver.values import Upstream
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.naming import channel_name, ended_channel_name
from sa_jobqueue.statements import workflows

__all__ = ["Releaser"]


class Releaser:
    """The release step for one jobs model; its statements are built once.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model
        # The release and the NOTIFY of the queues it made due: one statement.
        table = model.__tablename__
        self._release = workflows.release_dependents(
            model, channel=channel_name(table), ended_channel=ended_channel_name(table)
        )
        self._upstream = workflows.upstream_results(model)

    def upstream_results(self, conn: Connection, job_id: int) -> list[Upstream]:
        """`workflows.upstream_results` of `job_id`: each job it waited for, status, result."""
        return [Upstream(*row) for row in conn.execute(self._upstream, {"job_id": job_id})]

    def release(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """Count the ends of `ended` (``(id, final status)``) against the jobs waiting for them.

        Run it in the transaction of those ends, after them. Jobs cancelled by a
        failure release theirs in turn, down the graph; the queues of the jobs made
        ``pending`` are notified at commit (one ``pg_notify`` per queue, sent by the
        release statement itself), and so are the ids of those cancelled, on the
        ended channel (`jobs.wait`). Returns the ids made ``pending``.
        """
        released: list[int] = []
        todo = list(ended)
        while todo:
            params = {
                "ended_ids": [job_id for job_id, _ in todo],
                "ended_statuses": [status for _, status in todo],
            }
            rows = conn.execute(self._release, params).all()
            todo = []
            for row in rows:
                if row.status == Status.PENDING.value:
                    released.append(row.id)
                elif row.status == Status.CANCELLED.value and row.has_dependents:
                    todo.append((row.id, row.status))
        return released
