"""Workflows in one process: dependencies, failure rules, batches and results, drained."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, ValidationError
from tests.support.models import Job, new_queue


def _statuses(engine, ids):
    with Session(engine) as session:
        rows = session.execute(select(Job.id, Job.status).where(Job.id.in_(ids))).all()
    return {row.id: row.status for row in rows}


def test_a_chain_runs_in_order_and_passes_results_downstream(committed):
    jobs = new_queue()
    seen: list[tuple[int, dict[int, object]]] = []

    @jobs.task("step")
    def step(ctx):
        seen.append((ctx.payload["n"], dict(ctx.upstream)))
        return {"n": ctx.payload["n"]}

    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "step", {"n": 1})
        b = jobs.enqueue(session, "step", {"n": 2}, after=[a])
        c = jobs.enqueue(session, "step", {"n": 3}, after=[b.id])
        ids = [a.id, b.id, c.id]
        assert b.status == "waiting"
        assert b.waiting_for == 1
    assert jobs.worker(committed, listen=False).drain() == 3
    assert [n for n, _ in seen] == [1, 2, 3]
    assert seen[0][1] == {}
    assert seen[1][1] == {ids[0]: {"n": 1}}
    assert seen[2][1] == {ids[1]: {"n": 2}}
    assert set(_statuses(committed, ids).values()) == {"done"}


def test_a_diamond_joins_after_both_branches(committed):
    jobs = new_queue()
    order: list[str] = []

    def handler(ctx):
        order.append(ctx.kind)
        return ctx.kind

    for name in "abcd":
        jobs.task(name)(handler)
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "a")
        b = jobs.enqueue(session, "b", after=[a])
        c = jobs.enqueue(session, "c", after=[a])
        d = jobs.enqueue(session, "d", after=[b, c])
        d_id = d.id
        b_id, c_id = b.id, c.id
    assert jobs.worker(committed, listen=False, concurrency=4).drain() == 4
    assert order[0] == "a"
    assert order[-1] == "d"
    with Session(committed) as session:
        assert session.get_one(Job, d_id).result == "d"
    assert _statuses(committed, [b_id, c_id]) == {b_id: "done", c_id: "done"}


def test_a_discarded_upstream_cancels_its_dependents_down_the_graph(committed):
    jobs = new_queue()
    ran: list[str] = []

    @jobs.task("bad")
    def bad(ctx):
        raise Discard("no such image")

    jobs.task("next")(lambda ctx: ran.append("next"))
    jobs.task("anyway")(lambda ctx: ran.append(f"anyway {dict(ctx.upstream_statuses)}"))
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "bad")
        b = jobs.enqueue(session, "next", after=[a])
        c = jobs.enqueue(session, "next", after=[b])
        d = jobs.enqueue(session, "anyway", after=[a], after_failure="run")
        ids = a.id, b.id, c.id, d.id
    jobs.worker(committed, listen=False).drain()
    statuses = _statuses(committed, ids)
    assert statuses == {ids[0]: "failed", ids[1]: "cancelled", ids[2]: "cancelled", ids[3]: "done"}
    assert ran == [f"anyway {{{ids[0]}: 'failed'}}"]
    with Session(committed) as session:
        errors = [session.get_one(Job, i).last_error for i in ids[1:3]]
    assert errors == [
        f"cancelled: upstream job {ids[0]} ended failed",
        f"cancelled: upstream job {ids[1]} ended cancelled",
    ]


def test_a_job_enqueued_after_finished_jobs_is_due_at_once_or_cancelled(committed):
    jobs = new_queue()
    jobs.task("ok")(lambda ctx: None)
    jobs.task("bad")(lambda ctx: (_ for _ in ()).throw(Discard("x")))
    with Session(committed) as session, session.begin():
        ok = jobs.enqueue(session, "ok").id
        bad = jobs.enqueue(session, "bad").id
    jobs.worker(committed, listen=False).drain()
    with Session(committed) as session, session.begin():
        due = jobs.enqueue(session, "ok", after=[ok])
        gone = jobs.enqueue(session, "ok", after=[ok, bad])
        runs = jobs.enqueue(session, "ok", after=[bad], after_failure="run")
        assert (due.status, gone.status, runs.status) == ("pending", "cancelled", "pending")
        assert gone.last_error == f"cancelled: upstream job {bad} ended failed"


def test_a_batch_callback_runs_once_after_every_member_with_their_results(committed):
    jobs = new_queue()
    calls: list[tuple[dict[int, object], Counter[str]]] = []

    @jobs.task("member")
    def member(ctx):
        if ctx.payload["i"] == 3:
            raise Discard("three")
        return ctx.payload["i"] * 10

    @jobs.task("report")
    def report(ctx):
        calls.append((dict(ctx.upstream), Counter(ctx.upstream_statuses.values())))

    with Session(committed) as session, session.begin():
        batch = jobs.batch(session, callback=("report", {"run": 7}))
        members = batch.enqueue_many([("member", {"i": i}) for i in range(5)])
        members.append(batch.enqueue("member", {"i": 5}))
        ids = [m.id for m in members]
    jobs.worker(committed, listen=False, concurrency=4).drain()
    assert len(calls) == 1
    results, counts = calls[0]
    assert results == {ids[i]: (None if i == 3 else i * 10) for i in range(6)}
    assert counts == Counter({"done": 5, "failed": 1})


def test_an_empty_batch_runs_its_callback_at_once(committed):
    jobs = new_queue()
    calls: list[int] = []
    jobs.task("report")(lambda ctx: calls.append(len(ctx.upstream)))
    with Session(committed) as session, session.begin():
        jobs.batch(session, callback=("report", {}))
    jobs.worker(committed, listen=False).drain()
    assert calls == [0]


def test_a_batch_refuses_jobs_once_its_transaction_ended(committed):
    jobs = new_queue()
    jobs.task("report")(lambda ctx: None)
    with Session(committed) as session:
        with session.begin():
            batch = jobs.batch(session, callback=("report", {}))
        with session.begin(), pytest.raises(Exception, match="transaction that made it has ended"):
            batch.enqueue("report", {})


def test_a_rolled_back_graph_leaves_no_job_and_no_edge(committed):
    jobs = new_queue()
    with Session(committed) as session:
        with session.begin():
            a = jobs.enqueue(session, "a").id
        session.begin()
        b = jobs.enqueue(session, "b", after=[a])
        batch = jobs.batch(session, callback=("cb", {}))
        batch.enqueue_many([("m", {}), ("m", {})])
        jobs.enqueue(session, "c", after=[b])
        session.rollback()
    with Session(committed) as session:
        assert session.scalars(select(Job.id)).all() == [a]
        edges = Job.metadata.tables["sa_jobqueue_deps_jobs"]
        assert session.execute(select(edges)).all() == []


def test_bad_after_gets_a_clear_error(committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        with pytest.raises(ValidationError, match="no job with id 999999"):
            jobs.enqueue(session, "x", after=[999999])
        with pytest.raises(ValidationError, match="must be a list"):
            jobs.enqueue(session, "x", after=5)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="at most 1000"):
            jobs.enqueue(session, "x", after=list(range(1, 1002)))
        with pytest.raises(ValidationError, match="after_failure"):
            jobs.enqueue(session, "x", after=[1], after_failure="maybe")
        with pytest.raises(ValidationError, match="needs after="):
            jobs.enqueue(session, "x", after_failure="run")
        # The transaction is still usable.
        jobs.enqueue(session, "x")


def test_a_chain_of_a_limited_kind_releases_through_the_locking_acknowledgement(committed):
    jobs = new_queue()
    order: list[int] = []

    @jobs.task("limited", max_running=2)
    def limited(ctx):
        order.append(ctx.payload["n"])
        return ctx.payload["n"]

    with Session(committed) as session, session.begin():
        previous = None
        for n in range(6):
            previous = jobs.enqueue(
                session, "limited", {"n": n}, after=[previous] if previous else None
            )
        # Fan-in on the limited kind too: a join of three.
        heads = [jobs.enqueue(session, "limited", {"n": 10 + i}) for i in range(3)]
        jobs.enqueue(session, "limited", {"n": 20}, after=heads)
    assert jobs.worker(committed, listen=False, concurrency=2).drain() == 10
    assert [n for n in order if n < 10] == list(range(6))
    assert order.index(20) > max(order.index(n) for n in (10, 11, 12))


def test_an_async_handler_reads_its_upstream_results(committed):
    jobs = new_queue()
    seen: list[object] = []
    jobs.task("a")(lambda ctx: {"x": 1})

    @jobs.task("b")
    async def b(ctx):
        seen.append(dict(ctx.upstream))

    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "a")
        jobs.enqueue(session, "b", after=[a])
        a_id = a.id
    assert jobs.worker(committed, listen=False).drain() == 2
    assert seen == [{a_id: {"x": 1}}]


def test_a_batch_member_cancelled_at_birth_does_not_hold_the_callback(committed):
    jobs = new_queue()
    calls: list[dict[int, str]] = []
    jobs.task("bad")(lambda ctx: (_ for _ in ()).throw(Discard("x")))
    jobs.task("m")(lambda ctx: None)
    jobs.task("cb")(lambda ctx: calls.append(dict(ctx.upstream_statuses)))
    with Session(committed) as session, session.begin():
        bad = jobs.enqueue(session, "bad").id
    jobs.worker(committed, listen=False).drain()
    with Session(committed) as session, session.begin():
        only_cancelled = jobs.batch(session, callback=("cb", {}))
        (gone,) = only_cancelled.enqueue_many([{"kind": "m", "after": [bad]}])
        assert gone.status == "cancelled"
        mixed = jobs.batch(session, callback=("cb", {}))
        dead, alive = mixed.enqueue_many([{"kind": "m", "after": [bad]}, ("m", {})])
        ids = gone.id, dead.id, alive.id
    jobs.worker(committed, listen=False).drain()
    assert sorted(calls, key=len) == [
        {ids[0]: "cancelled"},
        {ids[1]: "cancelled", ids[2]: "done"},
    ]
