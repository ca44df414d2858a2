"""The public enqueue API on every database: atomic with the app's transaction, keys, workflows.

Each test runs on PostgreSQL, SQLite and MariaDB (the committed engine of each): the
same calls, the same outcomes, read back on a connection of their own.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, update
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue
from sa_jobqueue.driver import worker_engine
from sa_jobqueue.statements.workflows import edges_of
from tests.support.models import Job, Order

#: Database -> the fixture of its committed engine (tests/support/databases.py).
ENGINES = {"postgresql": "committed", "sqlite": "sqlite_committed", "mariadb": "mariadb_committed"}


@pytest.fixture(params=sorted(ENGINES))
def db(request: pytest.FixtureRequest) -> Engine:
    engine: Engine = request.getfixturevalue(ENGINES[request.param])
    return engine


@pytest.fixture
def jobs() -> JobQueue[Job]:
    queue = JobQueue(Job)
    queue.task("send_receipt", queue="mail", max_attempts=5)(lambda ctx: None)
    queue.task("sync_crm")(lambda ctx: None)
    return queue


def stored(engine: Engine) -> list[Any]:
    """Every job as committed now, by id."""
    with engine.connect() as conn:
        return list(conn.execute(select(Job.__table__).order_by(Job.id)).all())


def orders(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(select(Order.id).order_by(Order.id)).scalars())


def end(engine: Engine, job_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(status="done"))


def test_enqueue_commits_with_the_apps_rows(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        session.add(Order(id=4, customer="dave", total_cents=2500))
        job = jobs.enqueue(session, "send_receipt", {"order_id": 4})
        plain = Job(kind="sync_crm", payload={"order_id": 4})
        session.add(plain)
        session.flush()
        assert (job.id, job.queue, job.max_attempts, job.status) == (job.id, "mail", 5, "pending")
        assert job.run_at == job.created_at  # due now, by the database clock
    rows = stored(db)
    assert [(r.kind, r.payload, r.status) for r in rows] == [
        ("send_receipt", {"order_id": 4}, "pending"),
        ("sync_crm", {"order_id": 4}, "pending"),
    ]
    assert orders(db) == [4]


def test_a_rolled_back_enqueue_never_existed(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session:
        session.add(Order(id=5, customer="erin", total_cents=100))
        jobs.enqueue(session, "send_receipt", {"order_id": 5}, idempotency_key="order:5")
        jobs.enqueue_many(session, [("sync_crm", {"i": i}) for i in range(3)])
        session.add(Job(kind="sync_crm", payload={}))
        session.flush()
        session.rollback()
    assert stored(db) == []
    assert orders(db) == []
    with Session(db) as session, session.begin():  # and so is its key
        job_id = jobs.enqueue(
            session, "send_receipt", {"order_id": 5}, idempotency_key="order:5"
        ).id
    assert [r.id for r in stored(db)] == [job_id]


def test_a_taken_key_returns_its_job_and_the_transaction_goes_on(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        first = jobs.enqueue(session, "send_receipt", {"n": 1}, idempotency_key="k")
        first_id = first.id
    with Session(db) as session, session.begin():
        again = jobs.enqueue(session, "send_receipt", {"n": 2}, idempotency_key="k")
        assert (again.id, again.payload) == (first_id, {"n": 1})
        many = jobs.enqueue_many(
            session,
            [
                ("sync_crm", {"n": 3}),
                {"kind": "send_receipt", "payload": {"n": 4}, "idempotency_key": "k"},
                {"kind": "sync_crm", "payload": {"n": 5}, "idempotency_key": "k2"},
            ],
        )
        assert many[1].id == first_id
        # Built from what the inserts returned: what the database holds.
        table = Job.__table__
        held = {r.id: r.created_at for r in session.execute(select(table.c.id, table.c.created_at))}
        assert [job.created_at for job in many] == [held[job.id] for job in many]
        session.add(Order(id=6, customer="fay", total_cents=1))  # the transaction is usable
    assert [r.payload for r in stored(db)] == [{"n": 1}, {"n": 3}, {"n": 5}]
    assert orders(db) == [6]


def test_a_conflicting_batch_rolled_back_leaves_nothing(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        jobs.enqueue(session, "sync_crm", {"n": 0}, idempotency_key="taken")
    with Session(db) as session:
        batch = [
            {"kind": "sync_crm", "payload": {"n": n}, "idempotency_key": f"k{n}"} for n in range(3)
        ]
        batch.insert(1, {"kind": "sync_crm", "payload": {"n": 9}, "idempotency_key": "taken"})
        assert len(jobs.enqueue_many(session, batch)) == 4
        session.rollback()
    assert [r.idempotency_key for r in stored(db)] == ["taken"]


def test_unique_key_dedupes_while_its_job_is_active(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        first = jobs.enqueue(session, "sync_crm", {"n": 1}, unique_key="report:42")
        assert jobs.enqueue(session, "sync_crm", {"n": 2}, unique_key="report:42").id == first.id
        first_id = first.id
    end(db, first_id)
    with Session(db) as session, session.begin():
        second_id = jobs.enqueue(session, "sync_crm", {"n": 3}, unique_key="report:42").id
    assert second_id != first_id
    assert [r.unique_key for r in stored(db)] == ["report:42", "report:42"]


def test_after_inserts_a_waiting_job_and_its_edges(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        a = jobs.enqueue(session, "sync_crm", {"step": "a"})
        b = jobs.enqueue(session, "sync_crm", {"step": "b"}, after=[a])
        ids = (a.id, b.id)
    rows = {r.id: r for r in stored(db)}
    assert (rows[ids[1]].status, rows[ids[1]].waiting_for) == ("waiting", 1)
    assert rows[ids[0]].has_dependents is True
    edges = edges_of(Job)
    with db.connect() as conn:
        assert conn.execute(select(edges.c.job_id, edges.c.upstream_id)).all() == [ids[::-1]]


def test_a_rolled_back_workflow_leaves_no_edge(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        a_id = jobs.enqueue(session, "sync_crm", {"step": "a"}).id
    with Session(db) as session:
        jobs.enqueue(session, "sync_crm", {"step": "b"}, after=[a_id])
        session.rollback()
    assert [r.id for r in stored(db)] == [a_id]
    with db.connect() as conn:
        assert conn.execute(select(edges_of(Job))).all() == []


def test_debounce_folds_and_throttle_returns_the_windows_job(db: Engine, jobs: JobQueue[Job]):
    window = timedelta(seconds=60)
    with Session(db) as session, session.begin():
        first = jobs.enqueue(session, "sync_crm", {"n": 1}, debounce=("cart:7", window))
        first_id = first.id
    with Session(db) as session, session.begin():
        folded = jobs.enqueue(session, "sync_crm", {"n": 2}, debounce=("cart:7", window))
        assert (folded.id, folded.payload) == (first_id, {"n": 2})
        throttled = jobs.enqueue(session, "sync_crm", {"n": 3}, throttle=("sync:1", window))
        again = jobs.enqueue(session, "sync_crm", {"n": 4}, throttle=("sync:1", window))
        assert again.id == throttled.id
    assert [r.payload for r in stored(db)] == [{"n": 2}, {"n": 3}]


def test_racing_transactions_on_one_key_get_one_job(db: Engine, jobs: JobQueue[Job]):
    got: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def enqueue(n: int) -> None:
        try:
            start.wait()
            with Session(db) as session, session.begin():
                job = jobs.enqueue(session, "sync_crm", {"n": n}, idempotency_key="race")
                got.append(job.id)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    [row] = stored(db)
    assert got == [row.id] * 6


def test_a_key_taken_after_the_transactions_first_read_returns_that_job(
    db: Engine, jobs: JobQueue[Job]
):
    # Under REPEATABLE READ (MariaDB's default) the first read fixes a snapshot that
    # misses the job committed after it: the lookup must still find its job.
    with Session(db) as session, session.begin():
        assert session.execute(select(Order)).all() == []  # the first read
        with Session(db) as other, other.begin():
            taken_id = jobs.enqueue(other, "sync_crm", {"n": 1}, idempotency_key="late").id
        job = jobs.enqueue(session, "sync_crm", {"n": 2}, idempotency_key="late")
        assert (job.id, job.payload) == (taken_id, {"n": 1})
        many = jobs.enqueue_many(
            session, [{"kind": "sync_crm", "payload": {"n": 3}, "idempotency_key": "late"}]
        )
        assert [j.id for j in many] == [taken_id]
    assert [r.id for r in stored(db)] == [taken_id]


def race(n: int, enqueue: Any) -> list[int]:
    """Run `enqueue(session, i)` in `n` threads at once, each in a transaction; the job ids."""
    got: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            with Session(DB[0]) as session, session.begin():
                got.append(enqueue(session, i).id)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return got


DB: list[Engine] = []


def test_racing_debounces_of_one_key_fold_into_one_job(db: Engine, jobs: JobQueue[Job]):
    DB[:] = [db]
    window = timedelta(seconds=60)
    got = race(6, lambda s, i: jobs.enqueue(s, "sync_crm", {"n": i}, debounce=("d", window)))
    [row] = stored(db)
    assert got == [row.id] * 6


def test_racing_throttles_of_one_key_get_one_job(db: Engine, jobs: JobQueue[Job]):
    DB[:] = [db]
    window = timedelta(seconds=60)
    got = race(6, lambda s, i: jobs.enqueue(s, "sync_crm", {"n": i}, throttle=("t", window)))
    [row] = stored(db)
    assert got == [row.id] * 6


def test_a_keys_lock_ends_with_its_transaction(db: Engine, jobs: JobQueue[Job]):
    window = timedelta(seconds=60)
    with db.connect() as first, db.connect() as second:
        with Session(bind=first) as session:
            jobs.enqueue(session, "sync_crm", {"n": 1}, throttle=("t", window))
            jobs.enqueue(session, "sync_crm", {"n": 1}, debounce=("d", window))
            session.rollback()
        with Session(bind=first) as session:  # closed without a commit
            jobs.enqueue(session, "sync_crm", {"n": 2}, throttle=("t", window))
        with Session(bind=first) as session, session.begin():
            jobs.enqueue(session, "sync_crm", {"n": 3}, throttle=("t", window))
        # `first` is idle, still checked out: a lock it kept would hold `second` up.
        with Session(bind=second) as session, session.begin():
            job = jobs.enqueue(session, "sync_crm", {"n": 4}, throttle=("t", window))
            assert job.payload == {"n": 3}
            jobs.enqueue(session, "sync_crm", {"n": 5}, debounce=("d", window))
    assert [r.payload for r in stored(db)] == [{"n": 3}, {"n": 5}]


def test_enqueue_many_ids_only_and_a_batch_commit_with_the_app(db: Engine, jobs: JobQueue[Job]):
    with Session(db) as session, session.begin():
        inserted = jobs.enqueue_many(
            session, [("sync_crm", {"i": i}) for i in range(3)], ids_only=True
        )
        assert len(session.identity_map) == 0
        batch = jobs.batch(session, callback=("sync_crm", {"report": True}))
        members = batch.enqueue_many([("sync_crm", {"member": i}) for i in range(2)])
        ids = list(inserted)  # ids_only: the ids
        callback_id, member_ids = batch.id, [job.id for job in members]
    rows = {r.id: r for r in stored(db)}
    assert [rows[i].payload for i in ids] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert (rows[callback_id].status, rows[callback_id].waiting_for) == ("waiting", 2)
    with db.connect() as conn:
        edges = edges_of(Job)
        waited = conn.execute(select(edges.c.upstream_id).where(edges.c.job_id == callback_id))
        assert sorted(waited.scalars()) == sorted(member_ids)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"delay": timedelta(hours=1)},
        {"run_at": datetime(2031, 5, 1, 12, 30, tzinfo=timezone.utc)},
        {"idempotency_key": "order-{}", "priority": 3},
    ],
    ids=["now", "delay", "run_at", "key"],
)
def test_one_enqueue_is_one_kept_statement_and_its_row_as_given(
    db: Engine, jobs: JobQueue[Job], options: dict[str, Any]
):
    # Each enqueue is one INSERT (RETURNING where the database has it: MariaDB reads no
    # row back), the statement kept per shape: the second enqueue runs the same object.
    ran: list[tuple[Any, str]] = []

    def seen(conn: Any, element: Any, *args: Any) -> None:
        ran.append((element, type(element).__name__))

    def enqueue(session: Session, i: int) -> Job:
        given = {k: v.format(i) if k == "idempotency_key" else v for k, v in options.items()}
        return jobs.enqueue(session, "sync_crm", {"i": i}, **given)

    with Session(db) as session, session.begin():
        enqueue(session, 0)  # its shape's first
        event.listen(db, "before_execute", seen)
        try:
            first, second = enqueue(session, 1), enqueue(session, 2)
        finally:
            event.remove(db, "before_execute", seen)
        ids = (first.id, second.id)
    assert [name for _, name in ran] == ["Insert", "Insert"], ran
    assert ran[0][0] is ran[1][0]
    rows = {r.id: r for r in stored(db)}
    for job_id, i in zip(ids, (1, 2), strict=True):
        row = rows[job_id]
        assert (row.kind, row.queue, row.payload, row.status) == (
            "sync_crm",
            "default",
            {"i": i},
            "pending",
        )
        assert row.priority == options.get("priority", 0)
        key = options.get("idempotency_key")
        assert row.idempotency_key == (key.format(i) if key else None)
        if "run_at" in options:
            assert row.run_at.replace(tzinfo=timezone.utc) == options["run_at"]
        elif "delay" in options:
            assert timedelta(minutes=59) < row.run_at - row.created_at <= timedelta(hours=1)
        else:
            assert row.run_at == row.created_at


def test_enqueue_on_a_model_event_commits_and_rolls_back_with_the_row(
    db: Engine, jobs: JobQueue[Job]
):
    declared = jobs.enqueue_on(Order, "insert", "send_receipt", payload=lambda o: {"id": o.id})
    try:
        with Session(db) as session, session.begin():
            session.add(Order(id=7, customer="gil", total_cents=5))
        with Session(db) as session:
            session.add(Order(id=8, customer="hal", total_cents=5))
            session.flush()
            session.rollback()
    finally:
        declared.remove()
    assert [(r.kind, r.payload) for r in stored(db)] == [("send_receipt", {"id": 7})]
    assert orders(db) == [7]


def test_a_keys_lock_taken_on_a_workers_engine_ends_with_its_transaction(
    db: Engine, jobs: JobQueue[Job]
):
    # A transactional handler enqueues through the worker's engine: on MariaDB a READ
    # COMMITTED copy of the app's, whose connections SQLAlchemy < 2.0.40 would not let
    # the GET_LOCK release listen on (`make floors` runs this test on 2.0.23).
    window = timedelta(seconds=60)
    with Session(worker_engine(db)) as session, session.begin():
        jobs.enqueue(session, "sync_crm", {"n": 1}, throttle=("t", window))
    with Session(worker_engine(db)) as session:
        jobs.enqueue(session, "sync_crm", {"n": 2}, debounce=("d", window))
        session.rollback()
    with Session(db) as session, session.begin():
        assert jobs.enqueue(session, "sync_crm", {"n": 3}, throttle=("t", window)).payload == {
            "n": 1
        }
        jobs.enqueue(session, "sync_crm", {"n": 4}, debounce=("d", window))
    assert [r.payload for r in stored(db)] == [{"n": 1}, {"n": 4}]


#: Database -> the async driver that takes its URL (each `jobs.aenqueue` needs one).
ASYNC_DRIVERS = {"postgresql": "psycopg", "sqlite": "aiosqlite", "mariadb": "aiomysql"}


def test_aenqueue_commits_and_rolls_back_with_the_app_and_ends_its_key_locks(
    db: Engine, jobs: JobQueue[Job]
):
    url = db.url.set(drivername=f"{db.url.get_backend_name()}+{ASYNC_DRIVERS[db.dialect.name]}")
    window = timedelta(seconds=60)

    async def body() -> None:
        # SQLite: wait for the one writer, as the sync engine does.
        options: Any = {"connect_args": {"timeout": 30}} if db.dialect.name == "sqlite" else {}
        engine = create_async_engine(url, **options)
        try:
            async with AsyncSession(engine) as session, session.begin():
                session.add(Order(id=9, customer="ida", total_cents=1))
                await jobs.aenqueue(session, "sync_crm", {"n": 1}, idempotency_key="a")
                await jobs.aenqueue(session, "sync_crm", {"n": 2}, throttle=("t", window))
            async with AsyncSession(engine) as session:
                await jobs.aenqueue_many(session, [("sync_crm", {"n": 3})])
                await jobs.aenqueue(session, "sync_crm", {"n": 4}, throttle=("r", window))
                await session.rollback()
            async with AsyncSession(engine) as session, session.begin():
                again = await jobs.aenqueue(session, "sync_crm", {"n": 5}, idempotency_key="a")
                assert again.payload == {"n": 1}
            # The async connections stay pooled, idle: a key lock one of them kept
            # (MariaDB's GET_LOCK is the session's) would hold this sync one up.
            with Session(db) as sync, sync.begin():
                same = jobs.enqueue(sync, "sync_crm", {"n": 6}, throttle=("t", window))
                assert same.payload == {"n": 2}
                jobs.enqueue(sync, "sync_crm", {"n": 7}, throttle=("r", window))
        finally:
            await engine.dispose()

    asyncio.run(body())
    assert [r.payload for r in stored(db)] == [{"n": 1}, {"n": 2}, {"n": 7}]
    assert orders(db) == [9]


def test_racing_unique_keys_and_overlapping_batches_get_one_job_per_key(
    db: Engine, jobs: JobQueue[Job]
):
    DB[:] = [db]
    got = race(4, lambda s, i: jobs.enqueue(s, "sync_crm", {"n": i}, unique_key="u"))
    assert len(set(got)) == 1

    def batch(session: Session, i: int) -> Any:
        keys = ["a", "b", "c", "d"] if i % 2 else ["d", "c", "b", "a"]
        items = [{"kind": "sync_crm", "payload": {"k": k}, "idempotency_key": k} for k in keys]
        return jobs.enqueue_many(session, items)[0]

    race(4, batch)
    keys = [r.idempotency_key or r.unique_key for r in stored(db)]
    assert sorted(keys) == ["a", "b", "c", "d", "u"]


def test_a_large_batch_with_a_taken_key_shares_one_now_and_keeps_its_order(
    db: Engine, jobs: JobQueue[Job]
):
    with Session(db) as session, session.begin():
        taken_id = jobs.enqueue(session, "sync_crm", {"i": -1}, idempotency_key="taken").id
    items: list[Any] = [("sync_crm", {"i": i}) for i in range(2500)]
    items[2000] = {"kind": "sync_crm", "payload": {"i": 2000}, "idempotency_key": "taken"}
    with Session(db) as session, session.begin():
        made = jobs.enqueue_many(session, items)
        assert made[2000].id == taken_id
        assert [job.payload["i"] for job in made] == [-1 if i == 2000 else i for i in range(2500)]
    rows = [r for r in stored(db) if r.id != taken_id]
    assert len(rows) == 2499
    assert [r.payload["i"] for r in rows] == [i for i in range(2500) if i != 2000]
    assert len({r.created_at for r in rows}) == 1  # one now() for the whole batch
