"""The listener's test notification (issue 11): it knows whether LISTEN hears, and
no worker mistakes another's test for a queue. `listen_url` is checked where given."""

from __future__ import annotations

import logging

import pytest

from sa_jobqueue import ConfigurationError, JobQueue
from sa_jobqueue.driver import driver_for
from sa_jobqueue.worker.listener import PROBE_PREFIX, Listener
from tests.support.helpers import wait_for
from tests.support.models import Job


def test_a_direct_listener_hears_its_own_test_notification_and_wakes_no_queue(engine, caplog):
    caplog.set_level(logging.WARNING, logger="sa_jobqueue")
    woken: tuple[list[tuple[str | None, float | None]], ...] = ([], [])

    def recorder(calls):
        return lambda queue, run_at: calls.append((queue, run_at))

    listening = driver_for(engine, Job).listening
    assert listening is not None
    listeners = [
        Listener(engine, listening, ["default", PROBE_PREFIX.strip()], recorder(woken[i]))
        for i in range(2)
    ]
    for listener in listeners:
        listener.start()
    try:
        for listener in listeners:
            wait_for(listener.hears.is_set, timeout=20, what="the listener's own test")
    finally:
        for listener in listeners:
            listener.stop()
    # Each heard both tests (its own and the other's); neither woke any queue for them.
    assert all(call == (None, None) for calls in woken for call in calls), woken
    assert all(listener.reconnects == 0 for listener in listeners)
    assert "could not send" not in caplog.text
    assert "heard nothing" not in caplog.text


def test_listen_url_is_checked_where_it_is_given(engine, database_url):
    jobs = JobQueue(Job)
    psycopg2_url = database_url.replace("postgresql+psycopg://", "postgresql+psycopg2://")
    with pytest.raises(ConfigurationError, match="listen_url must be PostgreSQL through psycopg 3"):
        jobs.worker(engine, listen_url=psycopg2_url)
    with pytest.raises(ConfigurationError, match="not a SQLAlchemy URL"):
        jobs.worker(engine, listen_url="nowhere")
    with pytest.raises(ConfigurationError, match="listen_url goes with listen=True"):
        jobs.worker(engine, listen_url=database_url, listen=False)
    assert jobs.worker(engine, listen_url=database_url).config.listen_url is not None
