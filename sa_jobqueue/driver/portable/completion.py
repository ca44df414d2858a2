"""`PortableLifecycle`: completion, failures, leases and workflows in portable statements.

The fenced done is one `FencedUpdate` (one ``UPDATE ... RETURNING`` on SQLite; on
MySQL a ``SELECT ... FOR UPDATE`` of the held attempts, then their UPDATE), storing each
job's result, if any, through a ``CASE`` on its id. A savepoint batch's refunds and
charges (`sa_jobqueue.driver.postgres.batches` says why) are fenced updates too. The
other families are the mixins `PortableFailures`, `PortableLeases` and
`PortableWorkflows`, joined here. No NOTIFY on the ended channel: these databases have
none, and ``jobs.wait`` polls.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import (
    Connection,
    String,
    Text,
    Update,
    bindparam,
    case,
    cast,
    literal,
    null,
    update,
)

from sa_jobqueue.driver.portable import kind_locks
from sa_jobqueue.driver.portable.counters import PortableCounters
from sa_jobqueue.driver.portable.failures import PortableFailures
from sa_jobqueue.driver.portable.fenced import FencedUpdate, fence, fence_params
from sa_jobqueue.driver.portable.leases import PortableLeases
from sa_jobqueue.driver.portable.workflows import PortableWorkflows
from sa_jobqueue.driver.values import Claimed, Held
from sa_jobqueue.schema.model import Status

__all__ = ["PortableLifecycle"]


class PortableLifecycle(PortableFailures, PortableLeases, PortableWorkflows, PortableCounters):
    """CompletionOps, FailureOps, LeaseOps, WorkflowOps for `PortableDriver`."""

    def job_complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        lock_kinds: Sequence[str] = (),
        announce: bool = True,
    ) -> Held:
        """Mark `jobs` done, fenced, storing `results` (`CompletionOps.job_complete`).

        One statement with ``RETURNING``, two without; then, with `lock_kinds`, the
        locks of those that are limited kinds here, in sorted order (`kind_locks`:
        a row lock on MySQL; on SQLite the done's write lock is all of them). Nothing is
        announced (no NOTIFY here), but `announce` keeps its contract: False
        completes one job.
        """
        if not jobs:
            return Held()
        if results is not None and len(results) != len(jobs):
            raise ValueError(f"{len(jobs)} jobs but {len(results)} results")
        if not announce and len(jobs) != 1:
            raise ValueError(f"announce=False completes one job, not {len(jobs)}")
        params = fence_params(jobs, owner)
        given = zip(jobs, results, strict=True) if results is not None else ()
        stored = [(job.id, result) for job, result in given if result is not None]
        for i, (job_id, result) in enumerate(stored):
            params[f"result_id_{i}"], params[f"result_{i}"] = job_id, result
        done = self._completion_storing(len(stored)) if stored else self._completion_done
        held = Held.from_rows(done.run(conn, params))
        self.count_done(conn, held)  # the counters (docs/observability.md#counters)
        locking = sorted(kind for kind in set(lock_kinds) if kind in self.limited)
        if locking:
            kind_locks.lock_kinds(self.sql, self.model, conn, locking)
            held.locked = frozenset(locking)
        return held

    def job_complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """Mark a refunded batched `job` done and take its refund back, fenced."""
        params = {**fence_params([job], owner), "result": result}
        held = Held.from_rows(self._completion_charged.run(conn, params))
        self.count_done(conn, held)
        return held

    def job_refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """Give `jobs` their claim's attempt back (``max_attempts + 1``), fenced."""
        if jobs:
            conn.execute(self._completion_refund, fence_params(jobs, owner))

    def job_charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """Take back what `job_refund` gave `jobs` (this attempt and owner, whatever its status)."""
        if jobs:
            conn.execute(self._completion_charge, fence_params(jobs, owner))

    def _done_values(self) -> dict[str, Any]:
        """A fenced done's values, without a result.

        ``last_error`` is written when an attempt ends without success, so once the
        job is done it is the earlier attempt's: it stays, as history, as
        ``attempt N: <error>`` (as on PostgreSQL).
        """
        model = self.model
        now = self.sql.now()
        earlier = literal("attempt ", String) + cast(model.attempts - 1, String)
        return {
            "status": Status.DONE.value,
            "locked_until": null(),
            "finished_at": now,
            "updated_at": now,
            "last_error": case(
                (model.last_error.is_(None), null()),
                else_=earlier + literal(": ", String) + model.last_error,
            ),
        }

    def _completion_update(self, values: dict[str, Any]) -> FencedUpdate:
        model = self.model
        columns = (model.id, model.attempts, model.has_dependents)  # `Held.from_rows`
        return FencedUpdate(model, self.sql, fence(model), values, columns)

    @cached_property
    def _completion_done(self) -> FencedUpdate:
        return self._completion_update(self._done_values())

    def _completion_storing(self, n: int) -> FencedUpdate:
        """The done storing `n` results (``:result_id_<i>``, ``:result_<i>``), made once per n."""
        made = self._completion_by_results.get(n)
        if made is None:
            model = self.model
            # JSON text, stored as it is (a JSON type would encode the text again).
            whens: list[tuple[Any, Any]] = [
                (bindparam(f"result_id_{i}"), bindparam(f"result_{i}", type_=Text))
                for i in range(n)
            ]
            values = {**self._done_values(), "result": case(*whens, value=model.id)}
            made = self._completion_by_results[n] = self._completion_update(values)
        return made

    @cached_property
    def _completion_by_results(self) -> dict[int, FencedUpdate]:
        return {}

    @cached_property
    def _completion_charged(self) -> FencedUpdate:
        model = self.model
        values = {
            **self._done_values(),
            "result": bindparam("result", type_=Text),
            "max_attempts": model.max_attempts - 1,
        }
        return self._completion_update(values)

    @cached_property
    def _completion_refund(self) -> Update:
        model = self.model
        return update(model).where(*fence(model)).values(max_attempts=model.max_attempts + 1)

    @cached_property
    def _completion_charge(self) -> Update:
        # Whatever its status now: a batched job whose timeout was recorded meanwhile
        # is charged too; one claimed again since (another attempt, owner) is not.
        model = self.model
        owned = fence(model, running=False)
        return update(model).where(*owned).values(max_attempts=model.max_attempts - 1)
