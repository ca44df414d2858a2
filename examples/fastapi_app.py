"""A FastAPI application: jobs enqueued in the request's transaction, a worker in its lifespan.

Run it (``pip install 'sa-jobqueue[asyncio]' fastapi uvicorn``)::

    DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/shop uvicorn examples.fastapi_app:app

then ``curl -X POST localhost:8000/orders -H 'content-type: application/json'
-d '{"id": 4, "customer": "dave", "total_cents": 2500}'`` and
``curl localhost:8000/orders/4`` a moment later. The app creates its tables and
the jobs table at startup (a real app runs ``sa-jobqueue migrate`` or Alembic).

What runs where: the request handlers and the async job handlers share the app's
event loop and its `AsyncEngine`; the worker's claim loop, heartbeats and
listener run in threads of their own with a small sync engine (see
docs/asyncio.md). The sync handler (``sync_crm``) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel
from sa_jobqueue import JobContext, JobMixin, JobQueue
from sqlalchemy import ForeignKey, Integer, Text, select
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


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


class Receipt(Base):
    """The mailer's log: one row per receipt sent, keyed by the job's idempotency key."""

    __tablename__ = "receipts"

    idempotency_key: Mapped[str] = mapped_column(Text, primary_key=True)
    order_id: Mapped[int] = mapped_column(Integer)


class CrmSync(Base):
    __tablename__ = "crm_syncs"

    order_id: Mapped[int] = mapped_column(Integer, primary_key=True)


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
#: Set by `create_app`: the handlers' own sessions (lease mode) come from here.
sessions: async_sessionmaker[AsyncSession] | None = None
#: The sync handler's database (a thread of the worker runs it).
sync_url: str | None = None


@jobs.task("send_receipt", queue="mail", max_attempts=5)
async def send_receipt(ctx: JobContext) -> None:
    """Lease mode (at-least-once): the "mailer" dedupes on the idempotency key."""
    assert sessions is not None
    async with sessions() as session, session.begin():
        if await session.get(Receipt, ctx.idempotency_key) is None:
            session.add(Receipt(idempotency_key=ctx.idempotency_key, order_id=ctx.payload["id"]))


@jobs.task("create_invoice", transactional=True)
async def create_invoice(ctx: JobContext) -> None:
    """Transactional (exactly once): the invoice commits with the job's ``done`` mark."""
    session = ctx.async_session
    order = await session.get_one(Order, ctx.payload["id"])
    session.add(Invoice(order_id=order.id, total_cents=order.total_cents))


@jobs.task("sync_crm", queue="crm", transactional=True)
def sync_crm(ctx: JobContext) -> None:
    """A plain ``def`` handler beside the async ones: it runs in a worker thread."""
    ctx.session.merge(CrmSync(order_id=ctx.payload["id"]))


async def request_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's session; each endpoint opens its transaction with ``db.begin()``."""
    async with request.app.state.sessions() as session:
        yield session


Db = Annotated[AsyncSession, Depends(request_session)]


class OrderIn(BaseModel):
    id: int
    customer: str
    total_cents: int
    decline: bool = False  # the payment provider says no: nothing may be left behind


def create_app(database_url: str, *, concurrency: int = 8) -> FastAPI:
    """The app for `database_url` (``postgresql+asyncpg://`` or ``postgresql+psycopg://``)."""
    engine: AsyncEngine = create_async_engine(database_url, pool_size=concurrency + 2)
    session_factory = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        global sessions
        sessions = session_factory
        async with engine.begin() as conn:
            # The jobs table too: create_all makes what the shipped migration makes.
            await conn.run_sync(Base.metadata.create_all)
        worker = jobs.worker(engine, concurrency=concurrency, poll_interval=5.0)
        serving = asyncio.create_task(worker.run_async(), name="sa_jobqueue-worker")
        app.state.worker = worker
        try:
            yield
        finally:
            worker.stop()  # finish running jobs, give the others back
            await serving
            await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    app.state.sessions = session_factory

    @app.post("/orders", status_code=201)
    async def place_order(order: OrderIn, db: Db) -> dict[str, Any]:
        # The order and its jobs commit together, or (declined payment) neither does.
        async with db.begin():
            db.add(Order(id=order.id, customer=order.customer, total_cents=order.total_cents))
            placed = await jobs.aenqueue_many(
                db,
                [
                    {
                        "kind": kind,
                        "payload": {"id": order.id},
                        "idempotency_key": f"order:{order.id}:{kind}",
                    }
                    for kind in ("send_receipt", "create_invoice", "sync_crm")
                ],
            )
            job_ids = [job.id for job in placed]
            if order.decline:
                await db.rollback()
                raise HTTPException(402, "payment declined: no order, no job")
        return {"order": order.id, "jobs": job_ids}

    @app.get("/orders/{order_id}")
    async def get_order(order_id: int, db: Db) -> dict[str, Any]:
        order = await db.get(Order, order_id)
        if order is None:
            raise HTTPException(404, f"no order {order_id}")
        invoice = await db.get(Invoice, order_id)
        receipts = await db.scalars(select(Receipt).where(Receipt.order_id == order_id))
        return {
            "order": order_id,
            "invoice_cents": invoice.total_cents if invoice else None,
            "receipts": len(receipts.all()),
            "crm_synced": await db.get(CrmSync, order_id) is not None,
        }

    @app.get("/jobs/stats")
    async def job_stats(db: Db) -> list[dict[str, Any]]:
        stats = await jobs.astats(db)
        return [
            {"queue": q.queue, "pending": q.pending, "running": q.running, "done": q.done}
            for q in stats.queues
        ]

    return app


if "DATABASE_URL" in os.environ:  # `uvicorn examples.fastapi_app:app`
    logging.basicConfig(level=logging.INFO)
    app = create_app(os.environ["DATABASE_URL"])
