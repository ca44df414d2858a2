"""The archive's tests: a jobs table with none of the archive's partitions left over."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from sa_jobqueue.ops.archive import partitions
from tests.support.models import Job


def drop_partitions(engine: Engine, model: type = Job) -> None:
    """PostgreSQL: drop each partition; MariaDB: the archive back to a plain table."""
    with engine.begin() as connection:
        found = partitions(connection, model)
        if connection.dialect.name == "postgresql":
            for partition in found:
                connection.execute(text(f'DROP TABLE "{partition.name}"'))
        elif found:
            table = f"{model.__table__.name}_archive"  # type: ignore[attr-defined]
            connection.execute(text(f"DELETE FROM {table}"))
            connection.execute(text(f"ALTER TABLE {table} REMOVE PARTITIONING"))


@pytest.fixture
def archived(committed: Engine) -> Iterator[Engine]:
    """`committed`, with no archive partition before or after the test."""
    drop_partitions(committed)
    yield committed
    drop_partitions(committed)
