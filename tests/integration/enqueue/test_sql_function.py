"""``jobs_enqueue(...)``, the SQL function: the Python enqueue's rows and refusals, from SQL.

Each case runs through `JobQueue.enqueue` and through the function, and the rows (or
the refusals) are compared. See docs/recipes/sql-and-triggers.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.types import BigInteger

from sa_jobqueue import JobQueue, ValidationError
from tests.support.models import Job

#: The columns an enqueue decides (ids, times and the worker's columns aside).
DECIDED = (
    "kind",
    "queue",
    "payload",
    "status",
    "priority",
    "max_attempts",
    "idempotency_key",
    "unique_key",
    "waiting_for",
    "after_failure",
    "last_error",
    "attempts",
)


def _sql_enqueue(session: Session, kind: Any, payload: Any = None, **options: Any) -> int:
    """Call ``jobs_enqueue`` with named arguments, as a psql user would."""
    named = "".join(f", {name} => :{name}" for name in options)
    params: dict[str, Any] = {"kind": kind, "payload": payload, **options}
    query = text(f"SELECT jobs_enqueue(:kind, :payload{named})").bindparams(
        bindparam("payload", type_=JSONB, value=payload)
    )
    if "after" in options:
        query = query.bindparams(bindparam("after", type_=ARRAY(BigInteger)))
    return int(session.execute(query, params).scalar_one())


def _row(session: Session, job_id: int) -> dict[str, Any]:
    row = session.execute(select(Job).where(Job.id == job_id)).scalar_one()
    return {name: getattr(row, name) for name in DECIDED}


@pytest.fixture
def jobs() -> JobQueue[Job]:
    return JobQueue(Job)


@pytest.fixture
def upstream(session: Session, jobs: JobQueue[Job]) -> dict[str, int]:
    """Three upstream jobs: one pending, one done, one failed."""
    ids = {
        name: jobs.enqueue(session, "up", {"n": name}).id for name in ("pending", "done", "failed")
    }
    session.execute(text("UPDATE jobs SET status = 'done' WHERE id = :i"), {"i": ids["done"]})
    session.execute(text("UPDATE jobs SET status = 'failed' WHERE id = :i"), {"i": ids["failed"]})
    return ids


CASES: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"kind": "send_receipt", "payload": {"order_id": 4}}),
    ("options", {"kind": "a", "payload": {"x": [1, 2]}, "queue": "mail", "priority": -3}),
    ("attempts", {"kind": "a", "payload": {}, "max_attempts": 5}),
    ("idempotency", {"kind": "a", "payload": {}, "idempotency_key": "k-1"}),
    ("unique", {"kind": "a", "payload": {}, "unique_key": "u-1"}),
]


@pytest.mark.parametrize(("case", "call"), CASES, ids=[case for case, _ in CASES])
def test_the_function_writes_the_row_the_python_enqueue_writes(
    session: Session, jobs: JobQueue[Job], case: str, call: dict[str, Any]
):
    call = dict(call)
    kind, payload = call.pop("kind"), call.pop("payload")
    by_python = jobs.enqueue(session, kind, payload, **call).id
    python_row = _row(session, by_python)
    session.execute(text("DELETE FROM jobs"))
    by_sql = _sql_enqueue(session, kind, payload, **call)
    assert _row(session, by_sql) == python_row


@pytest.mark.parametrize("which", ["pending", "done", "failed"])
def test_after_makes_the_job_python_would_make(
    session: Session, jobs: JobQueue[Job], upstream: dict[str, int], which: str
):
    after = [upstream[which]]
    by_python = jobs.enqueue(session, "down", {}, after=after).id
    by_sql = _sql_enqueue(session, "down", {}, after=after)
    python_row, sql_row = _row(session, by_python), _row(session, by_sql)
    if which == "failed":
        assert python_row["status"] == "cancelled"
    assert sql_row == python_row
    edges = session.execute(
        text("SELECT job_id, upstream_id FROM sa_jobqueue_deps_jobs ORDER BY job_id")
    ).all()
    assert [tuple(edge) for edge in edges] == [(by_python, after[0]), (by_sql, after[0])]


def test_a_taken_key_returns_the_existing_job_as_python_does(session: Session, jobs: JobQueue[Job]):
    first = _sql_enqueue(session, "a", {"n": 1}, idempotency_key="same")
    assert _sql_enqueue(session, "a", {"n": 2}, idempotency_key="same") == first
    assert jobs.enqueue(session, "a", {"n": 3}, idempotency_key="same").id == first
    held = jobs.enqueue(session, "b", {}, unique_key="active").id
    assert _sql_enqueue(session, "b", {}, unique_key="active") == held
    assert session.scalar(text("SELECT count(*) FROM jobs")) == 2


BAD: list[tuple[str, dict[str, Any]]] = [
    ("empty kind", {"kind": ""}),
    ("kind with a space", {"kind": "send receipt"}),
    ("long kind", {"kind": "k" * 129}),
    ("bad queue", {"kind": "a", "queue": "no queue"}),
    ("priority", {"kind": "a", "priority": 40000}),
    ("max_attempts", {"kind": "a", "max_attempts": 0}),
    ("empty key", {"kind": "a", "idempotency_key": ""}),
    ("long key", {"kind": "a", "unique_key": "u" * 513}),
    ("unknown upstream", {"kind": "a", "after": [987654321]}),
    ("upstream not an id", {"kind": "a", "after": [-4]}),
    ("payload too large", {"kind": "a", "payload": {"s": "x" * (1024 * 1024)}}),
]


def _refusal_of_python(session: Session, jobs: JobQueue[Job], call: dict[str, Any]) -> str:
    call = dict(call)
    with pytest.raises(ValidationError) as raised:
        jobs.enqueue(session, call.pop("kind"), call.pop("payload", None), **call)
    return str(raised.value).replace("None", "NULL")


def _refusal_of_sql(engine: Engine, call: dict[str, Any]) -> str:
    call = dict(call)
    with Session(engine) as session, pytest.raises(DBAPIError) as raised:
        _sql_enqueue(session, call.pop("kind"), call.pop("payload", None), **call)
    assert getattr(raised.value.orig, "sqlstate", None) == "22023"
    return str(raised.value.orig).splitlines()[0]


@pytest.mark.parametrize(("case", "call"), BAD, ids=[case for case, _ in BAD])
def test_a_bad_argument_is_refused_as_python_refuses_it(
    committed: Engine, jobs: JobQueue[Job], case: str, call: dict[str, Any]
):
    with Session(committed) as session:
        by_python = _refusal_of_python(session, jobs, call)
    by_sql = _refusal_of_sql(committed, call)
    if case == "payload too large":  # each measures its own JSON text, a few bytes apart
        assert by_python.startswith("payload='<")
        assert by_sql.startswith("payload='<")
        assert by_python.split("': ")[1] == by_sql.split("': ")[1]
    else:
        assert by_sql == by_python
    with committed.connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM jobs")) == 0


def test_a_rolled_back_call_leaves_no_job(committed: Engine):
    with Session(committed) as session:
        _sql_enqueue(session, "a", {"n": 1})
        session.rollback()
    with committed.connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM jobs")) == 0


def test_a_trigger_enqueues_in_the_rows_transaction_and_not_for_a_rolled_back_row(
    committed: Engine, jobs: JobQueue[Job]
):
    with committed.begin() as connection:
        connection.execute(text("CREATE TABLE sql_fn_orders (id bigint PRIMARY KEY)"))
        connection.execute(
            text(
                "CREATE FUNCTION sql_fn_orders_receipt() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN PERFORM jobs_enqueue('send_receipt',"
                " jsonb_build_object('order_id', NEW.id)); RETURN NEW; END $$"
            )
        )
        connection.execute(
            text(
                "CREATE TRIGGER receipt AFTER INSERT ON sql_fn_orders"
                " FOR EACH ROW EXECUTE FUNCTION sql_fn_orders_receipt()"
            )
        )
    try:
        with committed.begin() as connection:
            connection.execute(text("INSERT INTO sql_fn_orders VALUES (1)"))
        with committed.connect() as connection:
            connection.execute(text("INSERT INTO sql_fn_orders VALUES (2)"))
            connection.rollback()
        seen: list[int] = []
        jobs.task("send_receipt")(lambda ctx: seen.append(ctx.payload["order_id"]))
        assert jobs.worker(committed).drain() == 1
        assert seen == [1]
    finally:
        with committed.begin() as connection:
            connection.execute(text("DROP TABLE sql_fn_orders"))
            connection.execute(text("DROP FUNCTION sql_fn_orders_receipt()"))
