"""``sa-jobqueue worker app:jobs`` with no URL anywhere: the app's bound engine is enough."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.support.apps.bound import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect

pytestmark = pytest.mark.slow


def test_a_worker_started_with_only_its_target_finds_the_database_through_the_app(
    committed, database_url, processes
):
    worker = processes.worker(
        "tests.support.apps.bound:jobs",
        "--poll-interval",
        "0.5",
        env={"DATABASE_URL": "", "APP_SETTINGS_DATABASE_URL": database_url},
    )
    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "record").id

    def effects():
        with Session(committed) as s:
            return s.execute(select(Effect.job_id, Effect.note)).all()

    wait_for(lambda: effects() == [(job_id, "bound")], what="the job's effect")
    assert "Traceback" not in worker.output()
