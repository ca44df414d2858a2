"""The lesson's application: orders, invoices, and the jobs that follow them.

Worker processes import it: ``sa-jobqueue worker demo_app:jobs`` (run from this
directory, which the CLI puts on ``sys.path``).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from sa_jobqueue import Discard, JobContext, JobMixin, JobQueue
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
    __tablename__ = "invoices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"))
    total_cents: Mapped[int] = mapped_column(Integer)


jobs = JobQueue(Job)
LEASE = timedelta(seconds=3)  # short, so the demo's crash recovers in seconds
QUICK = Backoff(base=0.5, factor=2, cap=5, jitter=0.1)


def _stall(ctx: JobContext) -> None:
    """Demo hook: on its first attempt, a job with ``"stall": true`` hangs (to be killed)."""
    if ctx.payload.get("stall") and ctx.attempt == 1:
        time.sleep(300)


@jobs.task("send_receipt", queue="mail", lease=LEASE, backoff=QUICK)
def send_receipt(ctx: JobContext) -> None:
    """Lease mode (at-least-once): the mailer dedupes on the idempotency key."""
    log.info("mailer: receipt for order %s (key %s)", ctx.payload["order_id"], ctx.idempotency_key)


@jobs.task("render_pdf", queue="slow", lease=LEASE, backoff=QUICK)
def render_pdf(ctx: JobContext) -> None:
    """A long lease-mode job; the demo kills its worker in the middle of it."""
    _stall(ctx)
    log.info("rendered the PDF of order %s", ctx.payload["order_id"])


@jobs.task("sync_crm", lease=LEASE, backoff=QUICK, max_attempts=5)
def sync_crm(ctx: JobContext) -> None:
    """Flaky: the CRM times out twice, then accepts."""
    if ctx.attempt < 3:
        raise TimeoutError(f"CRM timed out (attempt {ctx.attempt})")
    log.info("CRM updated for order %s", ctx.payload["order_id"])


@jobs.task("import_feed", lease=LEASE, backoff=QUICK, max_attempts=3)
def import_feed(ctx: JobContext) -> None:
    """Poison: the payload can never be parsed; after 3 attempts it is dead-lettered."""
    if ctx.payload.get("hopeless"):
        raise Discard("feed format is not supported")
    raise ValueError(f"cannot parse feed {ctx.payload.get('url')!r}")


@jobs.task("create_invoice", queue="billing", lease=LEASE, backoff=QUICK, transactional=True)
def create_invoice(ctx: JobContext) -> None:
    """Transactional mode: the invoice and the job's ``done`` mark commit together."""
    order = ctx.session.get_one(Order, ctx.payload["order_id"])
    # No "already invoiced?" check: exactly-once comes from the shared transaction.
    ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))
    ctx.session.flush()
    _stall(ctx)  # a crash here rolls the invoice back with the claim's work
