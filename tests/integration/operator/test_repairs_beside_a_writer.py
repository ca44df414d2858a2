"""An operator's repair beside a worker's open write transaction: it waits, never fails.

On SQLite one writer holds the database: `cancel` and `retry` make their transaction the
writer first (`Driver.lock_write`), waiting for the holder's COMMIT as long as a worker
would (30 s), even on an engine whose own busy timeout is short; on PostgreSQL and
MariaDB they lock the rows they read and change (MariaDB's may wait for the writer too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, update
from sqlalchemy.orm import Session

from sa_jobqueue.ops import admin
from tests.integration.operator.test_repairs_every_database import COMMITTED, _insert, _row
from tests.support.models import Job


@pytest.fixture(params=sorted(COMMITTED))
def operator_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The operator's engine; on SQLite one whose busy timeout is 0.1 s (Python's is 5 s)."""
    engine: Engine = request.getfixturevalue(COMMITTED[request.param])
    if request.param != "sqlite":
        yield engine
        return
    impatient = create_engine(engine.url, connect_args={"timeout": 0.1})
    yield impatient
    impatient.dispose()


@pytest.mark.parametrize(("action", "status"), [("retry", "failed"), ("cancel", "pending")])
def test_a_repair_beside_an_open_writer_changes_its_job_once_it_may(
    operator_engine: Engine, action: str, status: str
):
    job = _insert(operator_engine, status=status, attempts=1)
    other = _insert(operator_engine, status="done", attempts=1)

    def repair() -> admin.Changed:
        with Session(operator_engine) as session, session.begin():
            changed: admin.Changed = getattr(admin, action)(session, Job, [job])
            return changed

    got: list[admin.Changed | BaseException] = []
    started = threading.Event()

    def run() -> None:
        started.set()
        try:
            got.append(repair())
        except BaseException as error:  # noqa: BLE001 - re-raised below, in the test
            got.append(error)

    with operator_engine.connect() as writer:
        writer.execute(update(Job).where(Job.id == other).values(priority=7))  # held open
        thread = threading.Thread(target=run)
        thread.start()
        started.wait(10)
        # Time for the repair to wait for the writer, or (before `lock_write`) to fail
        # on the engine's 0.1 s busy timeout; where it need not wait it may be done.
        thread.join(0.5)
        writer.commit()
    thread.join(30)
    assert not thread.is_alive(), "the repair never got its turn"
    [changed] = got
    if isinstance(changed, BaseException):
        raise changed
    assert changed.ids == [job]
    assert _row(operator_engine, job).status == ("pending" if action == "retry" else "cancelled")
    assert _row(operator_engine, other).priority == 7
