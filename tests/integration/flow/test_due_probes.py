"""The limited kinds' due probes (`statements.due_kinds`, `statements.limited_due`).

They walk each queue's priority levels and stop at the first job not yet due, so these
tests put the due job where a walk could miss it: behind future jobs of a lower
priority number, in a second queue, in a paused queue, or of a kind not asked for.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from sa_jobqueue.driver.postgres import due
from tests.support.models import Job, new_queue


def _add(engine: Engine, *items: dict[str, Any]) -> None:
    with Session(engine) as session, session.begin():
        new_queue().enqueue_many(session, list(items))


def _due_kinds(engine: Engine, kinds: list[str], queues: list[str]) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(due.due_kinds(Job), {"kinds": kinds, "queues": queues})
        return {row.kind for row in rows}


def _limited_due(engine: Engine, kinds: list[str], queues: list[str]) -> bool:
    with engine.connect() as conn:
        statement = due.limited_due(Job, kinds=kinds)
        return bool(conn.execute(statement, {"queues": queues}).scalar())


def test_a_due_job_behind_future_jobs_of_a_lower_priority_is_found(committed):
    future = [{"kind": "capped", "priority": 0, "delay": 3600} for _ in range(50)]
    _add(committed, *future, {"kind": "capped", "priority": 5}, {"kind": "keyed", "delay": 60})
    assert _due_kinds(committed, ["capped", "keyed"], ["default"]) == {"capped"}
    assert _limited_due(committed, ["capped", "keyed"], ["default"])
    assert not _limited_due(committed, ["keyed"], ["default"])


def test_only_jobs_not_yet_due_are_not_due(committed):
    _add(committed, *({"kind": "capped", "priority": p, "delay": 3600} for p in (0, 1, 2)))
    assert _due_kinds(committed, ["capped"], ["default"]) == set()
    assert not _limited_due(committed, ["capped"], ["default"])


def test_each_asked_queue_is_walked_and_others_are_not(committed):
    _add(committed, {"kind": "capped", "queue": "mail"}, {"kind": "keyed", "queue": "other"})
    assert _due_kinds(committed, ["capped", "keyed"], ["default", "mail"]) == {"capped"}
    assert _limited_due(committed, ["keyed"], ["default", "other"])
    assert not _limited_due(committed, ["keyed"], ["default", "mail"])


@pytest.mark.parametrize("probe", ["due_kinds", "limited_due"])
def test_a_paused_queue_has_nothing_due(committed, probe):
    _add(committed, {"kind": "capped", "queue": "mail"}, {"kind": "capped", "queue": "pdf"})
    with Session(committed) as session, session.begin():
        new_queue().pause(session, "mail")
    if probe == "due_kinds":
        assert _due_kinds(committed, ["capped"], ["mail"]) == set()
        assert _due_kinds(committed, ["capped"], ["mail", "pdf"]) == {"capped"}
    else:
        assert not _limited_due(committed, ["capped"], ["mail"])
        assert _limited_due(committed, ["capped"], ["mail", "pdf"])


def test_running_and_finished_jobs_are_not_due(committed):
    _add(committed, {"kind": "capped"}, {"kind": "keyed"})
    with committed.begin() as conn:
        conn.execute(text("UPDATE jobs SET status = 'running' WHERE kind = 'capped'"))
        conn.execute(
            text("UPDATE jobs SET status = 'done', finished_at = now() WHERE kind = 'keyed'")
        )
    assert _due_kinds(committed, ["capped", "keyed"], ["default"]) == set()
    assert not _limited_due(committed, ["capped", "keyed"], ["default"])
