"""Transactional mode: the handler's writes and its fenced done commit in one transaction.

`TransactionalMode` runs one transactional attempt (sync or async) in a transaction of its
own, and a savepoint batch of them, one SAVEPOINT per job. See docs/workers.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import exc
from sqlalchemy.orm import Session

from sa_jobqueue.context import Parked, StepLeaseLost
from sa_jobqueue.driver import Driver, Upstream
from sa_jobqueue.schema.lenient_json import UndecodableJSON
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.worker.attempt import Claimed, Outcome, Result
from sa_jobqueue.worker.run import outcomes
from sa_jobqueue.worker.run.handler_calls import HandlerCalls
from sa_jobqueue.worker.run.session_guard import guarded
from sa_jobqueue.worker.running import RunningAttempts

__all__ = ["TransactionalMode"]

log = logging.getLogger("sa_jobqueue.worker")


class TransactionalMode:
    """The executor's transactional mode: one attempt, or a savepoint batch of attempts.

    Args:
        driver: runs the fenced done (and a batch's refund and charge) in the
            handler's transaction.
        owner: this worker's id, for the fence.
        tasks: kind -> task definition (the registry's content).
        session_factory: makes the session of sync transactional handlers (its
            async twin is `HandlerCalls.async_session_factory`).
        attempts: the worker's running attempts (a batch's jobs start and finish there).
        calls: builds each handler's context and calls it.
        run: runs one job on its own (the executor's `run`): a batch of one, a job
            that does not fit a batch, the jobs a failed batch did not reach.
        not_startable: None when a job may start now, else the outcome of not
            starting it (the executor's lease and rate checks).
    """

    def __init__(
        self,
        driver: Driver,
        owner: str,
        tasks: Callable[[str], TaskDef | None],
        session_factory: Callable[[], Session],
        attempts: RunningAttempts,
        calls: HandlerCalls,
        run: Callable[[Claimed], Outcome],
        not_startable: Callable[[Claimed], Outcome | None],
    ) -> None:
        self._driver = driver
        self._owner = owner
        self._tasks = tasks
        self._session_factory = session_factory
        self._attempts = attempts
        self._calls = calls
        self._run = run
        self._not_startable = not_startable

    async def arun_one(self, task: TaskDef, job: Claimed) -> Result | Outcome:
        """`run_one` with an `AsyncSession`."""
        async_session_factory = self._calls.async_session_factory
        if async_session_factory is None:
            raise RuntimeError("no AsyncSession factory for async transactional handlers")
        try:
            async with async_session_factory() as session, session.begin():
                try:
                    await session.connection()  # before the handler: see outcomes.unavailable
                except exc.SQLAlchemyError as error:
                    return outcomes.unavailable(job, error)
                upstream: list[Upstream] = []
                if job.waited:
                    upstream = await session.run_sync(
                        lambda sync: self._calls.upstream(job, sync.connection())
                    )
                with guarded(session.sync_session):
                    try:
                        returned = await self._calls.acall(
                            task, self._calls.async_context(job, session, upstream)
                        )
                    except Parked as parked:  # the park commits with the handler's writes
                        return outcomes.stopped_by_step(job, parked, time.perf_counter())
                # The driver's own fenced done, in this transaction, through the bridge.
                if not await session.run_sync(self._mark_done, job, returned):
                    raise _LeaseLostError
        except (_LeaseLostError, StepLeaseLost):
            return Result.LOST
        return Result.COMMITTED

    def _mark_done(
        self, session: Session, job: Claimed, returned: str | None = None, *, charged: bool = False
    ) -> bool:
        """Flush the handler's writes; run the fenced done (with the result) in their transaction.

        `charged`: a savepoint batch's job, whose done also takes back the batch's refund.
        Returns False when the fence matched no row (the lease was lost).
        """
        session.flush()
        # Core, not ORM, execution: no identity-map synchronisation to pay for.
        conn = session.connection()
        if charged:
            held = self._driver.job_complete_charged(conn, job, self._owner, returned)
        else:
            # Not announced here: the claim loop announces COMMITTED attempts in its round.
            held = self._driver.job_complete(conn, [job], self._owner, [returned], announce=False)
        if held.with_dependents:
            # The release step, in the handler's transaction: its writes, its done and
            # the release of the jobs waiting for it commit together (docs/workflows.md).
            self._driver.dependents_release(conn, [(job.id, "done")])
        return job.key in held

    def run_one(self, task: TaskDef, job: Claimed) -> Result | Outcome:
        """Run `job`'s handler and its fenced done in one transaction of their own.

        Returns the `Result` (COMMITTED, or LOST when the fence matched no row), or
        the `Outcome` of an attempt that stopped before its done (parked, no database).
        """
        # The handler's writes and the fenced "done" share one transaction: a crash
        # anywhere before COMMIT leaves neither; a lost lease rolls both back.
        try:
            with self._session_factory() as session, session.begin():
                try:
                    session.connection()  # before the handler: see outcomes.unavailable
                except exc.SQLAlchemyError as error:
                    return outcomes.unavailable(job, error)
                upstream = self._calls.upstream(job, session.connection()) if job.waited else ()
                with guarded(session):
                    try:
                        ctx = self._calls.context(job, session, upstream=upstream)
                        returned = self._calls.call(task, ctx)
                    except Parked as parked:
                        # ctx.sleep / wait parked the job in this transaction: the park
                        # commits with the handler's writes so far (its steps among them).
                        return outcomes.stopped_by_step(job, parked, time.perf_counter())
                if not self._mark_done(session, job, returned):
                    raise _LeaseLostError
        except (_LeaseLostError, StepLeaseLost):
            return Result.LOST
        return Result.COMMITTED

    def run_batch(self, jobs: Sequence[Claimed]) -> list[Outcome]:
        """Run transactional `jobs` in one transaction, one SAVEPOINT per job.

        Each job's handler writes and its fenced ``done`` mark sit in its own
        savepoint: a handler error or a lost lease rolls back that savepoint only,
        and the others commit together, sharing one COMMIT. Until that COMMIT
        nothing is visible; a crash before it leaves every job of the batch
        unfinished, with none of its writes (their leases expire and they run
        again). Should the batch's transaction fail (a deferred constraint at its
        COMMIT, a lost connection), no attempt runs twice: a job whose handler ran in
        it goes back to ``pending``, due at once, and runs again as a new attempt
        (`_after_failed_batch`); the jobs it did not reach run alone, so one bad job
        cannot fail the others. The fences make that safe even when the failed
        COMMIT did in fact commit.

        A worker that dies in a batch cannot tell which job killed it, so no job of
        the batch is charged for it: before the batch starts every job of `jobs`
        gets its claim's attempt back (committed), the batch takes them again in its
        COMMIT, and a job that runs alone takes its own back just before it starts.
        Only jobs on their first attempt share a batch; the others (a job back from a
        crashed batch among them) run alone, after the batch, where a crash is
        charged to the job that caused it. Returns the outcomes in the order of
        `jobs`. Never raises.
        """
        if len(jobs) == 1:
            return [self._run(jobs[0])]
        with self._calls.busy():
            if not self._refund(jobs):
                return [self._run(job) for job in jobs]  # nothing set aside: each runs alone
            batched = [job for job in jobs if self._batchable(job)]
            ran = self._run_batch(batched) if batched else []
            outcomes = {job.key: outcome for job, outcome in zip(batched, ran, strict=True)}
            for job in jobs:
                if job.key not in outcomes:
                    outcomes[job.key] = self._run_alone(job)
            return [outcomes[job.key] for job in jobs]

    def _batchable(self, job: Claimed) -> bool:
        """A transactional sync job on its first attempt: it may share a savepoint batch."""
        task = self._tasks(job.kind)
        return job.attempts == 1 and task is not None and task.transactional

    def _refund(self, jobs: Sequence[Claimed]) -> bool:
        """`Driver.job_refund` for `jobs`, committed; False when the database refused it."""
        return self._set_aside(self._driver.job_refund, jobs, "give back the attempts of")

    def _charge(self, jobs: Sequence[Claimed]) -> bool:
        """`Driver.job_charge` for `jobs`, committed; False when the database refused it."""
        return self._set_aside(self._driver.job_charge, jobs, "charge the attempts of")

    def _set_aside(
        self,
        change: Callable[[Any, Sequence[Claimed], str], None],
        jobs: Sequence[Claimed],
        what: str,
    ) -> bool:
        try:
            with self._session_factory() as session, session.begin():
                conn = session.connection()
                # A crash of the server may lose this COMMIT: the worst is the old
                # charging (or one attempt more for the job), never a job run twice.
                self._driver.commit_asynchronously(conn)
                change(conn, jobs, self._owner)
        except exc.SQLAlchemyError as error:
            log.warning("could not %s %d jobs of a savepoint batch: %s", what, len(jobs), error)
            return False
        return True

    def _run_alone(self, job: Claimed) -> Outcome:
        """Take `job`'s refunded attempt back, then run it in a transaction of its own."""
        self._charge([job])
        return self._run(job)

    def _run_batch(self, jobs: Sequence[Claimed]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        entered: list[Claimed] = []  # the jobs whose savepoints began: their handlers ran
        try:
            with self._session_factory() as session, session.begin():
                for job in jobs:
                    outcomes.append(self._run_savepoint(session, job, entered))
                    # The next job starts from an empty identity map, as it would alone.
                    session.expunge_all()
                # The attempts set aside before the batch, taken back with its COMMIT: the
                # done jobs' by their done (complete_charged), the others' here.
                others = [o.job for o in outcomes if o.result is not Result.COMMITTED]
                if others:
                    self._driver.job_charge(session.connection(), others, self._owner)
        except Exception as exc:  # noqa: BLE001 - a failed batch is settled job by job
            return self._after_failed_batch(jobs, outcomes, entered, exc)
        return outcomes

    def _after_failed_batch(
        self,
        jobs: Sequence[Claimed],
        decided: Sequence[Outcome],
        entered: Sequence[Claimed],
        error: Exception,
    ) -> list[Outcome]:
        """The outcomes of `jobs` when their batch's transaction failed; never raises.

        None of the batch's writes committed, and a batch's failure is charged to none
        of its jobs. A job whose savepoint began (its handler ran, or began to) never
        runs again as the same attempt: whatever it recorded or raised in the batch,
        it fails, due at once, without being charged (its refund stays), and its next
        claim, a new attempt, runs it alone; unless its row is no longer this
        attempt's (its lease lost, its stop recorded). An outcome decided outside
        the batch's transaction (a start refused, a cancel) stands, charged as the
        COMMIT would have charged it. The jobs the batch never reached run alone now,
        as the attempt they were claimed as. `decided`: the outcomes the batch reached.
        """
        ran = {job.key for job in entered}
        settled = {o.job.key: o for o in decided if o.job.key not in ran or o.result in _NOT_OURS}
        first = outcomes.format_error(_first_cause(error)).split("\n", 1)[0]
        why = f"its savepoint batch did not commit ({first}); it runs again as a new attempt"
        raised = {o.job.key: o.error for o in decided if o.result in _RAISED and o.error}
        again = {
            j.key: Outcome(j, Result.FAIL, 0.0, _with_own(why, raised.get(j.key)))
            for j in entered
            if j.key not in settled
        }
        unreached = [job for job in jobs if job.key not in settled and job.key not in again]
        log.warning(
            "savepoint batch of %d jobs failed (%s): %d that ran in it run again as new "
            "attempts, %d it did not reach run alone now",
            len(jobs),
            first,
            len(again),
            len(unreached),
        )
        if settled:
            self._charge([o.job for o in settled.values()])
        alone = {job.key: self._run_alone(job) for job in unreached}
        return [settled.get(job.key) or again.get(job.key) or alone[job.key] for job in jobs]

    def _run_savepoint(self, session: Session, job: Claimed, entered: list[Claimed]) -> Outcome:
        task = self._tasks(job.kind)
        if task is None or not task.transactional or isinstance(job.payload, UndecodableJSON):
            return self._run(job)  # not batchable: runs (or fails) on its own
        if self._attempts.cancelled_before_start(job.id, job.claimed_at):
            # Cancelled while it waited for its turn in the batch: it does not run (its
            # fenced done would find the row cancelled and read as a lost lease).
            return Outcome(job, Result.CANCELLED)
        refused = self._not_startable(job)
        if refused is not None:
            return refused
        self._attempts.start(job.key, task.timeout, subject=job)
        try:
            outcome = self._run_savepoint_of(session, job, task, entered)
        finally:
            stopped = self._attempts.finish(job.key)
        return outcomes.unless_abandoned(outcome, stopped)

    def _run_savepoint_of(
        self, session: Session, job: Claimed, task: TaskDef, entered: list[Claimed]
    ) -> Outcome:
        """`job`'s attempt in a savepoint of the batch's transaction; in `entered` once begun."""
        started = time.perf_counter()
        savepoint = session.begin_nested()
        entered.append(job)
        try:
            with self._calls.span(job):
                upstream = self._calls.upstream(job, session.connection()) if job.waited else ()
                with guarded(session):
                    ctx = self._calls.context(job, session, upstream=upstream)
                    returned = self._calls.call(task, ctx)
                held = self._mark_done(session, job, returned, charged=True)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - as in `run`
            savepoint.rollback()
            return outcomes.failed(task, job, exc, started)
        except Parked as parked:
            savepoint.commit()  # the park and the handler's writes so far
            return outcomes.stopped_by_step(job, parked, started)
        except StepLeaseLost as lost:
            savepoint.rollback()
            return outcomes.stopped_by_step(job, lost, started)
        if not held:
            savepoint.rollback()  # the lease was lost: none of this job's writes survive
            return Outcome(job, Result.LOST, duration=outcomes.since(started))
        savepoint.commit()
        return Outcome(job, Result.COMMITTED, duration=outcomes.since(started))


def _with_own(why: str, own: str | None) -> str:
    """`why`, and the first line of what the job's handler raised in the batch, if it did."""
    return why if own is None else f"{why}; in it, its handler raised {own.splitlines()[0]}"


def _first_cause(error: BaseException) -> BaseException:
    """The exception `error` arose from (a lost connection, rather than its aftermath)."""
    seen = {id(error)}
    while (earlier := error.__cause__ or error.__context__) is not None and id(earlier) not in seen:
        seen.add(id(earlier))
        error = earlier
    return error


#: The outcomes of a handler that raised (its error is kept in its job's new last_error).
_RAISED = (Result.FAIL, Result.RETRY, Result.DISCARD)

#: Outcomes of a job of a failed batch that stand: its row is not this attempt's to write.
_NOT_OURS = (Result.LOST, Result.ABANDONED)


class _LeaseLostError(Exception):
    """The fenced done matched no row: roll the handler's writes back."""
