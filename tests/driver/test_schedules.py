"""Schedules: the due read, `schedule_tick` and the runtime changes (`ScheduleOps`)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, insert, select

from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.schedules import (
    ScheduleDefine,
    ScheduleNew,
    ScheduleSpec,
    ScheduleTick,
)
from sa_jobqueue.schema.state_tables import schedules_table_for
from tests.driver.conftest import writing_beside
from tests.support.models import Job

SCHEDULES: Table = schedules_table_for(Job.__table__)  # type: ignore[arg-type]
DEFINITION = {"every": 60.0, "payload": {}}


def _now(db: Engine, driver: Driver) -> datetime:
    with db.begin() as conn:
        return driver.clock_now(conn)


def _code(db: Engine, driver: Driver, name: str, due_in: float, spec: str = "every 60s") -> None:
    """A code-declared schedule's row, its next tick `due_in` seconds from now (< 0: due)."""
    at = _now(db, driver) + timedelta(seconds=due_in)
    with db.begin() as conn:
        driver.schedules_insert(conn, [ScheduleNew(name, "plain", spec, at)])


def _runtime(db: Engine, driver: Driver, name: str, due_in: float, spec: str = "every 60s") -> None:
    """A runtime schedule's row (`schedule_upsert`), its next tick `due_in` seconds from now."""
    at = _now(db, driver) + timedelta(seconds=due_in)
    with db.begin() as conn:
        assert driver.schedule_upsert(conn, ScheduleDefine(name, "plain", spec, DEFINITION, at))


def _row(db: Engine, name: str) -> Any:
    with db.connect() as conn:
        return conn.execute(select(SCHEDULES).where(SCHEDULES.c.name == name)).first()


def _due(db: Engine, driver: Driver, names: tuple[str, ...] = ()) -> list[str]:
    with db.begin() as conn:
        return sorted(row.name for row in driver.schedules_due(conn, names, 100))


def _tick_of(db: Engine, name: str, **changes: Any) -> ScheduleTick:
    """The tick the due read would give a worker for `name`'s row as it is now."""
    row = _row(db, name)
    fields = {
        "name": name,
        "kind": row.kind,
        "spec": row.spec,
        "due": row.next_run_at,
        "following": row.next_run_at + timedelta(minutes=1),
        "definition": row.definition,
    }
    return ScheduleTick(**{**fields, **changes})


# -- a worker's round --------------------------------------------------------------


def test_schedules_due_reads_only_due_ones(db: Engine, driver: Driver):
    _code(db, driver, "due", -60)
    _code(db, driver, "later", 3600)
    _code(db, driver, "paused", -60)
    with db.begin() as conn:
        assert driver.schedule_pause(conn, "paused")
    with db.begin() as conn:
        [row] = driver.schedules_due(conn, ("due", "later", "paused"), 100)
    assert (row.name, row.kind, row.spec, row.definition) == ("due", "plain", "every 60s", None)
    assert row.next_run_at <= row.now


def test_schedules_due_takes_runtime_ones_and_only_the_code_ones_named(db: Engine, driver: Driver):
    _code(db, driver, "mine", -60)
    _code(db, driver, "another_apps", -60)
    _runtime(db, driver, "runtime", -60)
    assert _due(db, driver, ("mine",)) == ["mine", "runtime"]
    assert _due(db, driver) == ["runtime"]


def test_schedules_due_returns_the_oldest_tick_first_up_to_limit(db: Engine, driver: Driver):
    for name, due_in in (("b", -60), ("a", -30), ("c", -90)):
        _code(db, driver, name, due_in)
    with db.begin() as conn:
        assert [row.name for row in driver.schedules_due(conn, ("a", "b", "c"), 2)] == ["c", "b"]


def test_schedules_due_skips_rows_locked_by_another_transaction(db: Engine, driver: Driver):
    _code(db, driver, "held", -60)
    _code(db, driver, "free", -60)
    with db.connect() as one, one.begin():
        assert driver.schedule_lock(one, "held") is not None  # holds the row
        due = writing_beside(driver, one, lambda: _due(db, driver, ("held", "free")))
    # Where writers take turns (SQLite) the round's read waits for `one`'s COMMIT: both.
    assert due == (["free"] if driver.supports_skip_locked else ["free", "held"])


def test_schedule_tick_enqueues_each_due_time_once_across_two_connections(
    db: Engine, driver: Driver
):
    _code(db, driver, "nightly", -60)
    tick = _tick_of(db, "nightly")
    won: list[bool] = []

    def take(conn: Connection) -> None:
        taken = driver.schedule_tick(conn, tick)
        if taken:  # the caller's job of the tick, in the tick's transaction
            conn.execute(insert(Job).values(kind="plain", payload={}, queue="nightly"))
        won.append(taken)

    def second() -> None:
        with db.begin() as conn:
            take(conn)

    with db.connect() as one, one.begin():
        take(one)
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive()  # it waits for the row `one` moved
    thread.join(30)
    assert sorted(won) == [False, True]
    with db.connect() as conn:
        assert conn.scalar(select(func.count()).where(Job.queue == "nightly")) == 1
    row = _row(db, "nightly")
    assert row.next_run_at == tick.following
    assert row.last_run_at is not None


def test_schedule_tick_of_a_tick_already_moved_takes_nothing(db: Engine, driver: Driver):
    _code(db, driver, "nightly", -60)
    stale = _tick_of(db, "nightly", due=_row(db, "nightly").next_run_at - timedelta(minutes=1))
    with db.begin() as conn:
        assert not driver.schedule_tick(conn, stale)
    assert _row(db, "nightly").last_run_at is None


def test_schedule_tick_of_a_tick_not_due_yet_takes_nothing(db: Engine, driver: Driver):
    _code(db, driver, "later", 3600)
    with db.begin() as conn:
        assert not driver.schedule_tick(conn, _tick_of(db, "later"))


def test_schedule_tick_of_a_paused_schedule_takes_nothing(db: Engine, driver: Driver):
    _code(db, driver, "nightly", -60)
    tick = _tick_of(db, "nightly")
    with db.begin() as conn:
        driver.schedule_pause(conn, "nightly")
    with db.begin() as conn:
        assert not driver.schedule_tick(conn, tick)


def test_schedule_tick_of_a_replaced_runtime_definition_takes_nothing(db: Engine, driver: Driver):
    _runtime(db, driver, "report", -60)
    tick = _tick_of(db, "report")
    changed = {**DEFINITION, "payload": {"v": 2}}
    with db.begin() as conn:  # replaced with the same ticks: the row keeps its tick
        at = tick.following
        driver.schedule_upsert(conn, ScheduleDefine("report", "plain", tick.spec, changed, at))
    with db.begin() as conn:
        assert not driver.schedule_tick(conn, tick)
    with db.begin() as conn:
        assert driver.schedule_tick(conn, _tick_of(db, "report"))


def test_schedule_tick_stores_the_takers_definition(db: Engine, driver: Driver):
    _code(db, driver, "nightly", -60, spec="every 60s")
    with db.begin() as conn:
        assert driver.schedule_tick(conn, _tick_of(db, "nightly", spec="every 30s", kind="k2"))
    row = _row(db, "nightly")
    assert (row.spec, row.kind) == ("every 30s", "k2")


def test_schedule_tick_record_remembers_the_ticks_job(db: Engine, driver: Driver):
    _code(db, driver, "nightly", -60)
    with db.begin() as conn:
        driver.schedule_tick_record(conn, "nightly", 42)
    assert _row(db, "nightly").last_job_id == 42


def test_schedules_read_returns_the_named_rows_that_exist(db: Engine, driver: Driver):
    _code(db, driver, "a", 60)
    _runtime(db, driver, "b", 60)
    with db.begin() as conn:
        driver.schedule_pause(conn, "b")
    with db.begin() as conn:
        rows = {row.name: row for row in driver.schedules_read(conn, ["a", "b", "missing"])}
    assert sorted(rows) == ["a", "b"]
    assert rows["a"].definition is None
    assert rows["a"].paused_at is None
    assert rows["b"].definition == DEFINITION
    assert rows["b"].paused_at is not None


def test_schedules_insert_leaves_existing_rows_alone(db: Engine, driver: Driver):
    _code(db, driver, "nightly", 60, spec="every 60s")
    before = _row(db, "nightly")
    _code(db, driver, "nightly", 600, spec="every 10s")
    _code(db, driver, "other", 60)
    assert _row(db, "nightly") == before
    assert _row(db, "other") is not None


def test_schedule_respec_never_moves_a_tick_later(db: Engine, driver: Driver):
    _code(db, driver, "nightly", 60, spec="every 60s")
    stored = _row(db, "nightly").next_run_at
    later = ScheduleSpec("nightly", "plain", "every 90s", stored + timedelta(hours=1))
    with db.begin() as conn:
        assert driver.schedule_respec(conn, later)
    row = _row(db, "nightly")
    assert (row.spec, row.next_run_at) == ("every 90s", stored)
    sooner = ScheduleSpec("nightly", "plain", "every 30s", stored - timedelta(seconds=30))
    with db.begin() as conn:
        assert driver.schedule_respec(conn, sooner)
    assert _row(db, "nightly").next_run_at == sooner.following


def test_schedule_respec_of_workers_that_agree_writes_nothing(db: Engine, driver: Driver):
    _code(db, driver, "nightly", 60, spec="every 60s")
    before = _row(db, "nightly")
    same = ScheduleSpec("nightly", "plain", "every 60s", before.next_run_at)
    with db.begin() as conn:
        assert not driver.schedule_respec(conn, same)
    assert _row(db, "nightly") == before


def test_schedule_respec_clears_a_runtime_definition(db: Engine, driver: Driver):
    _runtime(db, driver, "report", 60)
    code = ScheduleSpec("report", "plain", "every 60s", _row(db, "report").next_run_at)
    with db.begin() as conn:
        assert driver.schedule_respec(conn, code)  # code wins over a runtime schedule
    assert _row(db, "report").definition is None


# -- runtime changes ---------------------------------------------------------------


def test_schedule_lock_returns_the_row_with_the_clock_or_none(db: Engine, driver: Driver):
    _runtime(db, driver, "report", 60)
    with db.begin() as conn:
        row = driver.schedule_lock(conn, "report")
        assert driver.schedule_lock(conn, "missing") is None
    assert row is not None
    assert (row.name, row.definition, row.paused_at) == ("report", DEFINITION, None)
    assert row.next_run_at > row.now


def test_schedule_upsert_does_not_replace_a_code_schedule(db: Engine, driver: Driver):
    _code(db, driver, "nightly", 60)
    before = _row(db, "nightly")
    define = ScheduleDefine("nightly", "plain", "every 5s", DEFINITION, before.next_run_at)
    with db.begin() as conn:
        assert not driver.schedule_upsert(conn, define)
    assert _row(db, "nightly") == before


def test_schedule_upsert_with_the_same_ticks_keeps_the_next_tick(db: Engine, driver: Driver):
    _runtime(db, driver, "report", 60, spec="every 60s")
    stored = _row(db, "report").next_run_at
    changed = {**DEFINITION, "payload": {"v": 2}}
    moved = stored + timedelta(hours=1)
    with db.begin() as conn:
        assert driver.schedule_upsert(
            conn, ScheduleDefine("report", "plain", "every 60s", changed, moved)
        )
    assert (_row(db, "report").next_run_at, _row(db, "report").definition) == (stored, changed)
    with db.begin() as conn:  # other ticks: the new definition's next one
        driver.schedule_upsert(conn, ScheduleDefine("report", "plain", "every 5s", changed, moved))
    assert _row(db, "report").next_run_at == moved


def test_schedule_upsert_keeps_a_pause(db: Engine, driver: Driver):
    _runtime(db, driver, "report", 60)
    with db.begin() as conn:
        driver.schedule_pause(conn, "report")
    _runtime(db, driver, "report", 60, spec="every 5s")
    assert _row(db, "report").paused_at is not None


def test_schedule_delete_returns_whether_there_was_a_row(db: Engine, driver: Driver):
    _runtime(db, driver, "report", 60)
    with db.begin() as conn:
        assert driver.schedule_delete(conn, "report")
        assert not driver.schedule_delete(conn, "report")
    assert _row(db, "report") is None


def test_schedule_pause_and_resume_report_a_change_only_once(db: Engine, driver: Driver):
    _code(db, driver, "nightly", 60)
    following = _row(db, "nightly").next_run_at + timedelta(hours=1)
    with db.begin() as conn:
        assert driver.schedule_pause(conn, "nightly")
        assert not driver.schedule_pause(conn, "nightly")
    assert _row(db, "nightly").paused_at is not None
    with db.begin() as conn:
        assert driver.schedule_resume(conn, "nightly", following)
        assert not driver.schedule_resume(conn, "nightly", following)
    row = _row(db, "nightly")
    assert (row.paused_at, row.next_run_at) == (None, following)


def test_schedule_run_record_stamps_the_run_and_its_job(db: Engine, driver: Driver):
    _code(db, driver, "nightly", 60)
    with db.begin() as conn:
        driver.schedule_run_record(conn, "nightly", 7)
    row = _row(db, "nightly")
    assert (row.last_job_id, row.last_run_at is not None) == (7, True)


def test_schedules_list_returns_every_row_by_name_with_every_column(db: Engine, driver: Driver):
    _runtime(db, driver, "b", 60)
    _code(db, driver, "a", 60)
    with db.begin() as conn:
        driver.schedule_run_record(conn, "a", 3)
    with db.begin() as conn:
        rows = driver.schedules_list(conn)
    assert [row.name for row in rows] == ["a", "b"]
    assert (rows[0].last_job_id, rows[0].definition) == (3, None)
    assert rows[1].definition == DEFINITION
    assert all(row.now is not None and row.last_run_at is None for row in rows[1:])


def test_schedule_operations_never_commit(db: Engine, driver: Driver):
    _code(db, driver, "nightly", -60)
    with db.connect() as conn, conn.begin() as transaction:
        assert driver.schedule_tick(conn, _tick_of(db, "nightly"))
        driver.schedule_pause(conn, "nightly")
        transaction.rollback()
    row = _row(db, "nightly")
    assert (row.last_run_at, row.paused_at) == (None, None)


def test_schedule_upsert_of_one_new_name_by_racing_creators_never_deadlocks(
    db: Engine, driver: Driver
):
    # MariaDB: each creator's locking read of the missing row takes a gap lock, and two
    # such locks let neither INSERT go on (a deadlock, error 1213) unless creators of a
    # name take turns first. Every creator must succeed, and one row is left per name.
    at = _now(db, driver) + timedelta(minutes=1)
    creators, rounds = 4, 15
    errors: list[BaseException] = []
    for round_ in range(rounds):
        name = f"raced-{round_}"
        start = threading.Barrier(creators)

        def create(i: int, name: str = name, start: threading.Barrier = start) -> None:
            define = ScheduleDefine(name, "plain", f"every {i + 1}s", DEFINITION, at)
            try:
                start.wait(10)
                with db.begin() as conn:
                    assert driver.schedule_upsert(conn, define)
            except BaseException as error:  # noqa: BLE001 - collected for the assertion
                errors.append(error)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(creators)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert _row(db, name).spec in {f"every {i + 1}s" for i in range(creators)}
