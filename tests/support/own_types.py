"""A jobs model with one own column of each common type (issue 41), and its parent table.

What an application adds to its jobs table, as Alembic, Flask-Migrate or ``create_all``
would create it: the worker's start-up check must accept it, enqueue must fill it.
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    ARRAY,
    JSON,
    Boolean,
    Date,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    Numeric,
    String,
    Text,
    Uuid,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sa_jobqueue import JobMixin


class TypedBase(DeclarativeBase):
    pass


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class TypedUser(TypedBase):
    __tablename__ = "typed_users"

    name: Mapped[str] = mapped_column(String(36), primary_key=True)


class OwnTypesJob(JobMixin, TypedBase):
    __tablename__ = "own_types_jobs"

    task_id: Mapped[str | None] = mapped_column(String(36))
    note: Mapped[str | None] = mapped_column(Text)
    amount: Mapped[Decimal | None] = mapped_column(Numeric(10, 2))
    ratio: Mapped[float | None] = mapped_column(Float)
    complete: Mapped[bool | None] = mapped_column(Boolean)
    day: Mapped[dt.date | None] = mapped_column(Date)
    naive_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    aware_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    request_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    colour: Mapped[Colour | None] = mapped_column(Enum(Colour, name="own_types_colour"))
    extra: Mapped[Any] = mapped_column(JSON, nullable=True)
    tags: Mapped[list[int] | None] = mapped_column(ARRAY(Integer))
    blob: Mapped[bytes | None] = mapped_column(LargeBinary)
    user_name: Mapped[str | None] = mapped_column(ForeignKey("typed_users.name"))


#: A value for each own column, as it reads back.
VALUES: dict[str, Any] = {
    "task_id": "0b5d3c4e-0000-4000-8000-000000000036",
    "note": "export posts",
    "amount": Decimal("12.50"),
    "ratio": 0.25,
    "complete": True,
    "day": dt.date(2026, 12, 4),
    "naive_at": dt.datetime(2026, 12, 4, 9, 30),
    "aware_at": dt.datetime(2026, 12, 4, 9, 30, tzinfo=dt.timezone.utc),
    "request_id": uuid.UUID("6f1c1b8e-0000-4000-8000-000000000001"),
    "colour": Colour.BLUE,
    "extra": {"trace": [1, "two"]},
    "tags": [1, 2, 3],
    "blob": b"\x00\x01binary",
    "user_name": "susan",
}
