"""The application models the tests use: the lesson's orders and invoices, and jobs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, Table, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sa_jobqueue import JobMixin, JobQueue


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

    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), primary_key=True)
    total_cents: Mapped[int] = mapped_column(Integer)


class Effect(Base):
    """One row per side effect a test handler performed (the oracle of the tests)."""

    __tablename__ = "effects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    note: Mapped[str] = mapped_column(Text, default="")


class Span(Base):
    """When a test handler ran, by the database clock (the flow-control tests' oracle)."""

    __tablename__ = "spans"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(Text)
    key: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


APP_TABLES: list[Table] = [Order.__table__, Invoice.__table__, Effect.__table__, Span.__table__]  # type: ignore[list-item]


def new_queue() -> JobQueue[Job]:
    return JobQueue(Job)
