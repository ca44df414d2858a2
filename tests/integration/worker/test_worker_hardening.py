"""Faults found by trying to break the worker (issue: hardening), each reproduced here.

- per-attempt bookkeeping by ``(id, attempts)``: an old attempt's late report must not
  touch a newer attempt of the same job on the same worker;
- nothing a handler raises stops the worker: unstorable text, non-text reasons;
- `Retry`/`Discard` reasons are bounded like errors;
- no connection for a transactional handler is not the handler's failure.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from sa_jobqueue import ConfigurationError, Discard, JobContext, JobQueue, Retry
from sa_jobqueue.worker.attempt import MAX_ERROR_LENGTH
from tests.integration.worker.test_worker import enqueue, row
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job


def test_an_old_attempts_late_report_leaves_the_new_attempt_of_the_same_job_alone(committed):
    """Cancel then retry while attempt 1 still runs: attempt 2 keeps its heartbeats."""
    jobs = JobQueue(Job)
    started = {1: threading.Event(), 2: threading.Event()}
    finish = {1: threading.Event(), 2: threading.Event()}

    @jobs.task("long", lease=timedelta(seconds=1.5))
    def long(ctx: JobContext) -> None:
        started[ctx.attempt].set()
        assert finish[ctx.attempt].wait(30)
        with Session(committed) as s, s.begin():
            s.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    job_id = enqueue(committed, jobs, "long")
    worker = jobs.worker(committed, concurrency=2, poll_interval=0.2, sweep_interval=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert started[1].wait(30)
        with Session(committed) as s, s.begin():  # an operator's cancel, then retry
            jobs.cancel(s, [job_id])
        with Session(committed) as s, s.begin():
            jobs.retry(s, [job_id])
        assert started[2].wait(30)  # the same worker claimed attempt 2
        finish[1].set()  # attempt 1 reports "done" late; its fence matches nothing
        wait_for(lambda: (job_id, 1) not in worker.inflight, what="attempt 1's report")
        assert (job_id, 2) in worker.inflight
        # Several leases long: attempt 2 must be heartbeated all along, never swept.
        lease_ends = []
        for _ in range(20):
            with committed.connect() as c:
                lease_ends.append(
                    c.execute(
                        select(Job.status, Job.attempts, Job.locked_until > func.now()).where(
                            Job.id == job_id
                        )
                    ).one()
                )
            threading.Event().wait(0.2)
        assert set(lease_ends) == {("running", 2, True)}
        finish[2].set()
        wait_for(lambda: row(committed, job_id).status == "done", what="attempt 2 done")
    finally:
        for event in finish.values():
            event.set()
        worker.stop()
        thread.join(30)
    done = row(committed, job_id)
    assert (done.status, done.attempts) == ("done", 2)


def test_unstorable_error_text_and_non_text_reasons_never_stop_the_worker(committed):
    jobs = JobQueue(Job)

    @jobs.task("nul_surrogate", max_attempts=1)
    def nul_surrogate(ctx: JobContext) -> None:
        raise ValueError("before\x00after \ud800")

    @jobs.task("dict_reason", max_attempts=1)
    def dict_reason(ctx: JobContext) -> None:
        raise Retry(reason={"code": 429})  # type: ignore[arg-type]

    @jobs.task("unprintable", max_attempts=1)
    def unprintable(ctx: JobContext) -> None:
        class WeirdError(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no")

        raise WeirdError

    @jobs.task("fine")
    def fine(ctx: JobContext) -> None:
        return None

    bad = [enqueue(committed, jobs, k) for k in ("nul_surrogate", "dict_reason", "unprintable")]
    good = enqueue(committed, jobs, "fine")
    assert jobs.worker(committed).drain() == 4
    rows = [row(committed, i) for i in bad]
    assert [r.status for r in rows] == ["failed", "failed", "failed"]
    assert "before\\x00after \\ud800" in rows[0].last_error
    assert "Retry(reason=...) must be a str, not dict" in rows[1].last_error
    assert "WeirdError: <unprintable message>" in rows[2].last_error
    assert row(committed, good).status == "done"


def test_retry_and_discard_reject_a_non_text_reason_where_they_are_raised():
    with pytest.raises(TypeError, match=r"Retry\(reason=...\) must be a str, not dict"):
        Retry(reason={"code": 429})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Discard\(reason=...\) must be a str, not int"):
        Discard(7)  # type: ignore[arg-type]


@pytest.mark.parametrize("signal", ["retry", "discard"])
def test_a_huge_retry_or_discard_reason_is_cut_like_an_error(committed, signal, caplog):
    jobs = JobQueue(Job)
    huge = "x" * 10_000_000

    @jobs.task("huge", max_attempts=1)
    def raise_huge(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise Retry(delay=3600, reason=huge) if signal == "retry" else Discard(huge)

    job_id = enqueue(committed, jobs, "huge")
    jobs.worker(committed).drain()
    stored = row(committed, job_id).last_error
    assert stored is not None
    assert len(stored) <= MAX_ERROR_LENGTH
    assert len(caplog.text) < 20_000  # logged cut, too


def test_no_connection_for_a_transactional_handler_does_not_use_up_its_attempts(committed):
    """Pool exhausted before the handler starts: retried later, never dead-lettered."""
    jobs = JobQueue(Job)
    ran = []

    @jobs.task("tx", transactional=True, max_attempts=2)
    def tx(ctx: JobContext) -> None:
        ran.append(ctx.id)
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    ids = [enqueue(committed, jobs, "tx") for _ in range(4)]
    starved = create_engine(committed.url, pool_size=1, max_overflow=0, pool_timeout=0.1)
    hog = starved.connect()  # the handlers' only connection, taken
    worker = jobs.worker(
        committed, concurrency=2, poll_interval=0.2, session_factory=sessionmaker(starved)
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: all(row(committed, i).attempts >= 3 for i in ids),
            what="three unavailable attempts of each job",
        )
        rows = [row(committed, i) for i in ids]
        assert ran == []
        assert {r.status for r in rows} <= {"pending", "running"}  # none failed
        assert all(r.max_attempts > 2 for r in rows)  # not counted against the budget
        pending = [r for r in rows if r.status == "pending"]
        assert pending
        assert all(
            "database unavailable before the handler started" in r.last_error for r in pending
        )
        hog.close()  # the database is back
        wait_for(
            lambda: all(row(committed, i).status == "done" for i in ids),
            what="every job done once connections are back",
        )
    finally:
        worker.stop()
        thread.join(30)
        hog.close()
        starved.dispose()
    assert sorted(ran) == sorted(ids)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_asynchronous_commit_applies_to_the_claim_loops_transactions_only(committed, asynchronous):
    jobs = JobQueue(Job)
    seen: dict[str, str] = {}

    @jobs.task("tx", transactional=True)
    def tx(ctx: JobContext) -> None:
        seen["handler"] = ctx.session.execute(text("SHOW synchronous_commit")).scalar_one()

    worker = jobs.worker(committed, asynchronous_commit=asynchronous)
    claim = worker.driver.job_claim

    def claim_and_look(conn, *args):
        seen["claim"] = conn.execute(text("SHOW synchronous_commit")).scalar_one()
        return claim(conn, *args)

    worker.driver.job_claim = claim_and_look  # type: ignore[method-assign]
    job_id = enqueue(committed, jobs, "tx")
    assert worker.drain() == 1
    assert row(committed, job_id).status == "done"
    assert seen == {"claim": "off" if asynchronous else "on", "handler": "on"}


def test_asynchronous_commit_must_be_a_bool(committed):
    with pytest.raises(ConfigurationError, match="asynchronous_commit must be True or False"):
        JobQueue(Job).worker(committed, asynchronous_commit="yes")  # type: ignore[arg-type]
