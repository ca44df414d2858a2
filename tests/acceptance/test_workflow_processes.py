"""Workflows across real worker processes (``python -m sa_jobqueue.cli worker
tests.support.apps.workflows:jobs``): a diamond over three workers, a batch of 1,000 with one
callback, failure rules, a 30-job chain under repeated kill -9, and a stale worker's
late ``done`` (SIGSTOP past its lease) that must release nothing.

Handlers leave `Span` and `Effect` rows (tests/support/apps/workflows.py); the tests read
the order of events back with SQL. Leases are 2 s and sweeps run every 0.5 s.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.support.apps.workflows import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job, Span
from tests.support.processes import every_database, freeze

ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0
pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start(concurrency=1, ready=True):
        return processes.worker(
            "tests.support.apps.workflows:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5"),
            concurrency=concurrency,
            env={"SAJQ_LEASE": str(LEASE)},
            ready=ready,
        )

    return start


def _status(engine, job_id):
    with Session(engine) as session:
        return session.scalar(select(Job.status).where(Job.id == job_id))


def _all_ended(engine, ids):
    with Session(engine) as session:
        statuses = session.scalars(select(Job.status).where(Job.id.in_(ids))).all()
    return len(statuses) == len(ids) and all(s in ("done", "failed", "cancelled") for s in statuses)


@every_database
def test_a_diamond_joins_only_after_both_branches_across_three_workers(committed, spawn):
    workers = [spawn() for _ in range(3)]
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "node", {"name": "a", "sleep": 0.2})
        b = jobs.enqueue(session, "node", {"name": "b", "sleep": 1.0}, after=[a])
        c = jobs.enqueue(session, "node", {"name": "c", "sleep": 1.5}, after=[a])
        d = jobs.enqueue(session, "node", {"name": "d"}, after=[b, c])
        ids = [a.id, b.id, c.id, d.id]
    wait_for(lambda: _all_ended(committed, ids), 60, "the diamond to end")
    with Session(committed) as session:
        spans = {str(s.key): s for s in session.scalars(select(Span))}
        statuses = set(session.scalars(select(Job.status).where(Job.id.in_(ids))))
        result = session.scalar(select(Job.result).where(Job.id == ids[3]))
    assert statuses == {"done"}
    assert sorted(spans) == ["a", "b", "c", "d"]  # each ran once
    ended = {key: span.ended_at for key, span in spans.items() if span.ended_at is not None}
    assert sorted(ended) == ["a", "b", "c", "d"]
    assert spans["b"].started_at >= ended["a"]
    assert spans["c"].started_at >= ended["a"]
    assert spans["d"].started_at >= max(ended["b"], ended["c"])
    # b and c ran side by side, on two of the three workers (each runs one job at a time).
    assert spans["b"].worker != spans["c"].worker
    assert {spans[k].worker for k in "abcd"} <= {w.pid for w in workers}
    assert result == "d"


def test_a_batch_of_1000_runs_its_callback_once_after_all_of_them(committed, spawn):
    for _ in range(3):
        spawn(concurrency=4)
    with Session(committed) as session, session.begin():
        batch = jobs.batch(session, callback=("report", {}))
        members = batch.enqueue_many([("leaf", {"i": i, "discard": i == 7}) for i in range(1000)])
        ids = [m.id for m in members]
        callback = batch.id
    wait_for(lambda: _status(committed, callback) == "done", 120, "the batch callback")
    with Session(committed) as session:
        notes = session.scalars(select(Effect.note).where(Effect.job_id == callback)).all()
        left = session.scalar(
            select(func.count()).where(Job.id.in_(ids), Job.status.not_in(["done", "failed"]))
        )
    assert left == 0
    assert notes == [f"done=999,failed=1;sum={sum(range(1000)) - 7}"]  # once, after all


def test_a_discarded_upstream_cancels_its_dependents_but_not_after_failure_run(committed, spawn):
    spawn()
    spawn()
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "leaf", {"i": 1, "discard": True})
        b = jobs.enqueue(session, "link", {"n": 1}, after=[a])
        c = jobs.enqueue(session, "link", {"n": 2}, after=[b])
        d = jobs.enqueue(session, "report", {}, after=[a], after_failure="run")
        ids = [a.id, b.id, c.id, d.id]
    wait_for(lambda: _all_ended(committed, ids), 60, "the graph to end")
    with Session(committed) as session:
        rows = session.execute(select(Job.id, Job.status, Job.last_error).where(Job.id.in_(ids)))
        by_id = {row.id: (row.status, row.last_error) for row in rows}
        effects = session.scalars(select(Effect.note).order_by(Effect.id)).all()
    assert by_id[ids[0]] == ("failed", "discarded: told to")
    assert by_id[ids[1]] == ("cancelled", f"cancelled: upstream job {ids[0]} ended failed")
    assert by_id[ids[2]] == ("cancelled", f"cancelled: upstream job {ids[1]} ended cancelled")
    assert by_id[ids[3]][0] == "done"
    assert effects == ["failed=1;sum=0"]  # only the after_failure="run" job ran


def _chain(session, kind, length):
    previous = None
    ids = []
    for n in range(length):
        job = jobs.enqueue(
            session, kind, {"n": n, "sleep": 0.15}, after=[previous] if previous else None
        )
        ids.append(job.id)
        previous = job
    return ids


def test_a_30_job_chain_under_repeated_kill_9_completes_in_order(committed, spawn):
    workers = [spawn(concurrency=2) for _ in range(3)]
    with Session(committed) as session, session.begin():
        lease_ids = _chain(session, "link", 30)
        tx_ids = _chain(session, "link_tx", 30)
    rng = random.Random(25)  # noqa: S311 - a repeatable kill schedule, not a secret
    kills = 0
    ids = lease_ids + tx_ids
    deadline = time.monotonic() + 240
    # A kill -9 about every second, each victim replaced, while the chains run; then
    # the last workers finish in peace.
    while not _all_ended(committed, ids) and kills < 12:
        assert time.monotonic() < deadline, "the chains did not end under kill -9"
        time.sleep(rng.uniform(0.6, 1.4))
        victim = rng.randrange(len(workers))
        workers[victim].signal(signal.SIGKILL)
        workers[victim] = spawn(concurrency=2, ready=False)
        kills += 1
    wait_for(lambda: _all_ended(committed, ids), 240, "both chains to end")
    assert kills >= 6
    with Session(committed) as session:
        statuses = set(session.scalars(select(Job.status).where(Job.id.in_(ids))))
        lease_notes = session.scalars(
            select(Effect.note).where(Effect.note.like("link:%")).order_by(Effect.id)
        ).all()
        tx_notes = session.scalars(
            select(Effect.note).where(Effect.note.like("tx:%")).order_by(Effect.id)
        ).all()
    assert statuses == {"done"}
    # Transactional: each link's effect exactly once, in chain order.
    assert tx_notes == [f"tx:{n}" for n in range(30)]
    # Lease mode: at least once each, and never a link before the one it waits for.
    places = [int(note.split(":")[1]) for note in lease_notes]
    assert places == sorted(places)
    assert set(places) == set(range(30))


# On SQLite the worker is frozen outside its write transactions (`freeze`): frozen inside
# one, it would hold the file's one write lock, and no other process writes until it
# runs again or dies (docs/databases.md). Everything after the freeze is the same.
@every_database
def test_a_stale_workers_late_done_releases_nothing(committed, spawn):
    stale = spawn()
    with Session(committed) as session, session.begin():
        # Attempt 1 (the worker we stop) sleeps 3 s; attempt 2 (the one that takes
        # over after the lease ran out) sleeps 6 s, so it is still running when the
        # stale worker reports its done.
        a = jobs.enqueue(session, "node", {"name": "a", "sleep_by_attempt": {"1": 3, "2": 6}})
        b = jobs.enqueue(session, "node", {"name": "b"}, after=[a])
        a_id, b_id = a.id, b.id

    def attempt_started(n):
        with Session(committed) as session:
            return (
                session.scalar(select(func.count()).where(Span.job_id == a_id)) >= n
                and session.scalar(select(Job.attempts).where(Job.id == a_id)) >= n
            )

    wait_for(lambda: attempt_started(1), 30, "attempt 1 to start")
    freeze(stale, committed)
    spawn()
    wait_for(lambda: attempt_started(2), 30, "attempt 2 to start on the fresh worker")
    stale.signal(signal.SIGCONT)
    stale.wait_for_log("lease was lost", 30)
    wait_for(lambda: _status(committed, b_id) == "done", 60, "b to run after attempt 2")
    with Session(committed) as session:
        spans = session.scalars(select(Span).order_by(Span.id)).all()
    a_spans = [s for s in spans if s.job_id == a_id]
    b_spans = [s for s in spans if s.job_id == b_id]
    assert len(a_spans) == 2
    assert len(b_spans) == 1  # b ran once
    ended = a_spans[1].ended_at
    assert ended is not None
    # Released by attempt 2's done, not by the stale worker's (which came seconds before).
    assert b_spans[0].started_at >= ended


def test_a_crash_before_the_transactional_commit_releases_nothing(committed, spawn):
    first = spawn()
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "tx_crash_once")
        b = jobs.enqueue(session, "link", {"n": 1}, after=[a])
        a_id, b_id = a.id, b.id
    # Attempt 1 ran its handler, its fenced done and b's release, then died before COMMIT.
    assert first.popen.wait(30) == -signal.SIGKILL
    with Session(committed) as session:
        assert session.scalar(select(Job.status).where(Job.id == b_id)) == "waiting"
        assert session.scalar(select(Job.status).where(Job.id == a_id)) == "running"
        assert session.scalar(select(func.count()).select_from(Effect)) == 0
    spawn()  # takes a over once its lease expires; attempt 2 commits all three together
    wait_for(lambda: _status(committed, b_id) == "done", 60, "b to run after attempt 2")
    with Session(committed) as session:
        effects = session.execute(select(Effect.job_id, Effect.attempt).order_by(Effect.id)).all()
        result = session.scalar(select(Job.result).where(Job.id == a_id))
    assert [tuple(e) for e in effects] == [(a_id, 2), (b_id, 1)]
    assert result == 2


def test_a_retried_dependent_of_a_cancelled_upstream_waits_for_it_again(committed, processes):
    """Issue 45 item 3: retried (CLI --all, CLI ids, dashboard bulk and single), a dependent
    that its upstream's cancel cancelled waits for that upstream's new end, never runs first."""
    from starlette.testclient import TestClient

    from sa_jobqueue.dashboard import make_app
    from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD

    pairs: dict[str, tuple[int, int]] = {}
    with Session(committed) as session, session.begin():
        for way in ("all", "ids", "bulk", "single"):
            queue = f"q_{way}"
            upstream = jobs.enqueue(
                session, "node", {"name": f"u_{way}", "sleep": 0.5}, queue=queue
            )
            dependent = jobs.enqueue(
                session, "node", {"name": f"d_{way}"}, queue=queue, after=[upstream]
            )
            pairs[way] = (upstream.id, dependent.id)
    with Session(committed) as session, session.begin():
        # The upstream's cancel cancels its dependent; "single" cancels only the dependent.
        cancelled = [pairs[way][0] for way in ("all", "ids", "bulk")] + [pairs["single"][1]]
        jobs.cancel(session, cancelled)
    assert {_status(committed, d) for _, d in pairs.values()} == {"cancelled"}

    every_retry = processes.command("retry", "--all", "--queue", "q_all", "--table", "jobs")
    assert every_retry.wait() == 0
    assert "1 wait for an upstream job that has not ended" in every_retry.output()
    assert processes.command("retry", *map(str, pairs["ids"]), "--table", "jobs").wait() == 0
    client = TestClient(make_app(jobs, committed, allow_actions=True), base_url="http://127.0.0.1")
    assert client.get("/").status_code == 200
    token = client.cookies.get(CSRF_COOKIE)
    picked = {CSRF_FIELD: token, "action": "retry", "scope": "selected", "confirm": "yes"}
    answer = client.post("/bulk", data={**picked, "id": [str(i) for i in pairs["bulk"]]})
    assert answer.status_code == 200, answer.text
    single = pairs["single"][1]
    answer = client.post(f"/jobs/{single}/retry", data={CSRF_FIELD: token})
    assert answer.status_code == 200, answer.text
    assert "it waits for an upstream job that has not ended" in answer.text

    # Each dependent waits again for its upstream (pending), none is due before it ends.
    assert {way: _status(committed, d) for way, (_, d) in pairs.items()} == dict.fromkeys(
        pairs, "waiting"
    )
    processes.worker(
        "tests.support.apps.workflows:jobs",
        *("--poll-interval", "0.5", "--sweep-interval", "0.5"),
        *(option for way in pairs for option in ("--queue", f"q_{way}")),
        env={"SAJQ_LEASE": str(LEASE)},
    )
    every = [job_id for pair in pairs.values() for job_id in pair]
    wait_for(lambda: _all_ended(committed, every), 60, "the four pairs to end")
    with Session(committed) as session:
        spans = {span.job_id: span for span in session.scalars(select(Span))}
        statuses = set(session.scalars(select(Job.status).where(Job.id.in_(every))))
    assert statuses == {"done"}
    for upstream_id, dependent_id in pairs.values():
        ended = spans[upstream_id].ended_at
        assert ended is not None
        assert spans[dependent_id].started_at >= ended
