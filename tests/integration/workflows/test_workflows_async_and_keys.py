"""Workflows from an AsyncSession, and with idempotency keys (a job found by its key keeps
its own edges)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, make_url, select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import BatchClosedError
from tests.support.models import Job, new_queue


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
def test_aenqueue_after_and_abatch_insert_the_graph_in_the_async_transaction(
    committed, database_url, driver
):
    jobs = new_queue()
    seen: list[object] = []
    jobs.task("a")(lambda ctx: 1)
    jobs.task("b")(lambda ctx: seen.append(dict(ctx.upstream)))
    jobs.task("m")(lambda ctx: ctx.payload["i"])
    jobs.task("cb")(lambda ctx: seen.append(sorted(ctx.upstream.values())))
    url = make_url(database_url).set(drivername=f"postgresql+{driver}")

    async def main() -> tuple[int, int]:
        engine = create_async_engine(url)
        try:
            async with AsyncSession(engine, expire_on_commit=False) as session:
                async with session.begin():
                    a = await jobs.aenqueue(session, "a")
                    await jobs.aenqueue_many(session, [{"kind": "b", "after": [a]}])
                    batch = await jobs.abatch(session, callback=("cb", {}))
                    await batch.aenqueue("m", {"i": 1})
                    await batch.aenqueue_many([("m", {"i": 2})])
                with pytest.raises(BatchClosedError):
                    await batch.aenqueue("m", {"i": 3})
                with pytest.raises(BatchClosedError, match="AsyncSession"):
                    batch.enqueue("m", {"i": 3})
                return a.id, batch.id
        finally:
            await engine.dispose()

    a_id, _ = asyncio.run(main())
    jobs.worker(committed, listen=False).drain()
    assert {a_id: 1} in seen
    assert [1, 2] in seen


def test_a_job_found_by_its_idempotency_key_keeps_its_own_edges(committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "a")
        b = jobs.enqueue(session, "b")
        first = jobs.enqueue(session, "c", after=[a], idempotency_key="c:1")
        ids = a.id, b.id, first.id
    with Session(committed) as session, session.begin():
        again = jobs.enqueue(session, "c", after=[ids[1]], idempotency_key="c:1")
        assert again.id == ids[2]
        assert (again.status, again.waiting_for) == ("waiting", 1)
    edges = Job.metadata.tables["sa_jobqueue_deps_jobs"]
    with Session(committed) as session:
        rows = session.execute(select(edges.c.job_id, edges.c.upstream_id)).all()
        assert [tuple(r) for r in rows] == [(ids[2], ids[0])]
        assert session.scalar(select(func.count()).select_from(Job)) == 3


def test_a_batch_refuses_a_key_that_names_a_job_outside_it_and_inserts_nothing(committed):
    from sa_jobqueue import ValidationError

    jobs = new_queue()
    jobs.task("m")(lambda ctx: ctx.payload["i"])
    seen: list[object] = []
    jobs.task("cb")(lambda ctx: seen.append(sorted(ctx.upstream.values())))
    with Session(committed) as session, session.begin():
        outsider = jobs.enqueue(session, "m", {"i": 9}, idempotency_key="k:outside").id
    with Session(committed) as session, session.begin():
        batch = jobs.batch(session, callback=("cb", {}))
        kept = batch.enqueue("m", {"i": 1}, idempotency_key="k:1")
        # The same key again (in this call or a later one): the member itself, once.
        twice = batch.enqueue_many(
            [
                {"kind": "m", "payload": {"i": 1}, "idempotency_key": "k:1"},
                {"kind": "m", "payload": {"i": 2}, "idempotency_key": "k:2"},
                {"kind": "m", "payload": {"i": 2}, "idempotency_key": "k:2"},
            ]
        )
        assert [job.id for job in twice] == [kept.id, twice[1].id, twice[1].id]
        message = f"names job {outsider}, which exists already and is not a member of batch"
        with pytest.raises(ValidationError, match=message):
            batch.enqueue("m", {"i": 9}, idempotency_key="k:outside")
        with pytest.raises(ValidationError, match=message):
            batch.enqueue_many(
                [
                    ("m", {"i": 3}),
                    {"kind": "m", "payload": {"i": 9}, "idempotency_key": "k:outside"},
                ],
                ids_only=True,
            )
        batch.enqueue("m", {"i": 4})  # the transaction is still usable
        batch_id = batch.id
    with Session(committed) as session:
        payloads = session.scalars(select(Job.payload).where(Job.kind == "m")).all()
    assert sorted(p["i"] for p in payloads) == [1, 2, 4, 9]  # the {"i": 3} was undone
    jobs.worker(committed, listen=False).drain()
    assert seen == [[1, 2, 4]]  # the callback waited for its members only
    with Session(committed) as session:
        assert session.scalar(select(Job.status).where(Job.id == batch_id)) == "done"
