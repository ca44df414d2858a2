"""A worker says once, in its log, when its engine's pool is smaller than it uses."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.worker.pool_watch import PoolWatch
from tests.support.models import Job

CONCURRENCY = 4


class _Heard(logging.Handler):
    """Sets `heard` at the pool's warning (the handlers wait for it, not for a time)."""

    def __init__(self) -> None:
        super().__init__()
        self.heard = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "engine's pool keeps" in record.getMessage():
            self.messages.append(record.getMessage())
            self.heard.set()


@pytest.fixture
def heard() -> Iterator[_Heard]:
    handler = _Heard()
    logger = logging.getLogger("sa_jobqueue.worker")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def _small(committed: Engine, pool_size: int) -> Engine:
    return create_engine(committed.url, pool_size=pool_size, max_overflow=20)


def test_a_worker_whose_handlers_hold_more_connections_than_the_pool_keeps_says_so_once(
    committed, heard
):
    engine = _small(committed, pool_size=2)
    jobs = JobQueue(Job)

    @jobs.task("hold", transactional=True, max_attempts=1)
    def hold(ctx: JobContext) -> None:
        ctx.session.connection()  # each running handler holds a connection of the pool
        assert heard.heard.wait(20), "no warning while 4 handlers held connections of 2"

    with Session(committed) as session, session.begin():
        jobs.enqueue_many(session, [("hold", {})] * (2 * CONCURRENCY))
    try:
        worker = jobs.worker(engine, concurrency=CONCURRENCY, listen=False)
        assert worker.drain() == 2 * CONCURRENCY
    finally:
        engine.dispose()
    (message,) = heard.messages  # once, though the pool stayed past its size
    assert "keeps 2 connections" in message
    assert f"pool_size={CONCURRENCY + 4}" in message


def test_the_watch_is_quiet_while_the_pool_holds_what_is_open(committed, caplog):
    engine = _small(committed, pool_size=3)
    watch = PoolWatch(engine, CONCURRENCY)
    try:
        with engine.connect(), engine.connect(), engine.connect():
            assert watch.check() is False  # 3 open, 3 kept
            with engine.connect(), caplog.at_level(logging.WARNING, logger="sa_jobqueue.worker"):
                assert watch.check() is True  # a 4th: opened past the size
                assert watch.check() is False  # said once
        assert "keeps 3 connections but 4 are open now" in caplog.text
    finally:
        engine.dispose()


def test_a_pool_of_concurrency_plus_four_may_open_more_on_demand_unwarned(committed, caplog):
    engine = _small(committed, pool_size=CONCURRENCY + 4)  # the CLI's size, with overflow
    watch = PoolWatch(engine, CONCURRENCY)
    try:
        opened = [engine.connect() for _ in range(CONCURRENCY + 6)]
        with caplog.at_level(logging.WARNING, logger="sa_jobqueue.worker"):
            assert watch.check() is False
        for conn in opened:
            conn.close()
        assert "engine's pool keeps" not in caplog.text
    finally:
        engine.dispose()
