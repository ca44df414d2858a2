"""What a process pays once: a driver's families built on first use."""

from __future__ import annotations

from sa_jobqueue.driver import driver_for
from tests.support.models import Job

#: The `PostgresDriver` families a worker needs and an enqueue does not.
WORKER_FAMILIES = ("_steps", "_failures", "_leases", "_releaser", "_control", "_schedules")


def test_a_postgres_driver_builds_the_worker_families_on_first_use_and_once():
    driver = driver_for("postgresql", Job)
    assert [name for name in WORKER_FAMILIES if name in vars(driver)] == []
    steps = driver._steps  # type: ignore[attr-defined]
    assert driver._steps is steps  # type: ignore[attr-defined]
    assert "_steps" in vars(driver)


def test_a_postgres_drivers_done_statements_are_built_when_first_run():
    completion = driver_for("postgresql", Job)._completion  # type: ignore[attr-defined]
    statements = ("_complete", "_complete_plain", "_complete_one", "_refund", "_charge")
    assert [name for name in statements if name in vars(completion)] == []
    assert completion._complete_one is completion._complete_one
    assert [name for name in statements if name in vars(completion)] == ["_complete_one"]
