"""A task's ``deadline``: checked where the task is registered, listed for the sweeper."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sa_jobqueue import ConfigurationError, JobQueue
from tests.support.models import Job


def handler(ctx):
    return None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0, "task 'checkout': deadline must be positive, not 0"),
        (timedelta(0), "task 'checkout': deadline must be positive"),
        (-5, "task 'checkout': deadline="),
        ("1h", "task 'checkout': deadline='1h'"),
    ],
)
def test_a_bad_deadline_fails_where_the_task_is_registered(bad, message):
    jobs = JobQueue(Job)
    with pytest.raises(ConfigurationError) as raised:
        jobs.task("checkout", deadline=bad)(handler)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_the_registry_lists_the_tasks_with_a_deadline_in_seconds():
    jobs = JobQueue(Job)
    jobs.task("checkout", deadline=timedelta(hours=1))(handler)
    jobs.task("ship", deadline=90)(handler)
    jobs.task("mail")(handler)
    assert jobs.registry.deadlines() == [("checkout", 3600.0), ("ship", 90.0)]
    assert jobs.registry.get("mail").deadline is None  # type: ignore[union-attr]
