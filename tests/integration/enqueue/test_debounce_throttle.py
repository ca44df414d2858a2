"""``enqueue(..., debounce=)`` and ``enqueue(..., throttle=)`` against real PostgreSQL.

Each is atomic with the caller's transaction and race-safe: 16 concurrent
transactions on one key leave one job.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, ValidationError
from tests.support.models import Job

jobs = JobQueue(Job)


@jobs.task("sync_cart", queue="carts")
def sync_cart(ctx):
    return ctx.payload


@jobs.task("other")
def other(ctx):  # pragma: no cover - never run here
    pass


def _enqueue(engine, payload=None, kind="sync_cart", **options):
    with Session(engine) as session, session.begin():
        job = jobs.enqueue(session, kind, payload, **options)
        return job.id, job.payload, job.run_at


def _all(engine):
    with Session(engine) as session:
        return list(session.scalars(select(Job).order_by(Job.id)))


def _race(engine, count, call):
    """`call(session, i)` in `count` transactions at once; each commits; their results."""
    racers = create_engine(engine.url.render_as_string(hide_password=False), pool_size=count)
    barrier, results, errors = threading.Barrier(count), [None] * count, []

    def run(i):
        try:
            with Session(racers) as session, session.begin():
                session.execute(text("SELECT 1"))  # connected and in a transaction
                barrier.wait()
                results[i] = call(session, i).id
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    racers.dispose()
    assert errors == []
    return results


# -- debounce ---------------------------------------------------------------------


def test_debounced_enqueues_collapse_into_one_job_due_a_window_after_the_last(committed):
    first, _, due_first = _enqueue(committed, {"v": 1}, debounce=("cart:7", timedelta(minutes=5)))
    second, payload, due_second = _enqueue(committed, {"v": 2}, debounce=("cart:7", 300))
    assert second == first
    assert payload == {"v": 2}  # the last payload, on the returned row too
    assert due_second >= due_first
    (job,) = _all(committed)
    assert (job.payload, job.debounce_key, job.status, job.queue) == (
        {"v": 2},
        "cart:7",
        "pending",
        "carts",
    )
    assert (job.run_at - job.updated_at).total_seconds() == pytest.approx(300, abs=1)


def test_sixteen_concurrent_transactions_debouncing_one_key_leave_one_pending_job(committed):
    def call(session, i):
        return jobs.enqueue(session, "sync_cart", {"v": i}, debounce=("cart:7", 60))

    ids = _race(committed, 16, call)
    (job,) = _all(committed)
    assert set(ids) == {job.id}
    assert job.payload["v"] in range(16)


def test_a_debounce_rolled_back_leaves_the_pending_job_as_it_was(committed):
    job_id, _, due = _enqueue(committed, {"v": 1}, debounce=("cart:7", 60))
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "sync_cart", {"v": 2}, debounce=("cart:7", 600))
        session.rollback()
    (job,) = _all(committed)
    assert (job.id, job.payload, job.run_at) == (job_id, {"v": 1}, due)


def test_a_debounce_while_its_job_runs_makes_a_new_pending_job(committed):
    running, _, _ = _enqueue(committed, {"v": 1}, debounce=("cart:7", 0))
    with committed.begin() as connection:
        connection.execute(text("UPDATE jobs SET status = 'running', attempts = 1"))
    later, _, _ = _enqueue(committed, {"v": 2}, debounce=("cart:7", 0))
    assert later != running  # a change after the run started gets its own run
    assert jobs.worker(committed, queues=["carts"]).drain() == 1
    assert [(j.id, j.status, j.result) for j in _all(committed)] == [
        (running, "running", None),
        (later, "done", {"v": 2}),
    ]


def test_a_debounce_key_held_by_another_kind_is_refused_and_changes_nothing(committed):
    _enqueue(committed, {"v": 1}, debounce=("shared", 60))
    with Session(committed) as session, session.begin():
        with pytest.raises(ValidationError, match="another kind"):
            jobs.enqueue(session, "other", {"v": 2}, debounce=("shared", 60))
        session.execute(text("SELECT 1"))  # the caller's transaction is still usable
    (job,) = _all(committed)
    assert (job.kind, job.payload) == ("sync_cart", {"v": 1})


# -- throttle ---------------------------------------------------------------------


def test_throttled_enqueues_within_the_window_return_the_first_job_and_insert_nothing(committed):
    first, _, _ = _enqueue(committed, {"v": 1}, throttle=("sync:42", timedelta(minutes=1)))
    again, payload, _ = _enqueue(committed, {"v": 2}, throttle=("sync:42", 60))
    assert (again, payload) == (first, {"v": 1})
    other_key, _, _ = _enqueue(committed, {"v": 3}, throttle=("sync:43", 60))
    assert other_key != first
    # Once the window has passed (here: the job's run_at moved back), a new job.
    with committed.begin() as connection:
        connection.execute(text("UPDATE jobs SET run_at = run_at - interval '61 seconds'"))
    after, _, _ = _enqueue(committed, {"v": 4}, throttle=("sync:42", 60))
    assert after not in (first, other_key)
    assert len(_all(committed)) == 3


def test_sixteen_concurrent_transactions_throttling_one_key_insert_one_job(committed):
    def call(session, i):
        return jobs.enqueue(session, "sync_cart", {"v": i}, throttle=("sync:42", 60))

    ids = _race(committed, 16, call)
    (job,) = _all(committed)
    assert set(ids) == {job.id}
    assert job.throttle_key == "sync:42"


def test_a_rolled_back_throttled_enqueue_leaves_the_window_free(committed):
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "sync_cart", {"v": 1}, throttle=("sync:42", 60))
        session.rollback()
    assert _all(committed) == []
    job_id, payload, _ = _enqueue(committed, {"v": 2}, throttle=("sync:42", 60))
    assert payload == {"v": 2}
    assert [j.id for j in _all(committed)] == [job_id]


# -- bad input --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce": ("k", 5), "throttle": ("k", 5)}, "not both"),
        ({"debounce": "k"}, r"\(key, window\) pair"),
        ({"debounce": ("k", 5, 6)}, r"\(key, window\) pair"),
        ({"debounce": ("", 5)}, "debounce key"),
        ({"debounce": (7, 5)}, "debounce key"),
        ({"debounce": ("k", -1)}, "debounce window"),
        ({"debounce": ("k", "5s")}, "debounce window"),
        ({"throttle": ("k", 0)}, "more than 0 seconds"),
        ({"throttle": ("k", 5), "delay": 10}, "does not combine with throttle="),
        ({"debounce": ("k", 5), "run_at": None, "idempotency_key": "x"}, "does not combine"),
        ({"debounce": ("k", 5), "unique_key": "x"}, "does not combine with debounce="),
    ],
)
def test_a_bad_debounce_or_throttle_is_refused_before_the_session_is_touched(
    session, options, message
):
    with pytest.raises(ValidationError, match=message):
        jobs.enqueue(session, "sync_cart", {}, **options)
    assert session.scalars(select(Job)).all() == []
