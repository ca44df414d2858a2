"""Periodic schedules across a rolling deploy, with real ``sa-jobqueue worker`` processes.

During a deploy, old and new workers hold two definitions of one schedule. Each tick
must still be enqueued once (following either definition), never none and never twice.
"""

from __future__ import annotations

import itertools
import signal
from datetime import datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.acceptance.schedule_workers import spawn
from tests.support.helpers import wait_for
from tests.support.models import Job

pytestmark = pytest.mark.slow
__all__ = ["spawn"]  # the fixture


def beat_ticks(engine):
    with Session(engine) as s:
        keys = s.scalars(select(Job.idempotency_key).where(Job.kind == "beat")).all()
    return [datetime.fromisoformat(str(key).split(":", 2)[2]) for key in keys]


def test_two_definitions_of_one_schedule_during_a_deploy_still_enqueue_each_tick_once(
    committed, spawn
):
    old, new = spawn("2"), spawn("3")  # the same schedule "beat": every 2 s and every 3 s
    for worker in (old, new):
        worker.wait_for_log(" started: ")
    wait_for(lambda: len(beat_ticks(committed)) >= 1, timeout=30, what="the first tick")
    first = len(beat_ticks(committed))
    # Both keep rewriting the schedule's definition; ticks must keep coming regardless.
    wait_for(lambda: len(beat_ticks(committed)) >= first + 4, timeout=30, what="four more ticks")
    for worker in (old, new):
        worker.popen.send_signal(signal.SIGTERM)
    for worker in (old, new):
        assert worker.popen.wait(30) == 0
    ticks = sorted(beat_ticks(committed))
    assert len(ticks) == len(set(ticks)), "a tick was enqueued twice"
    # Every tick is one of either definition's, and none is skipped: the next tick is
    # at most the longer interval (3 s) after the one before.
    assert all(tick.timestamp() % 2 == 0 or tick.timestamp() % 3 == 0 for tick in ticks)
    assert all((b - a).total_seconds() <= 3 for a, b in itertools.pairwise(ticks))
    enqueued = sum(w.output().count("periodic beat: enqueued job") for w in (old, new))
    assert enqueued == len(ticks)
