"""A worker's schedules round beside many schedules: it reads only what is due.

Issue 45, item 4: every round re-read and re-parsed every stored schedule (151 ms a
round beside 2,000). The round now reads the due rows only (the stored next tick,
through its index), takes them in batches that racing workers share, and registers
the worker's code-declared schedules at its first round and then once a minute.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import cronsim
from sqlalchemy import event, func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, periodic
from sa_jobqueue.periodic import definitions
from tests.support.models import Job

TABLE = "sa_jobqueue_schedules_jobs"

jobs = JobQueue(Job)


@jobs.task("report")
def report(ctx):  # pragma: no cover - never run here
    pass


def _declared(count: int) -> JobQueue[Job]:
    """A worker's application declaring `count` daily schedules in code."""
    queue = JobQueue(Job)
    queue.task("report")(report)
    for i in range(count):
        queue.periodic("report", cron=f"{i % 60} 3 * * *", name=f"code_{i}")
    return queue


def _store(engine, count: int, prefix: str = "tenant", **definition) -> None:
    definition = definition or {"cron": "30 4 * * *", "timezone": "Europe/Paris"}
    with Session(engine) as session, session.begin():
        for i in range(count):
            jobs.schedule(session, f"{prefix}_{i}", "report", payload={"i": i}, **definition)


def _make_due(engine, where: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            text(f"UPDATE {TABLE} SET next_run_at = now() - interval '1 second' WHERE {where}")
        )


class _Reads:
    """Rows the schedules table's SELECTs returned, and cron searches started."""

    def __init__(self, engine, monkeypatch) -> None:
        self.rows = 0
        self.crons = 0
        event.listen(engine, "after_cursor_execute", self._seen)
        self._engine = engine
        real = cronsim.CronSim

        def counted(*args, **kwargs):
            self.crons += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(definitions, "CronSim", counted)

    def _seen(self, conn, cursor, statement, *args) -> None:
        if statement.lstrip().startswith("SELECT") and f"FROM {TABLE}" in statement:
            self.rows += max(cursor.rowcount, 0)

    def close(self) -> None:
        event.remove(self._engine, "after_cursor_execute", self._seen)


def test_a_round_beside_hundreds_of_schedules_reads_and_parses_only_the_due_ones(
    committed, monkeypatch
):
    worker = _declared(100)
    _store(committed, 200)
    enqueuer = periodic.PeriodicEnqueuer(Job, worker.registry, worker.schedules, interval=0)
    with committed.connect() as connection:
        assert enqueuer.maybe_run(connection) == []  # registers the 100 code rows
    _make_due(committed, "name IN ('code_7', 'tenant_3', 'tenant_150')")
    reads = _Reads(committed, monkeypatch)
    try:
        with committed.connect() as connection:
            ticks = enqueuer.maybe_run(connection)
            assert enqueuer.maybe_run(connection) == []
    finally:
        reads.close()
    assert sorted(tick.schedule for tick in ticks) == ["code_7", "tenant_150", "tenant_3"]
    # Before: 300 rows read and 300 crons searched in each of the two rounds.
    assert reads.rows == 3
    # Each taken tick: its definition read once, its next tick, its missed ones.
    assert reads.crons <= 3 * 3


def test_more_due_ticks_than_a_batch_are_taken_in_one_round_once_across_racing_workers(
    committed,
):
    due = periodic.ticks.BATCH * 2 + 50
    _store(committed, due, every=3600)
    _make_due(committed, "true")
    racers = 4
    barrier = threading.Barrier(racers)
    won: list[list[periodic.Tick]] = []
    errors: list[BaseException] = []

    def race() -> None:
        try:
            with committed.connect() as connection:
                barrier.wait(timeout=30)
                won.append(periodic.enqueue_due(connection, Job, jobs.registry, {}))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    names = [tick.schedule for ticks in won for tick in ticks]
    assert len(names) == len(set(names)) == due
    with Session(committed) as session:
        keys = session.scalars(select(Job.idempotency_key)).all()
        assert len(keys) == len(set(keys)) == due
        still_due = session.scalar(text(f"SELECT count(*) FROM {TABLE} WHERE next_run_at <= now()"))
    assert still_due == 0


def test_rows_left_behind_by_code_that_is_gone_never_hold_up_a_due_tick(committed):
    # More stale rows than a batch, all due long ago: no worker declares them.
    with committed.begin() as connection:
        connection.execute(
            text(
                f"INSERT INTO {TABLE} (name, kind, spec, next_run_at) "
                "SELECT 'gone_' || g, 'report', 'every 60s', now() - interval '1 day' "
                "FROM generate_series(1, :n) g"
            ),
            {"n": periodic.ticks.BATCH + 10},
        )
    _store(committed, 1, every=60)
    _make_due(committed, "name = 'tenant_0'")
    with committed.connect() as connection:
        ticks = periodic.enqueue_due(connection, Job, jobs.registry, {})
    assert [tick.schedule for tick in ticks] == ["tenant_0"]
    with committed.connect() as connection:
        untouched = connection.scalar(
            text(f"SELECT count(*) FROM {TABLE} WHERE name LIKE 'gone_%' AND last_run_at IS NULL")
        )
    assert untouched == periodic.ticks.BATCH + 10


def test_a_code_schedule_row_an_operator_removed_comes_back_at_the_next_registration(
    committed,
):
    worker = _declared(1)
    clock = [0.0]
    enqueuer = periodic.PeriodicEnqueuer(
        Job, worker.registry, worker.schedules, interval=1, clock=lambda: clock[0]
    )

    def stored() -> int:
        with committed.connect() as connection:
            query = select(func.count()).select_from(text(TABLE)).where(text("name = 'code_0'"))
            return int(connection.scalar(query) or 0)

    with committed.connect() as connection:
        enqueuer.maybe_run(connection)
        assert stored() == 1
        with committed.begin() as admin:
            admin.execute(text(f"DELETE FROM {TABLE}"))
        clock[0] += 1
        enqueuer.maybe_run(connection)  # a round that only reads the due rows
        assert stored() == 0
        clock[0] += enqueuer.register_every
        enqueuer.maybe_run(connection)
        assert stored() == 1


def test_a_failed_round_registers_again_at_the_next(committed):
    worker = _declared(1)
    clock = [0.0]
    enqueuer = periodic.PeriodicEnqueuer(
        Job, worker.registry, worker.schedules, interval=1, clock=lambda: clock[0]
    )
    with committed.connect() as connection:
        connection.execute(text(f"LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE NOWAIT"))
        with committed.connect() as other:
            other.execute(text("SET SESSION lock_timeout = '100ms'"))
            other.commit()
            assert enqueuer.maybe_run(other) == []  # fails on the lock, logged
            connection.rollback()
            clock[0] += 1
            enqueuer.maybe_run(other)
            # The session's setting would go back to the pool with the connection, and a
            # later test's lock wait on it would time out.
            other.execute(text("RESET lock_timeout"))
            other.commit()
    with committed.connect() as connection:
        assert connection.scalar(text(f"SELECT count(*) FROM {TABLE}")) == 1


def test_the_round_takes_a_tick_as_soon_as_it_is_due_with_the_next_one_stored(committed):
    _store(committed, 1, every=timedelta(minutes=5))
    _make_due(committed, "true")
    with committed.connect() as connection:
        (tick,) = periodic.enqueue_due(connection, Job, jobs.registry, {})
        now = connection.scalar(select(func.now()))
        following = connection.scalar(text(f"SELECT next_run_at FROM {TABLE}"))
    assert tick.schedule == "tenant_0"
    assert now < following <= now + timedelta(minutes=5)
