"""Bad input at scale: hypothesis drives `enqueue`/`enqueue_many` with valid and invalid
kinds, queues, payloads, dates, delays, priorities, attempts and keys.

Each case either stores a job that reads back exactly as given (through a fresh
session), or raises the documented error (`PayloadError` for payloads,
`ValidationError` for everything else) and leaves the table, and the caller's
transaction, as they were. The expectation comes from the rules written in
`sa_jobqueue.core.validation`'s docstring, re-stated here, not from calling them.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, PayloadError, ValidationError
from tests.support.models import Job

MAX_BYTES = 2048
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*")
HUNDRED_YEARS = 100 * 365.25 * 86400
UNSET = object()

jobs = JobQueue(Job, max_payload_bytes=MAX_BYTES)
jobs.task("send_receipt", queue="mail", max_attempts=5)(lambda ctx: None)
jobs.task("create_invoice", transactional=True)(lambda ctx: None)

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- strategies: the valid and the invalid side by side -------------------------------

valid_names = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,40}\Z") | st.sampled_from(
    ["send_receipt", "create_invoice", "mail", "default", "a" * 128]
)
names = (
    valid_names
    | st.sampled_from(["", "a" * 129, "-lead", ".x", "has space", "naïve", "x\x00", "é"])
    | st.text(max_size=12)
    | st.integers()
    | st.none()
    | st.binary(max_size=4)
)
texts = st.text(max_size=20) | st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfff", "ß€𝄞"])
numbers = (
    st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([1e300, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 2**53 + 1])
)
scalars = st.none() | st.booleans() | numbers | texts
payloads = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(texts, inner, max_size=4)
        | st.dictionaries(st.integers(0, 3) | st.none(), inner, min_size=1, max_size=2)
    ),
    max_leaves=12,
) | st.sampled_from(
    [
        {"big": "x" * MAX_BYTES},
        {"set": {1, 2}},
        {"bytes": b"x"},
        {"when": datetime(2030, 1, 1, tzinfo=timezone.utc)},
    ]
)
zones = st.sampled_from(
    [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)
# The first and last day Python has: with an offset, UTC may fall outside them.
# (st.datetimes(timezones=...) never generates those, so attach the zone by hand.)
edge_days = st.datetimes(max_value=datetime(1, 1, 1, 9)) | st.datetimes(
    min_value=datetime(9999, 12, 31, 15)
)
aware = st.datetimes(timezones=zones) | st.builds(
    lambda naive, zone: naive.replace(tzinfo=zone), edge_days, zones
)
dates = (
    st.none()
    | aware
    | st.datetimes()
    | st.sampled_from(
        [
            "2030-01-01",
            0,
            datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),  # 1 BC in UTC
            datetime(9999, 12, 31, 23, tzinfo=timezone(-timedelta(hours=8))),  # year 10000
            datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        ]
    )
)
delays = (
    st.none()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.timedeltas(min_value=timedelta(days=-10), max_value=timedelta(days=999_999))
    | st.sampled_from([True, "5", 0, HUNDRED_YEARS, HUNDRED_YEARS + 1])
)
priorities = st.integers(min_value=-(2**16), max_value=2**16) | st.sampled_from(
    [True, 1.0, "1", None]
)
attempts = st.none() | st.integers(min_value=-2, max_value=2**32) | st.sampled_from([True, 2.0])
keys = st.none() | texts | st.sampled_from(["", "k" * 512, "k" * 513, "order:4:receipt", 7])


clean_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=20
)
clean_payloads = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | clean_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(clean_text, inner, max_size=4),
    max_leaves=10,
)
#: field -> (a valid value, anything at all)
FIELDS = {
    "payload": (clean_payloads, payloads),
    "queue": (valid_names, st.none() | names),
    "priority": (st.integers(min_value=-(2**15), max_value=2**15 - 1), priorities),
    "run_at": (aware, dates),
    "delay": (
        st.floats(min_value=0, max_value=HUNDRED_YEARS)
        | st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=36_000)),
        delays,
    ),
    "max_attempts": (st.integers(min_value=1, max_value=2**31 - 1), attempts),
    "idempotency_key": (clean_text.filter(bool), keys),
}


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments for `enqueue`: mostly valid, each field bad now and then."""
    call: dict[str, Any] = {"kind": draw(names if draw(st.integers(0, 9)) == 0 else valid_names)}
    for name, (valid, anything) in FIELDS.items():
        if draw(st.booleans()):
            call[name] = draw(anything if draw(st.integers(0, 5)) == 0 else valid)
    return call


# -- the documented rules, re-stated ---------------------------------------------------


def _name_ok(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 128 and bool(NAME.fullmatch(value))


def _text_ok(value: str) -> bool:
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_ok(value: object) -> bool:
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return _text_ok(value)
    if isinstance(value, list):
        return all(_json_ok(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _text_ok(k) and _json_ok(v) for k, v in value.items())
    return False


def _payload_ok(value: object) -> bool:
    if not _json_ok(value):
        return False
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return size <= MAX_BYTES


def _in_utc_range(value: datetime) -> bool:
    """Aware, and a real date (years 1 to 9999) once moved to UTC, as PostgreSQL stores it."""
    offset = value.utcoffset()
    if offset is None:
        return False
    try:
        value.replace(tzinfo=None) - offset
    except OverflowError:
        return False
    return True


def _seconds(value: object) -> float | None:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return math.inf
    return None


def problem(call: dict[str, Any]) -> type[ValidationError] | None:
    """The error the documented rules promise for `call`, or None if it is valid."""
    invalid: list[type[ValidationError]] = []
    if not _name_ok(call["kind"]):
        invalid.append(ValidationError)
    if call.get("queue") is not None and not _name_ok(call["queue"]):
        invalid.append(ValidationError)
    if "payload" in call and call["payload"] is not None and not _payload_ok(call["payload"]):
        invalid.append(PayloadError)
    priority = call.get("priority", 0)
    if not (isinstance(priority, int) and not isinstance(priority, bool)) or not (
        -(2**15) <= priority < 2**15
    ):
        invalid.append(ValidationError)
    max_attempts = call.get("max_attempts")
    if max_attempts is not None and (
        not isinstance(max_attempts, int)
        or isinstance(max_attempts, bool)
        or not 1 <= max_attempts < 2**31
    ):
        invalid.append(ValidationError)
    run_at, delay = call.get("run_at"), call.get("delay")
    if run_at is not None and delay is not None:
        invalid.append(ValidationError)
    if run_at is not None and not (isinstance(run_at, datetime) and _in_utc_range(run_at)):
        invalid.append(ValidationError)
    if delay is not None:
        seconds = _seconds(delay)
        if seconds is None or not math.isfinite(seconds) or not 0 <= seconds <= HUNDRED_YEARS:
            invalid.append(ValidationError)
    key = call.get("idempotency_key")
    if key is not None and (
        not isinstance(key, str) or not 0 < len(key) <= 512 or not _text_ok(key)
    ):
        invalid.append(ValidationError)
    if not invalid:
        return None
    # Several problems: any of them may be reported first; all are ValidationErrors.
    return invalid[0] if len(invalid) == 1 else ValidationError


def same(stored: Any, given: Any) -> bool:
    """JSON equality as jsonb keeps it: numbers compare by value (jsonb stores numeric)."""
    if isinstance(given, bool) or given is None or isinstance(given, str):
        return type(stored) is type(given) and stored == given
    if isinstance(given, float):
        return (
            isinstance(stored, (int, float))
            and not isinstance(stored, bool)
            and (float(stored) == given)
        )
    if isinstance(given, int):
        return isinstance(stored, int) and not isinstance(stored, bool) and stored == given
    if isinstance(given, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(given)
            and all(same(s, g) for s, g in zip(stored, given, strict=True))
        )
    if isinstance(given, dict):
        return (
            isinstance(stored, dict)
            and stored.keys() == given.keys()
            and all(same(stored[k], given[k]) for k in given)
        )
    return False


# -- the properties ---------------------------------------------------------------------


def _snapshot(engine: Engine) -> tuple[int, int]:
    with Session(engine) as session:
        count, top = session.execute(select(func.count(), func.max(Job.id))).one()
        return count, top or 0


def _existing(engine: Engine, key: object) -> Job | None:
    if not isinstance(key, str) or not _text_ok(key):
        return None
    with Session(engine) as session:
        return session.scalars(select(Job).where(Job.idempotency_key == key)).first()


def _check_stored(engine: Engine, job_id: int, call: dict[str, Any]) -> None:
    with Session(engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        task = jobs.get_task(call["kind"])
        assert job.kind == call["kind"]
        expected_queue = call.get("queue") or (task.queue if task else "default")
        assert job.queue == expected_queue
        payload = call.get("payload")
        assert same(job.payload, {} if payload is None else payload), (job.payload, payload)
        assert job.priority == call.get("priority", 0)
        max_attempts = call.get("max_attempts") or (
            task.max_attempts if task and task.max_attempts else 20
        )
        assert job.max_attempts == max_attempts
        assert job.idempotency_key == call.get("idempotency_key")
        assert job.status == "pending"
        assert job.attempts == 0
        if call.get("run_at") is not None:
            assert job.run_at == call["run_at"]
        else:
            delay = _seconds(call.get("delay")) or 0.0
            expected = job.created_at + timedelta(seconds=delay)
            assert abs((job.run_at - expected).total_seconds()) < 1e-3


@pytest.mark.slow
@given(call=calls())
@SETTINGS
def test_enqueue_stores_exactly_or_rejects_cleanly(committed: Engine, call: dict[str, Any]) -> None:
    engine = committed
    expected_error = problem(call)
    before = _snapshot(engine)
    existing = _existing(engine, call.get("idempotency_key"))
    arguments = dict(call)
    kind = arguments.pop("kind")
    payload = arguments.pop("payload", None)
    with Session(engine) as session:
        session.begin()
        if expected_error is not None:
            with pytest.raises(expected_error):
                jobs.enqueue(session, kind, payload, **arguments)
            # The caller's transaction is still usable and nothing was added to it.
            assert session.scalar(select(func.count()).select_from(Job)) == before[0]
            session.commit()
            assert _snapshot(engine) == before
            return
        job = jobs.enqueue(session, kind, payload, **arguments)
        job_id = job.id
        session.commit()
    if existing is not None:
        # Invariant 7: the key's row comes back unchanged, and nothing is inserted.
        assert job_id == existing.id
        assert _snapshot(engine) == before
        return
    assert _snapshot(engine) == (before[0] + 1, job_id)
    _check_stored(engine, job_id, call)


@pytest.mark.slow
@given(batch=st.lists(calls(), min_size=1, max_size=4))
@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_enqueue_many_rejects_the_whole_batch_for_one_bad_item(
    committed: Engine, batch: list[dict[str, Any]]
) -> None:
    engine = committed
    before = _snapshot(engine)
    bad = [problem(call) for call in batch]
    with Session(engine) as session:
        session.begin()
        if any(bad):
            with pytest.raises(ValidationError):
                jobs.enqueue_many(session, batch)
            session.commit()
            assert _snapshot(engine) == before
            return
        rows = jobs.enqueue_many(session, batch)
        ids = [row.id for row in rows]
        session.commit()
    assert len(ids) == len(batch)
    first: dict[str, int] = {}
    for position, (job_id, call) in enumerate(zip(ids, batch, strict=True)):
        key = call.get("idempotency_key")
        if key is not None and key in first:
            assert job_id == ids[first[key]]  # one key, one row, within a batch too
            continue
        if key is not None:
            first[key] = position
        if job_id > before[1]:  # inserted by this call (ids only grow), not found by key
            _check_stored(engine, job_id, call)
    new = {job_id for job_id in ids if job_id > before[1]}
    assert _snapshot(engine)[0] == before[0] + len(new)
