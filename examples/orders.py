"""The lesson's orders and invoices, with their jobs enqueued in the same transaction.

Run it::

    python examples/orders.py

It uses the server in ``DATABASE_URL`` (in a scratch database of its own, dropped
afterwards) or, without it, a throwaway PostgreSQL from this machine. It migrates,
places the lesson's orders with their jobs (an order and its jobs commit together),
shows that a rolled-back order leaves no job and that a retried request adds no
second job, and prints the jobs table. No worker runs here: the jobs wait,
``pending``, for ``sa-jobqueue worker`` (see examples/demo.py for the whole story).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from sa_jobqueue import JobContext, JobMixin, JobQueue, migration
from sa_jobqueue.testing import scratch_database, throwaway_postgres
from sqlalchemy import ForeignKey, Integer, Text, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer: Mapped[str] = mapped_column(Text)
    total_cents: Mapped[int] = mapped_column(Integer)


class Invoice(Base):
    __tablename__ = "invoices"

    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), primary_key=True)
    total_cents: Mapped[int] = mapped_column(Integer)


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)


@jobs.task("send_receipt", queue="mail", max_attempts=5)
def send_receipt(ctx: JobContext) -> None:
    """Lease mode, at-least-once: the mailer dedupes on the job's idempotency key."""
    print(f"mail receipt for order {ctx.payload['order_id']} (key {ctx.idempotency_key})")


@jobs.task("create_invoice", transactional=True)
def create_invoice(ctx: JobContext) -> None:
    """Transactional mode: the invoice and the job's ``done`` mark commit together."""
    order = ctx.session.get_one(Order, ctx.payload["order_id"])
    ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))


@jobs.task("sync_crm", queue="crm")
def sync_crm(ctx: JobContext) -> None:
    """Another consumer of the same order event."""
    print(f"crm: order {ctx.payload['order_id']}")


#: One event, one job per consumer (the lesson's fan-out).
CONSUMERS = ("send_receipt", "create_invoice", "sync_crm")


class PaymentDeclinedError(Exception):
    pass


def place_order(
    session: Session, order_id: int, customer: str, total_cents: int, kinds: tuple[str, ...]
) -> list[Job]:
    """Add an order and its jobs to the caller's transaction: they commit together.

    Each job's idempotency key names its side effect, so a retried request
    returns the jobs that exist instead of adding new ones.
    """
    session.add(Order(id=order_id, customer=customer, total_cents=total_cents))
    return jobs.enqueue_many(
        session,
        [
            {
                "kind": kind,
                "payload": {"order_id": order_id},
                "idempotency_key": f"order:{order_id}:{kind}",
            }
            for kind in kinds
        ],
    )


def jobs_table(session: Session) -> list[dict[str, Any]]:
    """Every job, in id order, as plain dicts."""
    columns = (
        "id",
        "queue",
        "kind",
        "payload",
        "status",
        "attempts",
        "max_attempts",
        "idempotency_key",
    )
    rows = session.execute(select(*(getattr(Job, c) for c in columns)).order_by(Job.id))
    return [dict(zip(columns, row, strict=True)) for row in rows]


def print_table(rows: list[dict[str, Any]]) -> None:
    header = ("id", "queue", "kind", "payload", "status", "attempts", "idempotency_key")
    lines = [
        (
            str(r["id"]),
            r["queue"],
            r["kind"],
            str(r["payload"]),
            r["status"],
            f"{r['attempts']}/{r['max_attempts']}",
            r["idempotency_key"] or "",
        )
        for r in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    for cells in [header, *lines]:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())


def main(database_url: str) -> list[dict[str, Any]]:
    """Run the example against `database_url` (an empty database); return the jobs table."""
    migration.upgrade(database_url)  # the shipped migration creates the jobs table
    engine = create_engine(database_url)
    app_tables = [Base.metadata.tables["orders"], Base.metadata.tables["invoices"]]
    Base.metadata.create_all(engine, tables=app_tables)  # the application's own tables
    try:
        # The lesson's seed: three orders, each committed with its job.
        for order_id, customer, total, kind in [
            (1, "alice", 4200, "send_receipt"),
            (2, "bob", 1500, "send_receipt"),
            (3, "carol", 9900, "create_invoice"),
        ]:
            with Session(engine) as session, session.begin():
                place_order(session, order_id, customer, total, (kind,))

        # Order 4: one event, a job per consumer, in the order's own transaction.
        with Session(engine) as session, session.begin():
            fanned = place_order(session, 4, "dave", 2500, CONSUMERS)
            print(f"order 4 placed with jobs {[job.id for job in fanned]}")

        # Order 5's payment fails: the transaction rolls back, the jobs with it.
        try:
            with Session(engine) as session, session.begin():
                place_order(session, 5, "erin", 700, CONSUMERS)
                raise PaymentDeclinedError("card declined")
        except PaymentDeclinedError:
            print("order 5 rolled back: no order, no job")

        # The client retries order 4's request: the keys return the same jobs.
        with Session(engine) as session, session.begin():
            again = jobs.enqueue(
                session, "send_receipt", {"order_id": 4}, idempotency_key="order:4:send_receipt"
            )
            print(f"retried order 4's receipt: job {again.id} again, nothing added")

        # Plain ORM works too: every default is filled in.
        with Session(engine) as session, session.begin():
            session.add(Job(kind="sync_crm", payload={"customer": "carol"}))

        with Session(engine) as session:
            rows = jobs_table(session)
        print()
        print_table(rows)
        return rows
    finally:
        engine.dispose()


if __name__ == "__main__":
    server = os.environ.get("DATABASE_URL")
    with (
        throwaway_postgres() if server is None else contextlib.nullcontext(server) as server_url,
        scratch_database(server_url, prefix="sa_jobqueue_orders") as url,
    ):
        main(url)
