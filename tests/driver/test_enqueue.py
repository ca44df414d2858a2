"""Enqueue: one job, many, keyed lookups, debounce, throttle, upstream locks, edges, batches."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.enqueue import DebouncedJob, InsertShape, JobsInsert
from sa_jobqueue.enqueue.prepare import JobSpec
from tests.driver.conftest import OWNER, claim, row
from tests.support.models import Job

RETURNING = InsertShape(returning=("id", "payload", "run_at", "created_at"))
KEYED = RETURNING._replace(keys=("idempotency_key", "unique_key"))


def new(n: int = 1, **fields: Any) -> JobSpec:
    """A job to insert: kind ``plain``, due now, payload ``{"n": n}``."""
    given: dict[str, Any] = {
        "kind": "plain",
        "queue": "default",
        "payload": f'{{"n": {n}}}',
        "priority": 0,
        "max_attempts": 20,
        "run_at": None,
        "delay": 0.0,
        "idempotency_key": None,
    }
    return JobSpec(**{**given, **fields})


def batch(*jobs: JobSpec, **options: Any) -> JobsInsert:
    return JobsInsert(jobs, {}, **options)


def ids(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(select(Job.id).order_by(Job.id)).scalars())


def end(engine: Engine, job_id: int, status: str = "done") -> None:
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(status=status))


# -- one job ---------------------------------------------------------------------


def test_job_insert_returns_its_row_with_what_the_database_filled(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        inserted = driver.job_insert(session, new(7), RETURNING)
    assert inserted is not None
    job_id, payload, run_at, created_at = inserted
    assert payload == {"n": 7}
    assert run_at == created_at  # due now, by the database clock
    stored = row(db, job_id)
    assert (stored.status, stored.attempts, stored.kind) == ("pending", 0, "plain")


def test_job_insert_sets_the_delay_from_the_database_clock(db: Engine, driver: Driver):
    shape = RETURNING._replace(timing="after")
    with Session(db) as session, session.begin():
        inserted = driver.job_insert(session, new(delay=60.0), shape)
    assert inserted is not None
    assert (inserted[2] - inserted[3]).total_seconds() == 60.0


def test_insert_of_a_taken_idempotency_key_returns_the_existing_job(db: Engine, driver: Driver):
    keyed = new(1, idempotency_key="k1")
    with Session(db) as session, session.begin():
        first = driver.job_insert(session, keyed, KEYED)
    assert first is not None
    with Session(db) as session, session.begin():
        assert driver.job_insert(session, new(2, idempotency_key="k1"), KEYED) is None
        # The conflict raised nothing: the transaction goes on, and finds the holder.
        [holder] = driver.jobs_by_keys(session, ["k1"])
        assert (holder.id, holder.payload) == (first[0], {"n": 1})
    assert ids(db) == [first[0]]


def test_unique_key_is_free_again_once_its_job_ended(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        first = driver.job_insert(session, new(unique_key="u1"), KEYED)
        assert first is not None
        assert driver.job_insert(session, new(unique_key="u1"), KEYED) is None
        [active] = driver.jobs_by_keys(session, ["u1"], unique=True, ids_only=True)
        assert tuple(active) == (first[0], None, "u1")
    end(db, first[0])
    with Session(db) as session, session.begin():
        assert driver.jobs_by_keys(session, ["u1"], unique=True) == []
        second = driver.job_insert(session, new(unique_key="u1"), KEYED)
    assert second is not None
    assert second[0] != first[0]


def test_insert_is_undone_by_the_callers_rollback(db: Engine, driver: Driver):
    with Session(db) as session:
        driver.job_insert(session, new(idempotency_key="gone"), KEYED)
        driver.jobs_insert(session, batch(new(1), new(2)), ["id"])
        session.rollback()
    assert ids(db) == []
    with Session(db) as session, session.begin():  # and so is its key
        assert driver.job_insert(session, new(idempotency_key="gone"), KEYED) is not None


# -- many jobs -------------------------------------------------------------------


def test_jobs_insert_returns_the_new_rows_by_id_less_the_taken_keys(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        driver.job_insert(session, new(idempotency_key="taken"), KEYED)
    jobs = batch(new(1), new(2, idempotency_key="taken"), new(3, idempotency_key="new"))
    with Session(db) as session, session.begin():
        rows = driver.jobs_insert(session, jobs, ["id", "idempotency_key", "payload"])
    assert [(key, payload) for _, key, payload in rows] == [(None, {"n": 1}), ("new", {"n": 3})]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert len(ids(db)) == 3


def test_jobs_insert_gathered_decodes_payloads_and_returns_the_statements_now(
    db: Engine, driver: Driver
):
    jobs = batch(new(1), new(2, delay=30.0))
    with Session(db) as session, session.begin():
        rows, now = driver.jobs_insert_gathered(session, jobs, ["id", "payload", "run_at"])
    assert [payload for _, payload, _ in rows] == [{"n": 1}, {"n": 2}]
    assert rows[0][2] == now
    assert (rows[1][2] - now).total_seconds() == 30.0
    assert row(db, rows[0][0]).created_at == now


def test_jobs_insert_of_mixed_timings_keeps_their_order_values_and_one_now(
    db: Engine, driver: Driver
):
    at = datetime(2031, 2, 3, 4, 5, 6, 789000, tzinfo=timezone.utc)
    traced = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    timings: list[dict[str, Any]] = [{}, {"run_at": at}, {"delay": 30.0}, {}, {"run_at": at}]
    jobs = batch(*(new(n, **t) for n, t in enumerate(timings)), trace_context=traced)
    returning = ["id", "payload", "run_at", "trace_context"]
    with Session(db) as session, session.begin():
        rows, now = driver.jobs_insert_gathered(session, jobs, returning)
    assert [payload for _, payload, _, _ in rows] == [{"n": n} for n in range(5)]
    later = now + timedelta(seconds=30)
    assert [run_at for _, _, run_at, _ in rows] == [now, at, later, now, at]
    assert all(trace == traced for _, _, _, trace in rows)
    assert {row(db, job_id).created_at for job_id, *_ in rows} == {now}


def test_jobs_insert_of_a_cancelled_workflow_job_ends_it_at_the_statements_now(
    db: Engine, driver: Driver
):
    cancelled = new(2, workflow=True, status="cancelled", last_error="upstream failed")
    jobs = batch(new(1, workflow=True), cancelled, workflow=True)
    with Session(db) as session, session.begin():
        rows = driver.jobs_insert(session, jobs, ["id"])
    first, second = (row(db, job_id) for (job_id,) in rows)
    assert (first.status, first.finished_at) == ("pending", None)
    assert (second.status, second.last_error) == ("cancelled", "upstream failed")
    assert second.finished_at == second.created_at == first.created_at


def test_jobs_insert_loaded_returns_mapped_jobs_in_the_session(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        jobs = driver.jobs_insert_loaded(session, batch(new(1), new(2)))
        assert [job.payload for job in jobs] == [{"n": 1}, {"n": 2}]
        assert all(session.get(Job, job.id) is job for job in jobs)


def test_jobs_insert_ids_returns_ids_and_keys_and_no_mapped_object(db: Engine, driver: Driver):
    jobs = batch(new(1, idempotency_key="a"), new(2, unique_key="b"))
    with Session(db) as session, session.begin():
        rows = driver.jobs_insert_ids(session, jobs)
        assert [tuple(r[1:]) for r in rows] == [("a", None), (None, "b")]
        assert len(session.identity_map) == 0
        plain = driver.jobs_insert_ids(session, batch(new(3)), keys=False)
        assert [tuple(r[1:]) for r in plain] == [(None, None)]
    assert ids(db) == sorted([r[0] for r in rows] + [plain[0][0]])


# -- debounce and throttle -------------------------------------------------------


def test_debounce_folds_into_the_pending_job_of_its_key(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        first = driver.job_debounce(session, DebouncedJob(new(1), "cart:1", 60.0))
        assert first is not None
        first_id, first_run_at = first.id, first.run_at
    with Session(db) as session, session.begin():
        folded = driver.job_debounce(session, DebouncedJob(new(2), "cart:1", 120.0))
        assert folded is not None
        assert (folded.id, folded.payload) == (first_id, {"n": 2})
        assert folded.run_at > first_run_at
    assert ids(db) == [first_id]


def test_debounce_key_held_by_another_kind_changes_nothing(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        held = driver.job_debounce(session, DebouncedJob(new(1), "shared", 60.0))
        assert held is not None
        held_id = held.id
        other = DebouncedJob(new(2, kind="other"), "shared", 60.0)
        assert driver.job_debounce(session, other) is None
    assert row(db, held_id).payload == {"n": 1}


def test_throttle_returns_the_job_of_its_key_within_the_window(db: Engine, driver: Driver):
    with Session(db) as session, session.begin():
        assert driver.job_throttle(session, "t1", 60.0) is None  # the window is free
        columns = (("throttle_key", "t1"),)
        shape = RETURNING._replace(extra=("throttle_key",))
        inserted = driver.job_insert(session, new(columns=columns), shape)
        assert inserted is not None
    with Session(db) as session, session.begin():
        found = driver.job_throttle(session, "t1", 60.0)
        assert found is not None
        assert found.id == inserted[0]
        assert driver.job_throttle(session, "t2", 60.0) is None


# -- workflows and batches -------------------------------------------------------


def test_upstream_lock_marks_has_dependents_and_leaves_out_unknown_ids(db: Engine, driver: Driver):
    [a, b] = ids_of(db, driver, 2)
    end(db, b, "failed")
    with Session(db) as session, session.begin():
        statuses = driver.upstream_lock(session, [a, b, b + 1000])
    assert statuses == {a: "pending", b: "failed"}
    assert row(db, a).has_dependents is True


def test_edges_insert_lets_the_end_of_each_unfinished_upstream_count(db: Engine, driver: Driver):
    [up_done, up_pending] = ids_of(db, driver, 2)
    end(db, up_done)
    with Session(db) as session, session.begin():
        statuses = driver.upstream_lock(session, [up_done, up_pending])
        unfinished = sum(1 for s in statuses.values() if s == "pending")
        waiting = new(after=(up_done, up_pending), workflow=True, status="waiting")
        [(job_id,)] = driver.jobs_insert(
            session,
            batch(dataclasses.replace(waiting, waiting_for=unfinished), workflow=True),
            ["id"],
        )
        driver.edges_insert(session, [job_id, job_id], [up_done, up_pending])
    assert row(db, job_id).status == "waiting"
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_complete(conn, [job], OWNER)
        assert driver.dependents_release(conn, [(up_pending, "done")]) == [job_id]
    assert row(db, job_id).status == "pending"


def test_batch_add_makes_the_callback_wait_and_refuses_a_started_one(db: Engine, driver: Driver):
    [callback, member] = ids_of(db, driver, 2)
    with Session(db) as session, session.begin():
        driver.edges_insert(session, [callback], [member])
        assert driver.batch_add(session, callback, 1) is True
        assert driver.batch_members(session, callback, [member, member + 1000]) == {member}
    assert (row(db, callback).status, row(db, callback).waiting_for) == ("waiting", 1)
    [job] = claim(db, driver)  # the member: started, it can no longer grow
    assert job.id == member
    with Session(db) as session, session.begin():
        assert driver.batch_add(session, member, 1) is False
    assert row(db, member).waiting_for is None


def ids_of(engine: Engine, driver: Driver, n: int) -> list[int]:
    """Insert `n` plain jobs through `driver` (committed); their ids."""
    with Session(engine) as session, session.begin():
        rows = driver.jobs_insert(session, batch(*(new(i) for i in range(n))), ["id"])
    return [r[0] for r in rows]
