"""The counters of ended jobs equal a count over the rows, on every database.

Jobs end through the worker's own statements (done, a discard, an operator's cancel;
concurrent worker processes too), then the counters (`statements.counted_by_kind`: the
rollup plus the log) are compared with a ``GROUP BY`` over the finished rows, before and
after the log is moved into the rollup (`counters_compact`). Retries and deletes: the
counters count endings, so a retried job that ends again counts twice, and a deleted
job stays counted (docs/observability.md#counters).
"""

from __future__ import annotations

import threading
from collections import Counter

from sqlalchemy import Engine, event, func, insert, select
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobQueue, statements
from sa_jobqueue.driver import driver_for
from sa_jobqueue.ops import admin
from sa_jobqueue.ops.retention import Pruner
from sa_jobqueue.schema.counters import ended_table_for
from sa_jobqueue.schema.model import FINISHED
from sa_jobqueue.worker import maintenance
from sa_jobqueue.worker.maintenance import Maintenance
from tests.support.helpers import held_running, wait_for
from tests.support.models import Job
from tests.support.processes import every_database

FINISHED_VALUES = [status.value for status in FINISHED]


def _rows(engine: Engine) -> Counter[tuple[str, str, str]]:
    query = (
        select(Job.queue, Job.kind, Job.status, func.count())
        .where(Job.status.in_(FINISHED_VALUES))
        .group_by(Job.queue, Job.kind, Job.status)
    )
    with engine.connect() as conn:
        return Counter({(q, k, s): int(n) for q, k, s, n in conn.execute(query)})


def _counted(engine: Engine) -> Counter[tuple[str, str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(statements.counted_by_kind(Job))
        return Counter({(r.queue, r.kind, r.status): int(r.jobs) for r in rows})


def _compact(engine: Engine) -> int:
    moved = 0  # log rows (a row may count several jobs)
    with engine.begin() as conn:
        driver = driver_for(conn, Job)
        while (n := driver.counters_compact(conn, 7)) > 0:  # several small batches
            moved += n
    return moved


def _logged(engine: Engine) -> int:
    ended = ended_table_for(Job.__table__)  # type: ignore[arg-type]
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(ended)).scalar_one())


def _queue() -> JobQueue[Job]:
    jobs = JobQueue(Job)
    jobs.task("ok")(lambda ctx: None)

    @jobs.task("bad")
    def bad(ctx):
        raise Discard("no")

    return jobs


@every_database
def test_counters_equal_a_count_over_the_rows_after_a_drain_and_after_compaction(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        for i in range(30):
            jobs.enqueue(session, "ok", {"i": i}, queue="a" if i % 3 else "b")
        for i in range(5):
            jobs.enqueue(session, "bad", {"i": i}, queue="a")
        later = [jobs.enqueue(session, "ok", {}, queue="c").id for _ in range(4)]
    with Session(committed) as session, session.begin():
        admin.cancel(session, Job, later)
    assert jobs.worker(committed, queues=["a", "b"]).drain() == 35

    rows = _rows(committed)
    assert rows == {
        ("a", "ok", "done"): 20,
        ("b", "ok", "done"): 10,
        ("a", "bad", "failed"): 5,
        ("c", "ok", "cancelled"): 4,
    }
    assert _counted(committed) == rows
    _compact(committed)  # (the drain's first sweep moved the cancelled ones already)
    assert _logged(committed) == 0
    assert _counted(committed) == rows  # the same numbers, from the rollup alone
    assert _compact(committed) == 0


@every_database
def test_a_retried_job_counts_each_ending_and_a_deleted_one_stays_counted(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        bad = [jobs.enqueue(session, "bad", {}).id for _ in range(3)]
        jobs.enqueue(session, "ok", {})
    jobs.worker(committed).drain()
    _compact(committed)
    with Session(committed) as session, session.begin():
        admin.retry(session, Job, bad[:2])
    assert _counted(committed)[("default", "bad", "failed")] == 3  # a retry lowers nothing
    jobs.worker(committed).drain()
    assert _rows(committed)[("default", "bad", "failed")] == 3
    assert _counted(committed)[("default", "bad", "failed")] == 5  # 3 endings + 2 more
    with Session(committed) as session, session.begin():
        admin.delete_finished(session, Job, bad)
    assert _rows(committed)[("default", "bad", "failed")] == 0
    assert _counted(committed)[("default", "bad", "failed")] == 5
    assert _counted(committed)[("default", "ok", "done")] == 1


@every_database
def test_stats_read_finished_totals_from_the_counters_and_live_work_from_the_table(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        for _ in range(4):
            jobs.enqueue(session, "ok", {}, queue="a")
        jobs.enqueue(session, "bad", {}, queue="a")
        jobs.enqueue(session, "ok", {}, queue="waiting")
    jobs.worker(committed, queues=["a"]).drain()
    with Session(committed) as session:
        stats = {q.queue: q for q in admin.stats(session, Job).queues}
    a, waiting = stats["a"], stats["waiting"]
    assert (a.done, a.failed, a.cancelled, a.failed_last_hour, a.pending) == (4, 1, 0, 1, 0)
    assert (waiting.pending, waiting.due, waiting.done) == (1, 1, 0)


@every_database
def test_a_job_ending_while_stats_reads_counts_once_running_or_done(committed):
    # stats() reads the live rows and the counters of ended jobs. Were they two reads, a
    # job ending between them would count as running in the first and done in the
    # second (seen in CI on PostgreSQL: 3 jobs read as done 3 + running 1).
    with held_running(committed) as held:

        def end_the_job(conn, cursor, statement, *args) -> None:
            if "pending" in statement and not held.ended:  # the first read of jobs
                held.end()

        with Session(committed) as session:
            event.listen(session.connection(), "after_cursor_execute", end_the_job)
            stats = {q.queue: q for q in admin.stats(session, Job).queues}["default"]
    assert held.ended  # ended midway through the read, not at the block's exit
    assert _status(committed, held.id) == "done"
    assert (stats.running, stats.done) == (1, 0)  # read before it ended, in one snapshot


def _status(engine: Engine, job_id: int) -> str:
    with engine.connect() as conn:
        return str(conn.scalar(select(Job.status).where(Job.id == job_id)))


@every_database
def test_concurrent_worker_processes_leave_counters_equal_to_the_rows(committed, processes):
    with Session(committed) as session, session.begin():
        for i in range(240):
            kind = "poison" if i % 40 == 0 else "record"
            session.add(Job(kind=kind, queue="default", payload={}, max_attempts=3))
    for _ in range(3):
        processes.worker("tests.support.apps.lesson:jobs", concurrency=4)

    def ended() -> bool:
        return sum(_rows(committed).values()) == 240

    wait_for(ended, 120, "every job ended")
    processes.stop_all()
    rows = _rows(committed)
    assert rows == {("default", "record", "done"): 234, ("default", "poison", "failed"): 6}
    assert _counted(committed) == rows
    _compact(committed)
    assert _counted(committed) == rows


def test_compaction_moves_exactly_what_it_adds_with_endings_in_between(committed):
    # PostgreSQL: the log rows appended by a transaction that commits after the compaction
    # started are not moved (not visible to it) and stay for the next one.
    jobs = _queue()
    with Session(committed) as session, session.begin():
        for _ in range(10):
            jobs.enqueue(session, "ok", {})
    jobs.worker(committed).drain()
    with committed.connect() as other:
        other.begin()
        other.execute(insert(Job).values(kind="ok", queue="x", status="done", payload={}))
        assert _compact(committed) >= 1  # the drain's (a done statement logs its batch)
        other.commit()
    assert _logged(committed) == 1
    assert _counted(committed) == _rows(committed)


@every_database
def test_a_sweep_moves_a_backlog_of_the_log_a_committed_batch_at_a_time(committed, monkeypatch):
    # A bulk ending leaves one log row per job. The sweep moves them in batches, each its
    # own transaction: another connection sees each batch moved before the next starts
    # (on SQLite, the file's write lock is not held for the whole backlog).
    monkeypatch.setattr(maintenance, "COMPACT_BATCH", 3)
    monkeypatch.setattr(maintenance, "COMPACT_ROUNDS", 2)
    with committed.begin() as conn:
        row = {"kind": "ok", "queue": "default", "status": "cancelled", "payload": {}}
        conn.execute(insert(Job), [row] * 7)
    assert _logged(committed) == 7
    driver = driver_for(committed, Job)
    compact = driver.counters_compact
    seen: list[int] = []

    def spy(conn, limit=7):
        seen.append(_logged(committed))  # read on another connection
        return compact(conn, limit)

    monkeypatch.setattr(driver, "counters_compact", spy)
    sweeper = Maintenance(
        committed,
        driver,
        "sweeper",
        leases=[60.0],
        sweep_interval=30.0,
        pruner=Pruner(Job, {}, 300.0),
        running=list,
        on_recovered=lambda: None,
        stopped=threading.Event(),
    )
    sweeper.sweep_once()
    assert seen == [7, 4]  # two rounds of three, the first committed before the second
    assert _logged(committed) == 1  # the rest waits for the next sweep
    sweeper.sweep_once()
    assert seen == [7, 4, 1]
    assert _logged(committed) == 0
    assert _counted(committed) == _rows(committed)
