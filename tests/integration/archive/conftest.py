"""The archive's tests: a jobs table with none of the archive's partitions left over."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from sa_jobqueue.ops.archive import partitions
from tests.support.models import Job


def drop_partitions(engine: Engine, model: type = Job) -> None:
    with engine.begin() as connection:
        for found in partitions(connection, model):
            connection.execute(text(f'DROP TABLE "{found.name}"'))


@pytest.fixture
def archived(committed: Engine) -> Iterator[Engine]:
    """`committed`, with no archive partition before or after the test."""
    drop_partitions(committed)
    yield committed
    drop_partitions(committed)
