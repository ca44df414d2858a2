"""Invariant 10: bad input gets a clear error at the call that made it, and never
corrupts or loses another job.

One parametrized case per bad input (`CASES`). Each checks the exact error (type
and message, which names the field and the value), that nothing was sent to the
database and nothing flushed,
and that the caller's transaction stays usable: its order and the job enqueued
before the bad call commit, an earlier committed job is untouched, and the jobs
table holds exactly those rows afterwards.

Every error here is a `ValidationError` (a `ValueError`) or its subclass
`PayloadError`; the library raises no `TypeError` for bad values, so a caller
needs one ``except ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, PayloadError, ValidationError
from sa_jobqueue.core.validation import MAX_DELAY_SECONDS
from tests.support.models import Job, Order

Call = Callable[[JobQueue[Job], Session], object]


class Money:
    """Something a payload cannot hold (with a stable repr for the message)."""

    def __repr__(self) -> str:
        return "Money(5)"


def _jobs_table(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        result = connection.execute(select(Job.__table__).order_by(Job.id))
        return [dict(row._mapping) for row in result]


def _visible(session: Session) -> list[dict[str, Any]]:
    """The jobs table as the session's own transaction sees it, without autoflush."""
    result = session.connection().execute(select(Job.__table__).order_by(Job.id))
    return [dict(row._mapping) for row in result]


def _rejected(
    engine: Engine,
    call: Call,
    error: type[ValidationError],
    message: str,
    *,
    field: str,
    jobs: JobQueue[Job] | None = None,
) -> None:
    """Run `call` in a transaction that has done work; check it fails cleanly."""
    jobs = jobs or JobQueue(Job)
    with Session(engine) as session, session.begin():
        jobs.enqueue(session, "earlier", {"n": 0}, idempotency_key="earlier")
    committed_before = _jobs_table(engine)

    with Session(engine) as session:
        session.begin()
        session.add(Order(id=1, customer="alice", total_cents=4200))
        jobs.enqueue(session, "send_receipt", {"order_id": 1})
        visible_before = _visible(session)
        unflushed = Order(id=2, customer="bob", total_cents=1500)
        session.add(unflushed)
        sent: list[str] = []

        def record(conn, cursor, statement, parameters, context, executemany):
            sent.append(statement)

        connection = session.connection()
        event.listen(connection, "before_cursor_execute", record)
        try:
            with pytest.raises(ValueError) as caught:  # noqa: PT011 - checked exactly below
                call(jobs, session)
        finally:
            event.remove(connection, "before_cursor_execute", record)

        assert type(caught.value) is error
        assert not isinstance(caught.value, TypeError)
        assert str(caught.value) == message
        assert caught.value.field == field
        # Raised before anything touched the session or the database:
        assert sent == []
        assert unflushed in session.new
        assert session.in_transaction()
        assert _visible(session) == visible_before
        # ...so the caller's unit of work goes on and commits.
        jobs.enqueue(session, "send_receipt", {"order_id": 2})
        session.commit()

    rows = _jobs_table(engine)
    assert rows[0] == committed_before[0]
    assert [(r["kind"], r["payload"]) for r in rows] == [
        ("earlier", {"n": 0}),
        ("send_receipt", {"order_id": 1}),
        ("send_receipt", {"order_id": 2}),
    ]
    with engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(Order)) == 2


def _long(text: str) -> str:
    """How a too-long string value appears in a message: its repr, cut at 77 + '...'."""
    return repr(text)[:77] + "..."


# Values the cases below refer to.
CIRCULAR: list[object] = []
CIRCULAR.append(CIRCULAR)
BIG = "é" * (512 * 1024)  # 512 Ki characters, 1 MiB of UTF-8, plus the quotes
NAIVE = datetime(2030, 1, 2, 3, 4, 5)  # the bad input under test
WHEN = datetime(2030, 1, 1, tzinfo=timezone.utc)


CASES = [
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "charge", {"amount": Money()}),
        PayloadError,
        "payload['amount']=Money(5): Money is not JSON-serialisable",
        "payload",
        None,
        id="payload_not_json_serialisable",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "tag", {"tags": {"a"}}),
        PayloadError,
        "payload['tags']={'a'}: set is not JSON-serialisable",
        "payload",
        None,
        id="payload_set_not_json_serialisable",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "measure", {"value": math.nan}),
        PayloadError,
        "payload['value']=nan: NaN and Infinity are not JSON",
        "payload",
        None,
        id="payload_nan",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "measure", {"values": [1.0, -math.inf]}),
        PayloadError,
        "payload['values'][1]=-inf: NaN and Infinity are not JSON",
        "payload",
        None,
        id="payload_infinity",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", {"body": "hello\x00world"}),
        PayloadError,
        "payload['body']='hello\\x00world': holds a NUL character (\\u0000), "
        "which PostgreSQL refuses",
        "payload",
        None,
        id="payload_nul_in_string_value",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", {"bo\x00dy": "hello"}),
        PayloadError,
        "payload['bo\\x00dy']='bo\\x00dy': holds a NUL character (\\u0000), "
        "which PostgreSQL refuses",
        "payload",
        None,
        id="payload_nul_in_key",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", {"name": "Zo\ud800"}),
        PayloadError,
        "payload['name']='Zo\\ud800': holds a lone surrogate, which is not valid Unicode text",
        "payload",
        None,
        id="payload_lone_surrogate",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", {"\udc80": 1}),
        PayloadError,
        "payload['\\udc80']='\\udc80': holds a lone surrogate, which is not valid Unicode text",
        "payload",
        None,
        id="payload_lone_surrogate_in_key",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", {"orders": {4: "dave"}}),
        PayloadError,
        "payload['orders']=4: has a key of type int; JSON object keys must be str",
        "payload",
        None,
        id="payload_non_string_dict_key",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", CIRCULAR),
        PayloadError,
        "payload" + "[0]" * 201 + "='...': is nested deeper than 200 levels (or circular)",
        "payload",
        None,
        id="payload_circular",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", {"text": "x" * 100}),
        PayloadError,
        "payload='<111 bytes of JSON>': is larger than the 100-byte limit",
        "payload",
        JobQueue(Job, max_payload_bytes=100),
        id="payload_above_configured_max_payload_bytes",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", BIG),
        PayloadError,
        "payload='<1048578 bytes of JSON>': is larger than the 1048576-byte limit",
        "payload",
        None,
        id="payload_above_default_one_mebibyte",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, ""),
        ValidationError,
        "kind='': must not be empty",
        "kind",
        None,
        id="empty_kind",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, 42),
        ValidationError,
        "kind=42: must be a str, not int",
        "kind",
        None,
        id="non_string_kind",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", queue=""),
        ValidationError,
        "queue='': must not be empty",
        "queue",
        None,
        id="empty_queue",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", queue=["mail"]),
        ValidationError,
        "queue=['mail']: must be a str, not list",
        "queue",
        None,
        id="non_string_queue",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "k" * 129),
        ValidationError,
        f"kind={_long('k' * 129)}: must be at most 128 characters",
        "kind",
        None,
        id="kind_too_long",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", queue="q" * 129),
        ValidationError,
        f"queue={_long('q' * 129)}: must be at most 128 characters",
        "queue",
        None,
        id="queue_too_long",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send receipt"),
        ValidationError,
        "kind='send receipt': may only hold ASCII letters, digits and _ . : / - "
        "(and start with a letter, digit or _)",
        "kind",
        None,
        id="kind_outside_grammar",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", queue="-mail"),
        ValidationError,
        "queue='-mail': may only hold ASCII letters, digits and _ . : / - "
        "(and start with a letter, digit or _)",
        "queue",
        None,
        id="queue_outside_grammar",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", max_attempts=0),
        ValidationError,
        "max_attempts=0: must be between 1 and 2147483647",
        "max_attempts",
        None,
        id="max_attempts_below_one",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", priority=32768),
        ValidationError,
        "priority=32768: must be between -32768 and 32767",
        "priority",
        None,
        id="priority_above_smallint",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", priority=-32769),
        ValidationError,
        "priority=-32769: must be between -32768 and 32767",
        "priority",
        None,
        id="priority_below_smallint",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", run_at=NAIVE),
        ValidationError,
        "run_at=datetime.datetime(2030, 1, 2, 3, 4, 5): must be timezone-aware "
        "(e.g. datetime.now(timezone.utc))",
        "run_at",
        None,
        id="naive_run_at",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", run_at=WHEN, delay=5),
        ValidationError,
        "delay=5: give either run_at or delay, not both",
        "delay",
        None,
        id="both_delay_and_run_at",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", delay=timedelta(seconds=-1)),
        ValidationError,
        "delay=datetime.timedelta(days=-1, seconds=86399): must not be negative",
        "delay",
        None,
        id="negative_delay",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", delay=math.inf),
        ValidationError,
        "delay=inf: must be finite",
        "delay",
        None,
        id="infinite_delay",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", delay=math.nan),
        ValidationError,
        "delay=nan: must be finite",
        "delay",
        None,
        id="nan_delay",
    ),
    # Unchecked, PostgreSQL failed the INSERT (timestamp out of range) and aborted
    # the caller's transaction; a slightly smaller one inserted a run_at past year
    # 9999 that Python then failed to load, after the row was already written.
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", delay=1e12),
        ValidationError,
        "delay=1000000000000.0: must be at most 3155760000s (100 years)",
        "delay",
        None,
        id="delay_beyond_a_hundred_years",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", idempotency_key=""),
        ValidationError,
        "idempotency_key='': must not be empty (use None for no key)",
        "idempotency_key",
        None,
        id="empty_idempotency_key",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue(s, "send", idempotency_key="order:\x00"),
        ValidationError,
        "idempotency_key='order:\\x00': holds a NUL character (\\u0000), which PostgreSQL refuses",
        "idempotency_key",
        None,
        id="idempotency_key_with_nul",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue_many(s, {"kind": "send"}),
        ValidationError,
        "items={'kind': 'send'}: must be a list of (kind, payload) pairs or of dicts",
        "items",
        None,
        id="enqueue_many_not_a_list",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue_many(s, [("send", {}), ("send", {}, "mail")]),
        ValidationError,
        "items[1]: item=('send', {}, 'mail'): must be a (kind, payload) pair or a dict",
        "item",
        None,
        id="enqueue_many_item_not_a_pair",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue_many(s, [{"kind": "send", "retries": 3}]),
        ValidationError,
        "items[0]: item={'kind': 'send', 'retries': 3}: unknown keys ['retries']",
        "item",
        None,
        id="enqueue_many_item_with_unknown_key",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue_many(s, [{"payload": {"order_id": 1}}]),
        ValidationError,
        "items[0]: item={'payload': {'order_id': 1}}: has no 'kind'",
        "item",
        None,
        id="enqueue_many_item_without_kind",
    ),
    pytest.param(
        lambda jobs, s: jobs.enqueue_many(
            s,
            [
                ("send_receipt", {"order_id": 3}),
                {"kind": "create_invoice", "idempotency_key": "invoice:3"},
                ("sync_crm", {"score": math.nan}),
                ("send_receipt", {"order_id": 4}),
            ],
        ),
        PayloadError,
        "items[2]: payload['score']=nan: NaN and Infinity are not JSON",
        "payload",
        None,
        id="enqueue_many_one_bad_item_rejects_the_whole_batch",
    ),
]


@pytest.mark.parametrize(("call", "error", "message", "field", "jobs"), CASES)
def test_bad_input_is_rejected_at_the_call_and_the_transaction_goes_on(
    committed, call, error, message, field, jobs
):
    _rejected(committed, call, error, message, field=field, jobs=jobs)


# --- the limits are inclusive ----------------------------------------------------------


def test_values_at_every_limit_are_accepted_and_stored(committed):
    jobs = JobQueue(Job, max_payload_bytes=64)
    emoji_key = "🔑" * 512  # 512 characters, 2048 bytes: still fits the unique index
    with Session(committed) as session, session.begin():
        rows = [
            jobs.enqueue(session, "k" * 128, queue="q" * 128, priority=32767),
            jobs.enqueue(session, "_", queue="a.b:c/d-e_9", priority=-32768),
            jobs.enqueue(session, "x", idempotency_key=emoji_key, max_attempts=2**31 - 1),
            jobs.enqueue(session, "x", {"t": "y" * 56}, delay=MAX_DELAY_SECONDS),  # 64 bytes
            jobs.enqueue(session, "x", run_at=datetime(9999, 12, 31, 23, 59, tzinfo=timezone.utc)),
            jobs.enqueue(session, "x", {"nested": [[[{"ok": None, "n": -0.5}]]], "e": ""}),
        ]
        ids = [job.id for job in rows]
    stored = {r["id"]: r for r in _jobs_table(committed)}
    assert len(stored) == 6
    assert stored[ids[0]]["kind"] == "k" * 128
    assert stored[ids[1]]["priority"] == -32768
    assert stored[ids[2]]["idempotency_key"] == emoji_key
    assert stored[ids[3]]["payload"] == {"t": "y" * 56}
    assert stored[ids[4]]["run_at"].year == 9999
    assert stored[ids[5]]["payload"] == {"nested": [[[{"ok": None, "n": -0.5}]]], "e": ""}
