"""What a process pays once: a driver's families built on first use, the worker's frozen heap."""

from __future__ import annotations

import subprocess
import sys

from sa_jobqueue.driver import Driver, driver_for
from tests.support.models import Job

#: The `PostgresDriver` families a worker needs and an enqueue does not.
WORKER_FAMILIES = ("_steps", "_failures", "_leases", "_releaser", "_control", "_schedules")


def own_driver() -> Driver:
    """A driver of its own: with the default options `driver_for` shares one per model."""
    return driver_for("postgresql", Job, kinds=["send_receipt"])


def test_a_postgres_driver_builds_the_worker_families_on_first_use_and_once():
    driver = own_driver()
    assert [name for name in WORKER_FAMILIES if name in vars(driver)] == []
    steps = driver._steps  # type: ignore[attr-defined]
    assert driver._steps is steps  # type: ignore[attr-defined]
    assert "_steps" in vars(driver)


def test_a_postgres_drivers_done_statements_are_built_when_first_run():
    completion = own_driver()._completion  # type: ignore[attr-defined]
    statements = ("_complete", "_complete_plain", "_complete_one", "_refund", "_charge")
    assert [name for name in statements if name in vars(completion)] == []
    assert completion._complete_one is completion._complete_one
    assert [name for name in statements if name in vars(completion)] == ["_complete_one"]


def test_a_postgres_drivers_maintenance_and_notify_statements_are_built_when_first_run():
    driver = own_driver()
    built = {
        driver._flow: ("_due_kinds", "_limited_due"),  # type: ignore[attr-defined]
        driver._notifications: ("_announce", "_notify", "_asynchronous_commit"),  # type: ignore[attr-defined]
        driver.counters_compact.__self__: ("_compact", "_fold"),  # type: ignore[attr-defined]
        driver.jobs_fail_past_deadline.__self__: ("_fail",),  # type: ignore[attr-defined]
    }
    assert [n for family, names in built.items() for n in names if n in vars(family)] == []
    flow = driver._flow  # type: ignore[attr-defined]
    assert flow._limited_due is None  # no limited kind: nothing to probe
    assert flow._due_kinds is flow._due_kinds
    assert [name for name in ("_due_kinds", "_limited_due") if name in vars(flow)] == [
        "_due_kinds",
        "_limited_due",
    ]


def test_the_worker_command_freezes_its_heap_and_importing_the_library_does_not():
    script = (
        "import gc\n"
        "threshold = gc.get_threshold()\n"
        "import sa_jobqueue, sa_jobqueue.cli.run\n"
        "from sa_jobqueue.cli.gc_freeze import freeze_startup_heap\n"
        "assert (gc.get_freeze_count(), gc.get_threshold()) == (0, threshold)\n"
        "assert gc.isenabled()\n"
        "freeze_startup_heap()\n"
        "print(gc.get_freeze_count())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert int(done.stdout) > 10_000  # the modules' functions and classes, at least
