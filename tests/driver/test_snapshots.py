"""`snapshot_engine`: the reads of one transaction agree, whatever commits meanwhile.

The dashboard reads its pages on it (several statements per page); on each database a
second read in the same transaction must not see a job another connection committed
after the first.
"""

from __future__ import annotations

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from sa_jobqueue.driver import snapshot_engine
from tests.support.models import Job


def _add_pending(engine: Engine) -> None:
    with Session(engine) as session, session.begin():
        session.add(Job(kind="k", queue="snap", payload={}))


def _pending(session: Session) -> int:
    query = select(func.count()).where(Job.queue == "snap", Job.status == "pending")
    return int(session.execute(query).scalar_one())


def test_reads_of_one_transaction_agree_while_another_connection_commits(db):
    _add_pending(db)
    reader = snapshot_engine(db)
    with Session(reader) as session, session.begin():
        first = _pending(session)
        _add_pending(db)  # committed by another connection between the two reads
        second = _pending(session)
    assert (first, second) == (1, 1)
    with Session(reader) as session, session.begin():
        assert _pending(session) == 2  # the next transaction reads the commit


def test_a_snapshot_shares_the_pool_and_ends_with_its_transaction(db):
    reader = snapshot_engine(db)
    assert reader.pool is db.pool
    for _ in range(3):  # each transaction takes its own snapshot, then gives it back
        with Session(reader) as session, session.begin():
            before = _pending(session)
        _add_pending(db)
        with Session(reader) as session, session.begin():
            assert _pending(session) == before + 1
    # The same connections serve ordinary transactions afterwards (nothing left open).
    with Session(db) as session, session.begin():
        session.add(Job(kind="k", queue="snap", payload={}))
    with db.connect() as conn:
        assert not conn.in_transaction()
