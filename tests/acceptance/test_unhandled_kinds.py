"""A worker without a handler for a kind leaves that kind's jobs to workers that have one."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.acceptance.workers import Spawner, spawn
from tests.support.apps.hardening import jobs
from tests.support.helpers import wait_for
from tests.support.models import Job

__all__ = ["spawn"]
pytestmark = pytest.mark.slow
APP = "tests.support.apps.hardening:jobs"


def _enqueue(engine, kind, n, **options):
    with Session(engine) as s, s.begin():
        return [jobs.enqueue(s, kind, {"i": i}, **options).id for i in range(n)]


def _rows(engine, ids):
    with Session(engine) as s:
        found = s.scalars(select(Job).where(Job.id.in_(ids)))
        return {j.id: (j.status, j.attempts, j.last_error) for j in found}


def _skipped(engine) -> list[tuple[str, str, int, str]]:
    with Session(engine) as s:
        return [(k.queue, k.kind, k.due, k.reason) for k in jobs.stats(s).passed_over]


def _all_done(engine, ids: list[int]) -> bool:
    return {r[0] for r in _rows(engine, ids).values()} == {"done"}


def test_old_worker_leaves_a_kind_it_has_no_handler_for_without_using_an_attempt(
    committed, database_url, spawn: Spawner
):
    old = spawn("tests.support.apps.hardening:old_jobs", "--concurrency", "2")
    new = _enqueue(committed, "new_kind", 5, max_attempts=2)
    # The worker registry names the kind at once, before any claim has passed it by.
    wait_for(
        lambda: _skipped(committed) == [("default", "new_kind", 5, "no live worker")],
        what="stats to name the kind no live worker handles",
    )
    # Enqueued after the new kind's jobs, so behind them in claim order: once these
    # are done, every claim round of the old worker has passed the new jobs by.
    for _ in range(3):
        known = _enqueue(committed, "tx_effect", 10)
        wait_for(partial(_all_done, committed, known), what="the old worker's jobs")
    assert _rows(committed, new) == {i: ("pending", 0, None) for i in new}
    assert "no handler registered" not in old.output()
    # stats names the kind the claims pass over.
    assert _skipped(committed) == [("default", "new_kind", 5, "no live worker")]
    shown = subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", "stats", "--app", APP],
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "no live worker of the queue handles these due kinds" in shown
    assert "new_kind" in shown

    spawn(APP)
    wait_for(lambda: {r[0] for r in _rows(committed, new).values()} == {"done"}, what="new jobs")
    assert {r[1] for r in _rows(committed, new).values()} == {1}
