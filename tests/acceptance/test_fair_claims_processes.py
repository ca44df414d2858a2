"""Fair claims across three real ``sa-jobqueue worker`` processes.

One heavy key enqueued first with many jobs, light keys after it: with fairness,
each light key's first job starts within the first rounds over all three workers,
not behind the heavy key's backlog; every job runs once.
"""

from __future__ import annotations

import os
import sys

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.acceptance.schedule_workers import Worker
from tests.support.apps.fairness import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job

pytestmark = pytest.mark.slow

HEAVY, LIGHT_KEYS, LIGHT_EACH = 300, 10, 2


def _done(engine):
    with Session(engine) as s:
        return s.scalar(select(func.count()).where(Job.status == "done"))


def _effects(engine):
    with Session(engine) as s:
        return list(s.scalars(select(Effect.note).order_by(Effect.id)))


def test_three_workers_take_turns_between_keys_so_light_keys_start_in_the_first_rounds(
    committed, database_url, tmp_path
):
    with Session(committed) as session, session.begin():
        jobs.enqueue_many(
            session,
            [{"kind": "import_feed", "payload": {"key": "heavy"}, "concurrency_key": "heavy"}]
            * HEAVY,
        )
        jobs.enqueue_many(
            session,
            [
                {
                    "kind": "import_feed",
                    "payload": {"key": f"light{i}"},
                    "concurrency_key": f"light{i}",
                }
                for i in range(LIGHT_KEYS)
                for _ in range(LIGHT_EACH)
            ],
        )
    env = {**os.environ, "DATABASE_URL": database_url}
    args = [
        *(sys.executable, "-m", "sa_jobqueue.cli", "worker", "tests.support.apps.fairness:jobs"),
        *("--queue", "feeds", "--concurrency", "2"),
    ]
    workers = [Worker(args, env, tmp_path / f"worker-{n}.log") for n in range(3)]
    try:
        total = HEAVY + LIGHT_KEYS * LIGHT_EACH
        wait_for(lambda: _done(committed) >= total, timeout=120, what="every job done")
        for worker in workers:
            worker.wait_for_log(" started: ")
    finally:
        for worker in workers:
            worker.stop()
    starts = _effects(committed)
    assert len(starts) == total  # each job once
    with Session(committed) as s:
        assert s.scalar(select(func.count()).where(Job.status == "done")) == total
        assert s.scalar(select(func.max(Job.attempts))) == 1
    firsts = {f"light{i}": starts.index(f"light{i}") for i in range(LIGHT_KEYS)}
    # A round is one job per key (11 keys); the three workers hold six slots between
    # them. Without fairness the first light job would start after all 300 heavy ones.
    assert max(firsts.values()) < 2 * (LIGHT_KEYS + 1) + 6, (firsts, starts[:40])
    # Every light job ran before the heavy backlog was half done.
    last_light = max(i for i, note in enumerate(starts) if note != "heavy")
    assert last_light < HEAVY // 2
