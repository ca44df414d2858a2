"""Runtime schedules (`jobs.schedule` and friends) against real PostgreSQL.

Each call runs in the caller's transaction; workers (`periodic.enqueue_due`) read the
stored definitions at every round. Each tick is enqueued once however many race.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue, ValidationError, periodic
from tests.support.models import Job

TABLE = "sa_jobqueue_schedules_jobs"

jobs = JobQueue(Job)


@jobs.task("report", queue="reports", max_attempts=3)
def report(ctx):  # pragma: no cover - never run here
    pass


@jobs.task("tick")
def tick(ctx):  # pragma: no cover - never run here
    pass


jobs.periodic("tick", every=timedelta(hours=1))

# A worker of another application version: no code schedules, the same tasks.
bare = JobQueue(Job)
bare.task("report", queue="reports")(report)
bare.task("tick")(tick)


def _round(engine, queue=bare):
    with engine.connect() as connection:
        return periodic.enqueue_due(connection, Job, queue.registry, queue.schedules)


def _row(engine, name):
    with engine.connect() as connection:
        return connection.execute(text(f"SELECT * FROM {TABLE} WHERE name = :n"), {"n": name}).one()


def _make_due(engine, name, ago="1 second"):
    with engine.begin() as connection:
        connection.execute(
            text(
                f"UPDATE {TABLE} SET next_run_at = now() - CAST(:ago AS interval) WHERE name = :n"
            ),
            {"ago": ago, "n": name},
        )


def _jobs(engine):
    with Session(engine) as session:
        return list(session.scalars(select(Job).order_by(Job.id)))


def _schedule(engine, name="hourly", **definition):
    definition = definition or {"every": 3600}
    with Session(engine) as session, session.begin():
        return jobs.schedule(session, name, "report", payload={"deep": True}, **definition)


def test_a_runtime_schedule_exists_once_the_caller_commits_and_never_after_a_rollback(committed):
    with Session(committed) as session, session.begin():
        jobs.schedule(session, "hourly", "report", every=3600)
        session.rollback()
    assert _round(committed) == []
    with committed.connect() as connection:
        assert connection.scalar(text(f"SELECT count(*) FROM {TABLE}")) == 0
    _schedule(committed)
    row = _row(committed, "hourly")
    assert (row.kind, row.spec, row.paused_at) == ("report", "every 3600s", None)
    assert row.definition["queue"] == "reports"  # the task's queue, stored resolved
    assert _round(committed) == []  # its first tick is within the hour, not now


def test_a_due_runtime_tick_is_enqueued_once_with_its_payload_and_queue(committed):
    _schedule(committed)
    _make_due(committed, "hourly")
    (made,) = _round(committed)
    (job,) = _jobs(committed)
    assert (job.id, job.kind, job.queue, job.payload) == (
        made.job_id,
        "report",
        "reports",
        {"deep": True},
    )
    assert job.idempotency_key == f"periodic:hourly:{made.due.isoformat()}"
    assert _round(committed) == []
    assert _row(committed, "hourly").last_job_id == job.id


def test_sixteen_workers_racing_for_one_runtime_tick_enqueue_it_once(committed):
    _schedule(committed)
    _make_due(committed, "hourly")
    racers, barrier, won = 16, threading.Barrier(16), []

    def race():
        barrier.wait()
        won.append(_round(committed))

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(len(ticks) for ticks in won) == [0] * (racers - 1) + [1]
    assert len(_jobs(committed)) == 1


def test_a_paused_schedule_fires_no_due_tick_and_resume_skips_the_paused_ticks(committed):
    _schedule(committed)
    with Session(committed) as session, session.begin():
        assert jobs.pause_schedule(session, "hourly") is True
        assert jobs.pause_schedule(session, "hourly") is False
    _make_due(committed, "hourly", "3 hours")
    assert _round(committed) == []
    assert _jobs(committed) == []
    with Session(committed) as session, session.begin():
        assert jobs.resume_schedule(session, "hourly") is True
        assert jobs.resume_schedule(session, "hourly") is False
    row = _row(committed, "hourly")
    assert row.paused_at is None
    assert row.next_run_at > row.updated_at  # goes on from the next tick: no catch-up job
    assert _round(committed) == []


def test_pausing_a_code_declared_schedule_holds_its_ticks_in_every_worker(committed):
    _round(committed, jobs)  # a worker registers the code schedule "tick"
    with Session(committed) as session, session.begin():
        assert bare.pause_schedule(session, "tick") is True  # the row is the table's
    _make_due(committed, "tick")
    assert _round(committed, jobs) == []
    with Session(committed) as session, session.begin():
        bare.resume_schedule(session, "tick")
    assert _row(committed, "tick").definition is None  # still the code's schedule


def test_run_schedule_now_enqueues_one_job_in_the_callers_transaction(committed):
    _schedule(committed)
    with Session(committed) as session, session.begin():
        jobs.run_schedule_now(session, "hourly")
        session.rollback()
    assert _jobs(committed) == []
    with Session(committed) as session, session.begin():
        job = jobs.run_schedule_now(session, "hourly")
        again = jobs.run_schedule_now(session, "hourly")  # same transaction: same job
        assert again is job
        job_id = job.id
    (stored,) = _jobs(committed)
    assert (stored.id, stored.kind, stored.queue, stored.payload) == (
        job_id,
        "report",
        "reports",
        {"deep": True},
    )
    assert stored.idempotency_key.startswith("periodic:hourly:now:")
    row = _row(committed, "hourly")
    assert row.last_job_id == job_id
    assert row.next_run_at > row.last_run_at  # its own ticks are unchanged


def test_replacing_keeps_the_next_tick_for_the_same_ticks_and_moves_it_for_others(committed):
    _schedule(committed)
    _make_due(committed, "hourly")
    held = _row(committed, "hourly").next_run_at
    with Session(committed) as session, session.begin():
        jobs.schedule(session, "hourly", "report", every=3600, payload={"deep": False})
    row = _row(committed, "hourly")
    assert (row.next_run_at, row.definition["payload"]) == (held, {"deep": False})
    (made,) = _round(committed)  # the due tick is not lost, and has the new payload
    assert _jobs(committed)[0].payload == {"deep": False}
    _schedule(committed, cron="0 3 * * *", timezone="Europe/Paris")
    row = _row(committed, "hourly")
    assert row.spec == "cron 0 3 * * * Europe/Paris"
    assert row.next_run_at.astimezone(made.due.tzinfo).hour in (1, 2)  # 03:00 in Paris


def test_a_code_declared_schedule_wins_over_a_runtime_one_of_its_name(committed):
    with Session(committed) as session, session.begin(), pytest.raises(ConfigurationError) as e:
        jobs.schedule(session, "tick", "tick", every=60)
    assert "declared in code" in str(e.value)
    # Made at runtime by code that does not declare it; then a worker declaring it runs.
    with Session(committed) as session, session.begin():
        bare.schedule(session, "tick", "tick", every=60)
    _round(committed, jobs)
    row = _row(committed, "tick")
    assert (row.spec, row.definition) == ("every 3600s", None)
    with Session(committed) as session, session.begin(), pytest.raises(ConfigurationError) as e:
        bare.schedule(session, "tick", "tick", every=60)
    assert "code wins" in str(e.value)


def test_unschedule_deletes_a_runtime_schedule_and_refuses_unknown_or_code_names(committed):
    _schedule(committed)
    with Session(committed) as session, session.begin():
        jobs.unschedule(session, "hourly")
    assert _round(committed) == []
    with Session(committed) as session, session.begin():
        with pytest.raises(ValidationError, match="no schedule of that name"):
            jobs.unschedule(session, "hourly")
        with pytest.raises(ConfigurationError, match="declared in code"):
            jobs.unschedule(session, "tick")
        with pytest.raises(ValidationError, match="no schedule of that name"):
            jobs.pause_schedule(session, "nosuch")
        with pytest.raises(ValidationError, match="no schedule of that name"):
            jobs.run_schedule_now(session, "nosuch")


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({"cron": "61 3 * * *"}, "bad cron expression"),
        ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"every": 0.5}, "at least 1 second"),
        ({"every": 60, "cron": "* * * * *"}, "exactly one of cron= or every="),
        ({"every": 60, "jitter": -1}, "jitter"),
        ({"every": 60, "jitter": 600}, "jitter=600s is longer than the 60s between two ticks"),
        ({"cron": "*/1000000 * * * *"}, "step 1000000 of the minute field"),
        ({}, "exactly one of cron= or every="),
    ],
)
def test_a_bad_runtime_definition_is_refused_at_the_call_naming_the_problem(
    session, definition, message
):
    with pytest.raises(ConfigurationError, match=message) as error:
        jobs.schedule(session, "bad", "report", **definition)
    assert "schedule 'bad'" in str(error.value)
    with pytest.raises(ConfigurationError, match="not registered"):
        jobs.schedule(session, "bad", "nosuchkind", every=60)


def test_jitter_delays_each_tick_by_the_same_amount_on_every_worker(committed):
    _schedule(committed, every=3600, jitter=600)
    _make_due(committed, "hourly")
    (made,) = _round(committed)
    (job,) = _jobs(committed)
    schedule = periodic.make_schedule(
        jobs.registry, "report", every=3600, jitter=600, name="hourly"
    )
    delay = schedule.delay_of(made.due)
    assert 0 < delay < 600
    assert abs((job.run_at - job.created_at).total_seconds() - delay) < 1


def test_stored_schedules_lists_code_and_runtime_schedules(committed):
    _round(committed, jobs)
    _schedule(committed)
    with Session(committed) as session:
        listed = {s.name: s for s in jobs.stored_schedules(session)}
    assert (listed["tick"].source, listed["hourly"].source) == ("code", "runtime")
    assert (listed["hourly"].definition or {})["every"] == 3600
    assert listed["hourly"].to_dict()["next_run_at"].endswith("+00:00")
