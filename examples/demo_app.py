"""The lesson's application: orders, invoices, and the jobs that follow them.

Worker processes import it: ``sa-jobqueue worker demo_app:jobs`` (run from this
directory, which the CLI puts on ``sys.path``). ``make demo`` (examples/demo.py)
plays the lesson with it; a worker started with ``DEMO_HANG_IN_INVOICE=1`` in its
environment hangs inside the invoice's transaction on attempt 1, so that the demo
can ``kill -9`` it there.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import timedelta

from sa_jobqueue import JobContext, JobMixin, JobQueue
from sa_jobqueue.retry import Backoff
from sqlalchemy import ForeignKey, Integer, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

log = logging.getLogger("demo_app")


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer: Mapped[str] = mapped_column(Text)
    total_cents: Mapped[int] = mapped_column(Integer)


class Invoice(Base):
    """An invoice. Unlike the lesson's table, nothing here forbids two invoices for one
    order: exactly-once has to come from the transaction, not from a constraint."""

    __tablename__ = "invoices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"))
    total_cents: Mapped[int] = mapped_column(Integer)


jobs = JobQueue(Job)
LEASE = timedelta(seconds=3)  # short, so that the demo's crash recovers in seconds
QUICK = Backoff(base=0.5, factor=2, cap=5, jitter=0.1)  # 0.5 s, 1 s, 2 s... (the lesson: 2, 4, 8)
MAILER_SECONDS = 1.0  # the mailer takes a second: long enough to watch a receipt run


@jobs.task("send_receipt", queue="mail", lease=LEASE, backoff=QUICK)
def send_receipt(ctx: JobContext) -> None:
    """Lease mode (at-least-once): the mailer dedupes on the idempotency key."""
    time.sleep(MAILER_SECONDS)
    log.info("mailer: receipt for order %s (key %s)", ctx.payload["order_id"], ctx.idempotency_key)


@jobs.task("create_invoice", queue="billing", lease=LEASE, backoff=QUICK, transactional=True)
def create_invoice(ctx: JobContext) -> None:
    """Transactional mode: the invoice and the job's ``done`` mark commit together."""
    order = ctx.session.get_one(Order, ctx.payload["order_id"])
    # No "already invoiced?" check: exactly-once comes from the shared transaction.
    ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))
    ctx.session.flush()
    if os.environ.get("DEMO_HANG_IN_INVOICE") and ctx.attempt == 1:
        log.info("invoice of order %s written, not committed yet: hanging", order.id)
        time.sleep(300)  # the demo kills this worker here, before the COMMIT


@jobs.task("sync_crm", lease=LEASE, backoff=QUICK)
def sync_crm(ctx: JobContext) -> None:
    """Flaky: the CRM times out on the first attempt, then accepts."""
    if ctx.attempt == 1:
        raise TimeoutError("CRM timed out (attempt 1)")
    log.info("CRM updated for %s", ctx.payload)


@jobs.task("render_pdf", queue="slow", lease=timedelta(seconds=2), backoff=QUICK)
def render_pdf(ctx: JobContext) -> None:
    """Longer than its 2 s lease: the worker's heartbeats extend the lease while it runs."""
    log.info("rendering the PDF of order %s", ctx.payload["order_id"])
    time.sleep(3)
    log.info("rendered the PDF of order %s", ctx.payload["order_id"])


@jobs.task("import_feed", lease=LEASE, backoff=QUICK, max_attempts=3)
def import_feed(ctx: JobContext) -> None:
    """Poison: the payload can never be parsed; after 3 attempts it is dead-lettered."""
    raise ValueError(f"cannot parse feed {ctx.payload.get('url')!r}")
