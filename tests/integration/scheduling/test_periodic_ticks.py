"""Each tick once: the schedules table's conditional UPDATE, against real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, periodic
from tests.support.models import Job

jobs = JobQueue(Job)


@jobs.task("tick", queue="ticks", max_attempts=4)
def tick(ctx):  # pragma: no cover - never run here
    pass


HOURLY = jobs.periodic("tick", every=timedelta(hours=1), payload={"deep": False})
SCHEDULES = {"tick": HOURLY}
TABLE = "sa_jobqueue_schedules_jobs"


def _enqueue(engine, schedules=SCHEDULES):
    with engine.connect() as connection:
        return periodic.enqueue_due(connection, Job, jobs.registry, schedules)


def _row(engine):
    with engine.connect() as connection:
        return connection.execute(text(f"SELECT * FROM {TABLE} WHERE name = 'tick'")).one()


def _make_due(engine, ago: str):
    with engine.begin() as connection:
        connection.execute(
            text(f"UPDATE {TABLE} SET next_run_at = now() - CAST(:ago AS interval)"),
            {"ago": ago},
        )


def _jobs(engine):
    with Session(engine) as session:
        return list(session.scalars(select(Job).order_by(Job.id)))


def test_first_sight_records_the_next_tick_and_enqueues_nothing(committed):
    assert _enqueue(committed) == []
    row = _row(committed)
    with committed.connect() as connection:
        now = connection.scalar(select(func.now()))
    assert now < row.next_run_at <= now + timedelta(hours=1)
    assert row.next_run_at == HOURLY.next_after(now)
    assert row.spec == "every 3600s"
    assert _jobs(committed) == []
    assert _enqueue(committed) == []  # not due yet


def test_a_due_tick_is_enqueued_once_as_an_ordinary_job(committed):
    _enqueue(committed)
    _make_due(committed, "1 second")
    due = _row(committed).next_run_at
    (made,) = _enqueue(committed)
    assert made.due == due
    assert made.missed == 0
    (job,) = _jobs(committed)
    assert (job.kind, job.queue, job.payload, job.max_attempts) == (
        "tick",
        "ticks",
        {"deep": False},
        4,
    )
    assert job.idempotency_key == f"periodic:tick:{due.isoformat()}"
    row = _row(committed)
    assert row.last_job_id == job.id
    assert row.next_run_at > due
    assert _enqueue(committed) == []


def test_sixteen_workers_racing_for_one_tick_enqueue_it_once(committed):
    _enqueue(committed)
    _make_due(committed, "1 second")
    racers = 16
    barrier = threading.Barrier(racers)
    won: list[list[periodic.Tick]] = []
    errors: list[BaseException] = []

    def race() -> None:
        try:
            with committed.connect() as connection:
                barrier.wait(timeout=30)
                won.append(periodic.enqueue_due(connection, Job, jobs.registry, SCHEDULES))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(len(ticks) for ticks in won) == [0] * (racers - 1) + [1]
    assert len(_jobs(committed)) == 1


def test_missed_ticks_become_one_job_and_the_schedule_goes_on_from_now(committed):
    _enqueue(committed)
    # Six hours without a worker: the tick due then, and five more since.
    with committed.begin() as connection:
        connection.execute(
            text(f"UPDATE {TABLE} SET next_run_at = next_run_at - interval '6 hours'")
        )
    (made,) = _enqueue(committed)
    assert made.missed == 5
    assert len(_jobs(committed)) == 1
    with committed.connect() as connection:
        now = connection.scalar(select(func.now()))
    assert _row(committed).next_run_at == HOURLY.next_after(now)
    assert _enqueue(committed) == []


def _daily():
    daily = jobs.periodic("tick", cron="0 3 * * *", timezone="Europe/Paris", name="other")
    jobs.schedules.pop("other")
    return periodic.Schedule(**{**daily.__dict__, "name": "tick"})


def test_a_changed_definition_keeps_the_earlier_next_tick_and_enqueues_nothing(committed):
    _enqueue(committed)  # hourly: the next tick is within the hour
    held = _row(committed).next_run_at
    daily = _daily()
    assert _enqueue(committed, {"tick": daily}) == []
    row = _row(committed)
    assert row.spec == "cron 0 3 * * * Europe/Paris"
    # The hourly tick the row held comes before tomorrow's 03:00: it stays, and fires.
    assert row.next_run_at == min(held, daily.next_after(row.updated_at))
    assert _jobs(committed) == []


def test_a_changed_definition_takes_a_due_tick_instead_of_skipping_it(committed):
    _enqueue(committed)
    _make_due(committed, "1 second")
    daily = _daily()
    (made,) = _enqueue(committed, {"tick": daily})
    row = _row(committed)
    assert row.spec == "cron 0 3 * * * Europe/Paris"
    assert row.next_run_at == daily.next_after(row.last_run_at)
    assert [job.id for job in _jobs(committed)] == [made.job_id]


def test_two_definitions_rewriting_each_other_never_push_a_tick_later(committed):
    # The rolling-deploy fault (issue 24, item 4): each worker rewrote the row to its
    # own next tick, so the tick kept moving and none was enqueued.
    every_2 = periodic.make_schedule(jobs.registry, "tick", every=2)
    every_3 = periodic.make_schedule(jobs.registry, "tick", every=3)
    _enqueue(committed, {"tick": every_2})
    first = _row(committed).next_run_at
    for schedule in (every_3, every_2, every_3, every_2):
        if _enqueue(committed, {"tick": schedule}):
            # The stored tick came due meanwhile (a slow machine) and was taken: that is
            # a tick fired, not pushed; the rule holds from the new one on.
            first = _row(committed).next_run_at
            continue
        assert _row(committed).next_run_at <= first
