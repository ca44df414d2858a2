"""What the revision upgrade tests share: a scratch database of their own, and its engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool

from sa_jobqueue.testing import scratch_database


@pytest.fixture
def scratch(server_url: str) -> Iterator[tuple[str, Engine]]:
    """A fresh database's URL and an engine on it (no pool kept), dropped afterwards."""
    with scratch_database(server_url, prefix="sa_jobqueue_revision") as url:
        engine = create_engine(url, poolclass=NullPool)
        try:
            yield url, engine
        finally:
            engine.dispose()
