"""Pruning beside live workers: nothing lost, live rows never deleted, claims never wait."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.driver.postgres import claims, completion
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue

FAR_FUTURE = datetime(2100, 1, 1, tzinfo=timezone.utc)


def seed_done(engine, count: int, age: str = "2 days", status: str = "done") -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, finished_at) "
                "SELECT 'old', :status, 1, now() - CAST(:age AS interval) "
                "FROM generate_series(1, :count)"
            ),
            {"count": count, "age": age, "status": status},
        )


def test_claims_and_enqueues_never_wait_for_an_open_prune_batch(committed):
    seed_done(committed, 50)
    with committed.connect() as conn:
        conn.execute(text("INSERT INTO jobs (kind, queue) VALUES ('work', 'probe')"))
        conn.commit()
    claim = claims.claim(Job, leases={}, default_lease=60, ceiling=32)
    with committed.connect() as pruner, committed.connect() as worker:
        batch = pruner.begin()  # a prune batch, left open on purpose
        deleted = pruner.execute(statements.prune(Job), {"before": FAR_FUTURE, "limit": 1000}).all()
        assert len(deleted) == 50
        worker.execute(text("SET lock_timeout = '5s'"))  # waiting would raise, not hang
        worker.commit()
        started = time.monotonic()
        with worker.begin():
            worker.execute(text("INSERT INTO jobs (kind, queue) VALUES ('work', 'probe')"))
        with worker.begin():
            claimed = worker.execute(
                claim, {"queue_name": "probe", "limit": 10, "owner": "w"}
            ).all()
        with worker.begin():
            params = {"ids": [r.id for r in claimed], "attempt_numbers": [1, 1], "owner": "w"}
            assert len(worker.execute(completion.complete(Job), params).all()) == 2
        assert len(claimed) == 2
        assert time.monotonic() - started < 5
        batch.rollback()


def test_a_prune_batch_skips_rows_someone_else_holds(committed):
    seed_done(committed, 20)
    with committed.connect() as holder, committed.connect() as pruner:
        held = holder.execute(
            select(Job.id).where(Job.status == "done").limit(1).with_for_update()
        ).scalar_one()  # e.g. an operator's retry in flight
        pruner.execute(text("SET lock_timeout = '5s'"))
        pruner.commit()
        with pruner.begin():
            deleted = set(
                pruner.execute(
                    statements.prune(Job), {"before": FAR_FUTURE, "limit": 1000}
                ).scalars()
            )
        assert len(deleted) == 19
        assert held not in deleted
        holder.rollback()


def test_prune_while_a_worker_claims_loses_nothing_and_deletes_only_finished_jobs(committed):
    jobs = new_queue()
    handled: list[int] = []
    lock = threading.Lock()

    @jobs.task("noop", queue="pw")
    def noop(ctx):
        with lock:
            handled.append(ctx.id)

    seed_done(committed, 3000)
    with committed.begin() as conn:  # the oracle: every row deleted, with its status then
        conn.execute(text("CREATE TABLE prune_audit (id bigint, status text)"))
        conn.execute(
            text(
                "CREATE FUNCTION prune_audit() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN INSERT INTO prune_audit VALUES (OLD.id, OLD.status); RETURN OLD; END $$"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER prune_audit AFTER DELETE ON jobs "
                "FOR EACH ROW EXECUTE FUNCTION prune_audit()"
            )
        )
    worker = jobs.worker(committed, concurrency=4, poll_interval=0.1, retention={})
    runner = threading.Thread(target=worker.run, daemon=True)
    stop_pruning = threading.Event()
    prune_runs: list[int] = []

    def prune_forever() -> None:
        while not stop_pruning.is_set():
            result = jobs.prune(committed, older_than=timedelta(0), batch_size=50)
            prune_runs.append(result.total)

    pruner = threading.Thread(target=prune_forever, daemon=True)
    enqueued: list[int] = []
    slowest_claim = 0.0
    probe = claims.claim(Job, leases={}, default_lease=60, ceiling=32)
    try:
        runner.start()
        pruner.start()
        with committed.connect() as conn:
            for _ in range(30):
                with Session(committed) as session, session.begin():
                    rows = jobs.enqueue_many(session, [("noop", {"i": i}) for i in range(10)])
                    enqueued.extend(job.id for job in rows)
                    session.add(Job(kind="probe", queue="probe"))
                started = time.monotonic()
                with conn.begin():
                    assert conn.execute(
                        probe, {"queue_name": "probe", "limit": 1, "owner": "probe"}
                    ).all()
                slowest_claim = max(slowest_claim, time.monotonic() - started)
                time.sleep(0.02)
        wait_for(lambda: len(handled) >= len(enqueued), what="every job handled")
        wait_for(lambda: len(prune_runs) >= 3, what="a few prune runs")
    finally:
        stop_pruning.set()
        pruner.join(30)
        worker.stop()
        runner.join(30)
        with committed.begin() as conn:
            audit = conn.execute(text("SELECT id, status FROM prune_audit")).all()
            conn.execute(text("DROP TRIGGER prune_audit ON jobs"))
            conn.execute(text("DROP FUNCTION prune_audit()"))
            conn.execute(text("DROP TABLE prune_audit"))
    assert sorted(handled) == sorted(enqueued)  # each job ran once: none lost to a prune
    assert {status for _, status in audit} == {"done"}  # never pending nor running
    assert sum(prune_runs) == len(audit) >= 3000
    with committed.connect() as conn:
        left = dict(conn.execute(select(Job.status, func.count()).group_by(Job.status)).all())
    assert set(left) <= {"done", "running"}  # the probes stay claimed
    deleted = {job_id for job_id, _ in audit}
    with committed.connect() as conn:
        remaining = set(conn.scalars(select(Job.id).where(Job.kind == "noop")))
    assert remaining | (deleted & set(enqueued)) == set(enqueued)
    assert slowest_claim < 5.0  # generous: a claim never waits for a prune batch


def test_workers_prune_by_retention_on_their_own(committed):
    jobs = new_queue()

    @jobs.task("noop", queue="rq")
    def noop(ctx):
        pass

    seed_done(committed, 5, age="2 days")  # past done's 1 day
    seed_done(committed, 4, age="12 hours")  # kept
    seed_done(committed, 3, age="2 days", status="failed")  # kept: failed keeps 30 days
    seed_done(committed, 2, age="8 days", status="cancelled")  # past cancelled's 7 days
    worker = jobs.worker(committed, poll_interval=0.1, sweep_interval=0.1, prune_interval=0.1)
    runner = threading.Thread(target=worker.run, daemon=True)

    def statuses() -> dict[str, int]:
        with committed.connect() as conn:
            query = select(Job.status, func.count()).group_by(Job.status)
            return dict(conn.execute(query).all())

    runner.start()
    try:
        wait_for(lambda: statuses() == {"done": 4, "failed": 3}, what="default retention applied")
    finally:
        worker.stop()
        runner.join(30)
    quick = jobs.worker(committed, sweep_interval=0.1, retention={"failed": timedelta(0)})
    runner = threading.Thread(target=quick.run, daemon=True)
    runner.start()
    try:
        wait_for(lambda: statuses() == {"done": 4}, what="a custom retention applied")
    finally:
        quick.stop()
        runner.join(30)
