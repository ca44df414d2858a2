"""Child jobs: `job_child_state`, and the release that wakes a parent parked on its child.

A wait for a job runs `upstream_lock` (the child), `attempt_lock`, then `job_child_state`
and `wait_resolve` (kind ``child``), or `wait_time_out`, or `edges_insert` and
`job_park_wait` (a wait named ``job:<id>``), in one transaction, as the worker's step
store does.
"""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Claimed, Driver
from sa_jobqueue.driver.protocol.steps import StepFence, WaitPark, WaitResolve
from sa_jobqueue.schema.steps import steps_table
from tests.driver.conftest import OWNER, add, claim, row
from tests.support.models import Job

STEPS = steps_table(Job.metadata, Job.__tablename__)


def _fence(job: Claimed, owner: str = OWNER) -> StepFence:
    return StepFence(job.id, job.attempts, owner)


def _park_on(
    db: Engine, driver: Driver, parent: Claimed, child_id: int, name: str | None = None
) -> bool:
    """The park of `parent` waiting for `child_id`, as ``ctx.wait_for_job`` parks."""
    with Session(db) as session, session.begin():
        assert driver.upstream_lock(session, [child_id]) == {child_id: "pending"}
        conn = session.connection()
        assert driver.attempt_lock(conn, _fence(parent))
        driver.edges_insert(session, [parent.id], [child_id])
        wait = WaitPark(_fence(parent), name or f"job:{child_id}", None)
        return driver.job_park_wait(conn, wait)


def test_job_child_state_reads_status_result_and_error(db: Engine, driver: Driver):
    [job_id] = add(db, result={"v": 1}, last_error="boom", status="failed")
    with db.connect() as conn:
        state = driver.job_child_state(conn, job_id)
        assert state is not None
        assert (state.status, state.result, state.last_error) == ("failed", {"v": 1}, "boom")
        assert driver.job_child_state(conn, job_id + 1000) is None


def test_the_end_of_the_child_wakes_its_parked_parent_once(db: Engine, driver: Driver):
    [parent_id] = add(db)
    [parent] = claim(db, driver)
    [child_id] = add(db)
    assert _park_on(db, driver, parent, child_id)
    parked = row(db, parent_id)
    assert (parked.status, parked.waiting_for, parked.run_at.year) == ("pending", None, 9999)
    assert row(db, child_id).has_dependents
    with db.begin() as conn:  # the child's end (a failure wakes it too)
        assert driver.dependents_release(conn, [(child_id, "failed")]) == [parent_id]
    woken = row(db, parent_id)
    assert (woken.status, woken.waiting_for, woken.last_error) == ("pending", None, None)
    assert woken.run_at.year < 9999
    with db.begin() as conn:  # counted once: the parent is no longer parked on it
        assert driver.dependents_release(conn, [(child_id, "done")]) == []


def test_only_the_end_of_the_job_a_parent_is_parked_on_wakes_it(db: Engine, driver: Driver):
    [parent_id] = add(db)
    [parent] = claim(db, driver)
    [child_id, other_id] = add(db, 2)
    assert _park_on(db, driver, parent, child_id, name="a-signal")  # parked on a signal
    with db.begin() as conn:
        assert driver.dependents_release(conn, [(child_id, "done")]) == []
        assert driver.dependents_release(conn, [(other_id, "done")]) == []
    assert row(db, parent_id).run_at.year == 9999  # still parked: a sleep is never cut short


def test_wait_resolve_records_how_the_child_ended(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.attempt_lock(conn, _fence(job))
        ended = '{"status": "done", "result": 3, "error": null}'
        driver.wait_resolve(conn, WaitResolve(_fence(job), "job:7", ended, kind="child"))
    with db.connect() as conn:
        query = select(STEPS.c.kind, STEPS.c.result).where(STEPS.c.job_id == job.id)
        assert [tuple(r) for r in conn.execute(query)] == [
            ("child", {"status": "done", "result": 3, "error": None})
        ]
