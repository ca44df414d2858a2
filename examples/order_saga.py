"""An order saga with durable steps: charge, wait for the warehouse, ship, then a reminder.

Run it::

    python examples/order_saga.py

It uses the server in ``DATABASE_URL`` (in a scratch database of its own, dropped
afterwards) or, without it, a throwaway PostgreSQL from this machine. One job,
``fulfil_order``, carries the whole saga (docs/durable.md):

* ``charge`` is a step: the card is charged once, however many times the handler
  runs again (after a crash, a retry, or each time it resumes from a park);
* the job then waits for the warehouse's ``packed`` signal, parked meanwhile (pending,
  no worker slot held). If the signal does not come within ``REMIND_AFTER``, the wait
  returns None: the handler reminds the warehouse (a step) and waits again;
* ``ship`` is a step with the parcel the signal carried;
* a durable sleep of ``REVIEW_DELAY`` (the row's ``run_at``, on the database clock),
  then a review request, also a step.

The script plays the warehouse (it signals late, so the reminder goes out), runs a real
worker in a thread, and waits for the job's end with ``jobs.wait``. It prints what
happened, in order: the handler starts four times (the first run, after the wait's
timeout, after the signal, after the sleep), and each step's line appears once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from datetime import timedelta
from typing import Any

from sa_jobqueue import JobContext, JobMixin, JobQueue, migration
from sa_jobqueue.testing import scratch_database, throwaway_postgres
from sqlalchemy import Engine, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Session

#: How long the saga waits for the warehouse before it sends a reminder.
REMIND_AFTER = timedelta(seconds=1)
#: How long after shipping it asks for a review (days in a shop; a second here).
REVIEW_DELAY = timedelta(seconds=1)


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
log: list[str] = []


def charge_card(order_id: int, key: str) -> dict[str, Any]:
    """The payment provider's call: keyed, so even a crash inside it charges once."""
    log.append(f"charged order {order_id} (key {key})")
    return {"charge": f"ch_{order_id}"}


def remind_warehouse(order_id: int) -> None:
    log.append(f"reminded the warehouse about order {order_id}")


def ship(order_id: int, parcel: str) -> dict[str, Any]:
    log.append(f"shipped order {order_id} as parcel {parcel}")
    return {"parcel": parcel}


def ask_for_review(order_id: int) -> None:
    log.append(f"asked for a review of order {order_id}")


@jobs.task("fulfil_order")
def fulfil_order(ctx: JobContext) -> dict[str, Any]:
    # Code outside steps runs again on every resume: keep it free of side effects
    # (this line only shows that it does).
    log.append("fulfil_order starts")
    order_id = ctx.payload["order_id"]
    charge = ctx.step("charge", charge_card, order_id, ctx.idempotency_key)
    packed = ctx.wait_for_signal("packed", timeout=REMIND_AFTER)
    if packed is None:  # timed out: the payload of a real signal is never None here
        ctx.step("remind", remind_warehouse, order_id)
        packed = ctx.wait_for_signal("packed_after_reminder")
    shipped = ctx.step("ship", ship, order_id, packed["parcel"])
    ctx.sleep("before_review", REVIEW_DELAY)
    ctx.step("review", ask_for_review, order_id)
    return {**charge, **shipped}


def status_of(engine: Engine, job_id: int) -> str:
    with Session(engine) as session:
        return session.scalars(select(Job.status).where(Job.id == job_id)).one()


def main(url: str) -> list[str]:
    """Migrate, place one order, run a worker, play the warehouse; return what happened."""
    log.clear()
    engine = create_engine(url)
    worker = jobs.worker(engine, concurrency=2, poll_interval=0.2)
    runner = threading.Thread(target=worker.run, daemon=True)
    try:
        migration.upgrade(url)
        with Session(engine) as session, session.begin():
            job_id = jobs.enqueue(session, "fulfil_order", {"order_id": 7}).id
        runner.start()
        # The warehouse answers only once reminded, and the saga is parked again by then.
        while (
            "reminded the warehouse about order 7" not in log
            or status_of(engine, job_id) != "pending"
        ):
            threading.Event().wait(0.05)
        with Session(engine) as session, session.begin():
            jobs.signal(session, job_id, "packed_after_reminder", {"parcel": "PX-7"})
        job = jobs.wait(engine, job_id, timeout=60)
        log.append(f"job {job.id} {job.status}: {job.result}")
        return list(log)
    finally:
        worker.stop()
        runner.join(30)
        engine.dispose()


if __name__ == "__main__":
    with contextlib.ExitStack() as stack:
        server = os.environ.get("DATABASE_URL") or stack.enter_context(throwaway_postgres())
        database = stack.enter_context(scratch_database(server, prefix="order_saga"))
        for line in main(database):
            print(line)
