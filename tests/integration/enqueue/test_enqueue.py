"""enqueue / enqueue_many against a real PostgreSQL: defaults, atomicity, batching,
fan-out and idempotency keys, including 16 transactions racing on one key."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, func, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, Status
from tests.support.models import Job, Order


def _queue() -> JobQueue[Job]:
    jobs = JobQueue(Job)
    jobs.task("send_receipt", queue="mail", max_attempts=5)(lambda ctx: None)
    jobs.task("create_invoice", transactional=True)(lambda ctx: None)
    jobs.task("sync_crm", queue="crm")(lambda ctx: None)
    return jobs


def _rows(engine: Engine) -> list[dict[str, Any]]:
    """Every job, read on a connection of its own (sees committed rows only)."""
    with engine.connect() as connection:
        result = connection.execute(select(Job.__table__).order_by(Job.id))
        return [dict(row._mapping) for row in result]


@contextmanager
def _statements(connection: Connection) -> Iterator[list[str]]:
    """Record every statement sent on `connection` inside the block."""
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append(statement)

    event.listen(connection, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(connection, "before_cursor_execute", record)


def _now(session: Session) -> datetime:
    """The transaction's now(): what the database stamps this transaction's rows with."""
    now: datetime = session.execute(select(func.now())).scalar_one()
    return now


# --- defaults -------------------------------------------------------------------


def test_plain_orm_add_fills_every_default(session):
    session.add(Job(kind="create_invoice", payload={"order_id": 4}))
    session.add(Job(kind="no_payload"))
    session.flush()
    now = _now(session)
    first, second = session.scalars(select(Job).order_by(Job.id)).all()
    assert isinstance(first.id, int)
    assert second.id > first.id
    assert first.payload == {"order_id": 4}
    assert second.payload == {}
    for job in (first, second):
        assert job.queue == "default"
        assert job.status == Status.PENDING
        assert job.priority == 0
        assert job.attempts == 0
        assert job.max_attempts == 20
        assert job.run_at == now
        assert job.created_at == now
        assert job.updated_at == now
        assert job.locked_until is None
        assert job.locked_by is None
        assert job.idempotency_key is None
        assert job.last_error is None
        assert job.finished_at is None


def test_enqueue_returns_a_loaded_row_in_one_statement(session):
    jobs = JobQueue(Job)
    session.execute(select(1))  # begin (and the fixture's SAVEPOINT) before counting
    with _statements(session.connection()) as sent:
        job = jobs.enqueue(session, "resize_image", {"path": "a.png"})
    assert len(sent) == 1
    assert sent[0].lstrip().startswith("INSERT INTO jobs")
    now = _now(session)
    assert (job.kind, job.queue, job.payload) == ("resize_image", "default", {"path": "a.png"})
    assert (job.status, job.priority, job.attempts, job.max_attempts) == ("pending", 0, 0, 20)
    assert job.run_at == now
    assert job.created_at == now
    assert job.idempotency_key is None
    assert session.get(Job, job.id) is job  # in the caller's session, not a copy


def test_run_at_delay_and_priority_are_stored_as_given(session):
    jobs = JobQueue(Job)
    when = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=-5)))
    at = jobs.enqueue(session, "remind", run_at=when, priority=-3)
    later = jobs.enqueue(session, "remind", delay=timedelta(minutes=90), priority=32767)
    seconds = jobs.enqueue(session, "remind", delay=2.5)
    now = _now(session)
    assert at.run_at == when
    assert at.priority == -3
    assert later.run_at == now + timedelta(minutes=90)
    assert later.priority == 32767
    assert seconds.run_at == now + timedelta(seconds=2.5)


def test_task_options_are_written_into_the_row(session):
    jobs = _queue()
    receipt = jobs.enqueue(session, "send_receipt", {"order_id": 1})
    invoice = jobs.enqueue(session, "create_invoice", {"order_id": 1})
    unknown = jobs.enqueue(session, "not_registered")
    assert (receipt.queue, receipt.max_attempts) == ("mail", 5)
    assert (invoice.queue, invoice.max_attempts) == ("default", 20)
    assert (unknown.queue, unknown.max_attempts) == ("default", 20)
    session.expire_all()  # read back what the database holds, not the Python objects
    assert (session.get(Job, receipt.id).queue, session.get(Job, receipt.id).max_attempts) == (
        "mail",
        5,
    )


def test_callers_values_win_over_task_options(session):
    jobs = _queue()
    single = jobs.enqueue(session, "send_receipt", queue="urgent", max_attempts=2)
    batch = jobs.enqueue_many(
        session,
        [
            {"kind": "send_receipt", "queue": "bulk"},
            {"kind": "send_receipt", "max_attempts": 9},
            ("send_receipt", {}),
        ],
    )
    assert (single.queue, single.max_attempts) == ("urgent", 2)
    assert [(j.queue, j.max_attempts) for j in batch] == [("bulk", 5), ("mail", 9), ("mail", 5)]


# --- a rolled-back enqueue never existed; no worker sees a job before its COMMIT


def test_rollback_leaves_no_job(committed):
    jobs = _queue()

    def place_order() -> None:
        with Session(committed) as session, session.begin():
            session.add(Order(id=4, customer="dave", total_cents=2500))
            jobs.enqueue(session, "send_receipt", {"order_id": 4})
            jobs.enqueue_many(session, [("create_invoice", {"order_id": 4})])
            session.flush()  # the rows reached the database; the rollback must undo them
            raise RuntimeError("payment declined")

    with pytest.raises(RuntimeError, match="payment declined"):
        place_order()
    assert _rows(committed) == []
    with committed.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(Order)) == 0


def test_job_is_invisible_to_other_connections_until_commit(committed):
    jobs = _queue()
    with Session(committed) as session:
        session.add(Order(id=4, customer="dave", total_cents=2500))
        job = jobs.enqueue(session, "send_receipt", {"order_id": 4})
        assert job.id is not None  # inserted in the caller's open transaction
        # What a worker's claim query would see from its own connection:
        with committed.connect() as worker:
            due = select(Job.id).where(Job.status == "pending").with_for_update(skip_locked=True)
            assert worker.execute(due).all() == []
            assert worker.scalar(select(func.count()).select_from(Job)) == 0
        job_id = job.id
        session.commit()
    assert [(r["id"], r["kind"], r["payload"]) for r in _rows(committed)] == [
        (job_id, "send_receipt", {"order_id": 4})
    ]


def test_enqueue_never_commits_or_ends_the_callers_transaction(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        transaction = session.get_transaction()
        jobs.enqueue(session, "send_receipt", {"order_id": 1})
        jobs.enqueue_many(session, [("sync_crm", {}), ("create_invoice", {})])
        assert session.get_transaction() is transaction
        assert transaction is not None
        assert transaction.is_active
        assert _rows(committed) == []
    assert len(_rows(committed)) == 3


# --- batches ----------------------------------------------------------------------


def test_enqueue_many_is_one_statement_and_keeps_the_given_order(session):
    jobs = _queue()
    kinds = ["zeta", "alpha", "send_receipt", "mid", "create_invoice"] * 40
    items: list[Any] = [
        {"kind": kind, "payload": {"i": i}, "priority": (i * 7) % 5 - 2}
        if i % 3
        else (kind, {"i": i})
        for i, kind in enumerate(kinds)
    ]
    session.execute(select(1))
    with _statements(session.connection()) as sent:
        rows = jobs.enqueue_many(session, items)
    assert len(sent) == 1
    assert [job.payload["i"] for job in rows] == list(range(200))
    assert [job.kind for job in rows] == kinds
    assert [job.id for job in rows] == sorted(job.id for job in rows)  # FIFO within a batch
    assert len({job.id for job in rows}) == 200
    assert session.scalar(select(func.count()).select_from(Job)) == 200


RECEIPT = "order:1:receipt"


def test_enqueue_many_with_existing_keys_takes_one_more_statement(session):
    jobs = _queue()
    old = jobs.enqueue(session, "send_receipt", {"v": "old"}, idempotency_key=RECEIPT)
    with _statements(session.connection()) as sent:
        rows = jobs.enqueue_many(
            session,
            [
                ("sync_crm", {"n": 0}),
                {
                    "kind": "send_receipt",
                    "payload": {"v": "new"},
                    "idempotency_key": "order:1:receipt",
                },
                {
                    "kind": "create_invoice",
                    "payload": {"n": 2},
                    "idempotency_key": "order:1:invoice",
                },
                ("sync_crm", {"n": 3}),
            ],
        )
    assert len(sent) == 2  # the INSERT, then one SELECT for the keys that existed
    assert rows[1] is old
    assert old.payload == {"v": "old"}
    assert [r.payload for r in rows] == [{"n": 0}, {"v": "old"}, {"n": 2}, {"n": 3}]
    assert session.scalar(select(func.count()).select_from(Job)) == 4


def test_enqueue_many_of_nothing_sends_nothing(session):
    session.execute(select(1))
    with _statements(session.connection()) as sent:
        assert _queue().enqueue_many(session, []) == []
    assert sent == []


def test_fan_out_is_one_call_with_one_independent_job_per_consumer(committed):
    jobs = _queue()
    consumers = ["send_receipt", "create_invoice", "sync_crm"]
    event_payload = {"order_id": 4}
    with Session(committed) as session, session.begin():
        session.add(Order(id=4, customer="dave", total_cents=2500))
        fanned = jobs.enqueue_many(
            session,
            [
                {"kind": kind, "payload": event_payload, "idempotency_key": f"order:4:{kind}"}
                for kind in consumers
            ],
        )
        ids = [job.id for job in fanned]
    rows = {r["id"]: r for r in _rows(committed)}
    assert [(rows[i]["kind"], rows[i]["queue"]) for i in ids] == [
        ("send_receipt", "mail"),
        ("create_invoice", "default"),
        ("sync_crm", "crm"),
    ]
    assert all(r["payload"] == event_payload for r in rows.values())
    assert all(r["status"] == "pending" for r in rows.values())
    # One copy fails on its own: the others are untouched.
    with committed.begin() as connection:
        connection.execute(update(Job).where(Job.id == ids[2]).values(status="failed"))
    # Re-publishing the event (a retried request) adds nothing.
    with Session(committed) as session, session.begin():
        again = jobs.enqueue_many(
            session,
            [
                {"kind": kind, "payload": event_payload, "idempotency_key": f"order:4:{kind}"}
                for kind in consumers
            ],
        )
        assert [job.id for job in again] == ids
    statuses = {r["id"]: r["status"] for r in _rows(committed)}
    assert [statuses[i] for i in ids] == ["pending", "pending", "failed"]


# --- idempotency keys: one row per key, and the caller gets it back --------------


def test_existing_key_returns_the_existing_row_unchanged(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        first = jobs.enqueue(
            session, "send_receipt", {"order_id": 4}, idempotency_key="order:4:receipt"
        )
        first_id = first.id
    before = _rows(committed)
    with Session(committed) as session, session.begin():
        session.add(Order(id=5, customer="erin", total_cents=100))
        again = jobs.enqueue(
            session,
            "send_receipt",
            {"order_id": 999},
            queue="other",
            priority=7,
            delay=3600,
            max_attempts=1,
            idempotency_key="order:4:receipt",
        )
        assert again.id == first_id
        assert again.payload == {"order_id": 4}
        assert (again.queue, again.priority, again.max_attempts) == ("mail", 0, 5)
    assert _rows(committed) == before  # every column, updated_at included
    with committed.connect() as connection:  # the caller's other work committed
        assert connection.scalar(select(func.count()).select_from(Order)) == 1


def test_key_of_a_finished_job_still_returns_that_job(committed):
    """The key names the side effect: once done, enqueuing it again must not redo it."""
    jobs = _queue()
    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "send_receipt", idempotency_key="order:7:receipt").id
    with committed.begin() as connection:
        connection.execute(
            update(Job).where(Job.id == job_id).values(status="done", finished_at=func.now())
        )
    with Session(committed) as session, session.begin():
        again = jobs.enqueue(session, "send_receipt", idempotency_key="order:7:receipt")
        assert (again.id, again.status) == (job_id, "done")
    assert len(_rows(committed)) == 1


def test_same_key_twice_in_one_uncommitted_transaction(session):
    jobs = _queue()
    first = jobs.enqueue(session, "send_receipt", {"v": 1}, idempotency_key="k")
    second = jobs.enqueue(session, "send_receipt", {"v": 2}, idempotency_key="k")
    assert second is first
    assert first.payload == {"v": 1}
    assert session.scalar(select(func.count()).select_from(Job)) == 1


def test_duplicate_key_within_one_batch_keeps_the_first(session):
    jobs = _queue()
    session.execute(select(1))
    with _statements(session.connection()) as sent:
        rows = jobs.enqueue_many(
            session,
            [
                {"kind": "send_receipt", "payload": {"v": 1}, "idempotency_key": "dup"},
                ("sync_crm", {"v": "no key"}),
                {"kind": "create_invoice", "payload": {"v": 2}, "idempotency_key": "dup"},
                {"kind": "send_receipt", "payload": {"v": 3}, "idempotency_key": "dup"},
            ],
        )
    assert len(sent) == 1  # the duplicate resolves against this batch's own row
    assert rows[0] is rows[2] is rows[3]
    assert rows[0].payload == {"v": 1}
    assert rows[0].kind == "send_receipt"
    assert rows[1].payload == {"v": "no key"}
    assert session.scalar(select(func.count()).select_from(Job)) == 2


def test_keys_are_inserted_in_key_order_but_returned_in_the_given_order(session):
    jobs = _queue()
    keys = ["c", "a", None, "b", None, "a"]
    rows = jobs.enqueue_many(
        session,
        [{"kind": "k", "payload": {"i": i}, "idempotency_key": key} for i, key in enumerate(keys)],
    )
    assert [job.payload["i"] for job in rows] == [0, 1, 2, 3, 4, 1]
    assert [job.idempotency_key for job in rows] == [*keys[:5], "a"]
    by_id = sorted(rows[:5], key=lambda job: job.id)
    # Unkeyed rows keep their slots (2 and 4); the keyed slots 0, 1, 3 (and the
    # duplicate's 5) are filled in key order: a, a (skipped), b, c.
    assert [job.idempotency_key for job in by_id] == ["a", None, "b", None, "c"]


def _race(engine: Engine, threads: int, work) -> list[Any]:
    """Run `work(n, barrier)` in `threads` threads; return results; re-raise any error."""
    barrier = threading.Barrier(threads, timeout=30)
    results: list[Any] = [None] * threads
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            results[n] = work(n, barrier)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
            barrier.abort()

    pool = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in pool)
    if errors:
        raise errors[0]
    return results


def test_sixteen_transactions_racing_on_one_key_get_one_row(committed):
    jobs = _queue()

    def enqueue(n: int, barrier: threading.Barrier) -> int:
        with Session(committed) as session, session.begin():
            session.add(Order(id=n, customer=f"c{n}", total_cents=n))
            session.flush()  # each transaction is open and has written before the race
            barrier.wait()
            job = jobs.enqueue(session, "send_receipt", {"winner": n}, idempotency_key="race")
            return job.id

    for _ in range(3):  # a few rounds: the interleavings differ each time
        ids = _race(committed, 16, enqueue)
        rows = _rows(committed)
        assert len(rows) == 1
        assert set(ids) == {rows[0]["id"]}
        assert rows[0]["idempotency_key"] == "race"
        with committed.connect() as connection:
            # Nobody's other work was lost: no IntegrityError, no aborted transaction.
            assert connection.scalar(select(func.count()).select_from(Order)) == 16
        with committed.begin() as connection:
            connection.execute(text("TRUNCATE jobs, orders RESTART IDENTITY CASCADE"))


def test_concurrent_batches_with_keys_in_opposite_orders_do_not_deadlock(committed):
    jobs = _queue()
    keys = [f"order:{i}:receipt" for i in range(40)]

    def enqueue(n: int, barrier: threading.Barrier) -> dict[str, int]:
        mine = keys if n % 2 else list(reversed(keys))
        with Session(committed) as session, session.begin():
            session.add(Order(id=n, customer=f"c{n}", total_cents=n))
            session.flush()
            barrier.wait()
            rows = jobs.enqueue_many(
                session, [{"kind": "send_receipt", "idempotency_key": key} for key in mine]
            )
            assert [job.idempotency_key for job in rows] == mine
            return {str(job.idempotency_key): job.id for job in rows}

    for _ in range(3):
        results = _race(committed, 6, enqueue)
        rows = _rows(committed)
        assert len(rows) == 40
        expected = {r["idempotency_key"]: r["id"] for r in rows}
        assert all(result == expected for result in results)
        with committed.connect() as connection:
            assert connection.scalar(select(func.count()).select_from(Order)) == 6
        with committed.begin() as connection:
            connection.execute(text("TRUNCATE jobs, orders RESTART IDENTITY CASCADE"))


def test_a_session_bound_per_mapper_enqueues_every_way(committed):
    # No `Session.bind`: the driver is chosen by the bind of the jobs model.
    jobs = JobQueue(Job)
    with Session(binds={Job: committed, Order: committed}) as session, session.begin():
        first = jobs.enqueue(session, "send_receipt", {"n": 1})
        jobs.enqueue_many(session, [("send_receipt", {"n": 2})])
        jobs.enqueue(session, "send_receipt", {"n": 3}, after=[first])
        jobs.enqueue(session, "send_receipt", {"n": 4}, throttle=("t", timedelta(seconds=5)))
        jobs.enqueue(session, "send_receipt", {"n": 5}, debounce=("d", timedelta(seconds=5)))
        jobs.enqueue(session, "send_receipt", {"n": 6}, idempotency_key="k")
        jobs.enqueue(session, "send_receipt", {"n": 7}, idempotency_key="k")  # finds n=6
    assert sorted(r["payload"]["n"] for r in _rows(committed)) == [1, 2, 3, 4, 5, 6]
