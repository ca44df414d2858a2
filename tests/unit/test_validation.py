"""The validation rules, checked without a database (the integration tests in
test_bad_input.py show that each rejection leaves the caller's transaction intact)."""

from __future__ import annotations

import json
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from sa_jobqueue import ConfigurationError, JobQueue, PayloadError, ValidationError
from sa_jobqueue.core import validation as v
from sa_jobqueue.enqueue.prepare import prepare, prepare_many
from sa_jobqueue.tasks import Registry
from tests.support.models import Job

LIMIT = v.DEFAULT_MAX_PAYLOAD_BYTES


def _registry() -> Registry:
    registry = Registry()
    registry.register(
        "send_receipt",
        lambda ctx: None,
        queue="mail",
        max_attempts=5,
        lease=60,
        transactional=False,
        backoff=None,
    )
    return registry


def test_errors_are_value_errors_not_type_errors():
    assert issubclass(ValidationError, ValueError)
    assert issubclass(PayloadError, ValidationError)
    assert not issubclass(ValidationError, TypeError)
    error = ValidationError("priority", 40000, "must be between -32768 and 32767")
    assert (error.field, error.value) == ("priority", 40000)
    assert str(error) == "priority=40000: must be between -32768 and 32767"
    assert type(error).__module__ == "sa_jobqueue"


def test_error_messages_truncate_long_values():
    error = ValidationError("kind", "k" * 500, "too long")
    assert len(str(error)) < 100
    assert str(error).startswith("kind='kkk")
    assert error.value == "k" * 500  # the attribute keeps the whole value


@pytest.mark.parametrize(
    "name",
    ["a", "send_receipt", "mail.high", "billing:invoice/create-v2", "_x", "9lives", "x" * 128],
)
def test_valid_names(name):
    assert v.check_name("kind", name) == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "must not be empty"),
        ("x" * 129, "at most 128 characters"),
        ("send receipt", "may only hold"),
        ("-leading-dash", "may only hold"),
        (".hidden", "may only hold"),
        ("émail", "may only hold"),
        ("tab\there", "may only hold"),
        ("semi;colon", "may only hold"),
        ("trailing\n", "may only hold"),
        (5, "must be a str, not int"),
        (None, "must be a str, not NoneType"),
        (b"bytes", "must be a str, not bytes"),
    ],
)
def test_invalid_names(name, problem):
    with pytest.raises(ValidationError, match=problem) as caught:
        v.check_name("queue", name)
    assert caught.value.field == "queue"
    assert caught.value.value == name
    assert str(caught.value).startswith("queue=")


def test_idempotency_keys():
    assert v.check_key(None) is None
    assert v.check_key("order:4:receipt") == "order:4:receipt"
    assert v.check_key("Schlüssel mit Leerzeichen 🔑") == "Schlüssel mit Leerzeichen 🔑"
    assert v.check_key("k" * v.MAX_KEY_LENGTH) == "k" * 512
    for bad, problem in [
        ("", "must not be empty"),
        ("k" * 513, "at most 512"),
        ("a\x00b", "NUL"),
        ("a\ud800b", "lone surrogate"),
        (42, "must be a str or None, not int"),
    ]:
        with pytest.raises(ValidationError, match=problem) as caught:
            v.check_key(bad)
        assert caught.value.field == "idempotency_key"
        assert type(caught.value) is ValidationError  # not reported as a payload problem


@pytest.mark.parametrize("value", [-(2**15), -1, 0, 1, 2**15 - 1])
def test_valid_priorities(value):
    assert v.check_priority(value) == value


@pytest.mark.parametrize("value", [-(2**15) - 1, 2**15, 10**20, 1.0, "1", True, None])
def test_invalid_priorities(value):
    with pytest.raises(ValidationError) as caught:
        v.check_priority(value)
    assert caught.value.field == "priority"


@pytest.mark.parametrize("value", [0, -1, 2**31, 2.0, "3", False])
def test_invalid_max_attempts(value):
    with pytest.raises(ValidationError) as caught:
        v.check_max_attempts(value)
    assert caught.value.field == "max_attempts"


def test_max_attempts_bounds():
    assert v.check_max_attempts(1) == 1
    assert v.check_max_attempts(2**31 - 1) == 2**31 - 1


def test_datetimes_must_be_aware():
    aware = datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    assert v.check_aware("run_at", aware) is aware
    with pytest.raises(ValidationError, match="timezone-aware"):
        v.check_aware("run_at", datetime(2030, 1, 1))
    with pytest.raises(ValidationError, match="must be a datetime, not str"):
        v.check_aware("run_at", "2030-01-01T00:00:00Z")


def test_delays():
    assert v.check_delay("delay", 0) == 0.0
    assert v.check_delay("delay", 2.5) == 2.5
    assert v.check_delay("delay", timedelta(minutes=5)) == 300.0
    assert v.check_delay("delay", v.MAX_DELAY_SECONDS) == v.MAX_DELAY_SECONDS
    for bad, problem in [
        (-1, "must not be negative"),
        (timedelta(seconds=-1), "must not be negative"),
        (float("inf"), "must be finite"),
        (float("-inf"), "must be finite"),
        (float("nan"), "must be finite"),
        (10**400, "must be finite"),  # too big for a float: no OverflowError leaks
        (v.MAX_DELAY_SECONDS + 1, "at most"),
        (timedelta(days=999_999_999), "at most"),
        ("5", "must be a timedelta or seconds, not str"),
        (True, "not bool"),
    ]:
        with pytest.raises(ValidationError, match=problem) as caught:
            v.check_delay("delay", bad)
        assert caught.value.field == "delay"


def test_dump_payload_is_compact_json_that_keeps_unicode():
    payload = {"order_id": 4, "name": "Zoë 🍰", "tags": ["a", None, True, 1.5], "nested": {}}
    text = v.dump_payload(payload, LIMIT)
    assert text == '{"order_id":4,"name":"Zoë 🍰","tags":["a",null,true,1.5],"nested":{}}'
    assert json.loads(text) == payload
    assert v.dump_payload((1, 2), LIMIT) == "[1,2]"  # tuples are JSON arrays
    assert v.dump_payload(OrderedDict(b=1, a=2), LIMIT) == '{"b":1,"a":2}'
    assert v.dump_payload("just a string", LIMIT) == '"just a string"'
    assert v.dump_payload(None, LIMIT) == "null"


@pytest.mark.parametrize(
    "payload",
    [
        {"order_id": 4, "name": "Zoë 🍰", "tags": ["a", None, True, 1.5], "nested": {}},
        {"quote": 'a"b\\c\n\t\x01\u2028', "": [[], {}, [[[]]]]},
        [0, -0.0, 1e16, 5e-324, 1.7976931348623157e308, 2**53 + 1, -(2**80), False],
        (1, (2, 3)),
        "just a string",
        None,
        1.5,
        10**300,
    ],
)
def test_plain_payloads_encode_as_the_json_encoder_does(payload):
    # dump_payload takes a C encoder built once for plain values: same text to the byte.
    assert v._encode_plain is not None  # CPython: the quick path is the one tested
    assert v._plain_json(payload)
    assert v._encode_plain(payload) == v._ENCODER.encode(payload)
    assert v.dump_payload(payload, 10**6) == v._ENCODER.encode(payload)


def test_payload_size_limit_counts_utf8_bytes():
    # '"' + n characters + '"': the limit is on the JSON text's UTF-8 bytes.
    assert v.dump_payload("x" * 98, 100) == '"' + "x" * 98 + '"'
    with pytest.raises(PayloadError, match="larger than the 100-byte limit"):
        v.dump_payload("x" * 99, 100)
    with pytest.raises(PayloadError, match=r"<102 bytes of JSON>"):
        v.dump_payload("é" * 50, 100)  # 50 characters, 100 bytes, plus the quotes


@pytest.mark.parametrize(
    ("payload", "path", "problem"),
    [
        ({"a": object()}, "payload['a']", "object is not JSON-serialisable"),
        ({"a": {1, 2}}, "payload['a']", "set is not JSON-serialisable"),
        ({"a": Decimal("1.5")}, "payload['a']", "Decimal is not JSON-serialisable"),
        ({"at": datetime(2030, 1, 1)}, "payload['at']", "datetime is not JSON-serialisable"),
        (b"bytes", "payload", "bytes is not JSON-serialisable"),
        ({"a": [1, float("nan")]}, "payload['a'][1]", "NaN and Infinity"),
        (float("-inf"), "payload", "NaN and Infinity"),
        ({"a": "x\x00"}, "payload['a']", "NUL"),
        ({"k\x00": 1}, "payload['k\\x00']", "NUL"),
        ({"a": "\udfff"}, "payload['a']", "lone surrogate"),
        ({1: "a"}, "payload", "has a key of type int"),
        ({"a": {(1, 2): "a"}}, "payload['a']", "has a key of type tuple"),
        ({"n": 10**5000}, "payload", "integer string conversion"),
    ],
)
def test_payload_rejections_name_the_path(payload, path, problem):
    with pytest.raises(PayloadError, match=problem) as caught:
        v.dump_payload(payload, LIMIT)
    assert caught.value.path == path
    assert caught.value.field == "payload"
    assert str(caught.value).startswith(path + "=")


def test_deep_and_circular_payloads_are_rejected_not_recursed_forever():
    deep: list[object] = []
    for _ in range(v.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(PayloadError, match="nested deeper than 200"):
        v.dump_payload(deep, LIMIT)
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(PayloadError, match="or circular"):
        v.dump_payload(loop, LIMIT)


def test_prepare_fills_queue_and_max_attempts_from_the_task():
    registry = _registry()
    spec = prepare(registry, LIMIT, "send_receipt", {"order_id": 4})
    assert (spec.queue, spec.max_attempts, spec.payload) == ("mail", 5, '{"order_id":4}')
    caller_wins = prepare(registry, LIMIT, "send_receipt", queue="urgent", max_attempts=2)
    assert (caller_wins.queue, caller_wins.max_attempts) == ("urgent", 2)
    unregistered = prepare(registry, LIMIT, "anything")
    assert (unregistered.queue, unregistered.max_attempts) == ("default", 20)
    assert unregistered.payload == "{}"
    assert unregistered.delay == 0.0
    assert unregistered.run_at is None
    assert unregistered.idempotency_key is None


def test_prepare_rejects_run_at_with_delay():
    when = datetime.now(timezone.utc)
    with pytest.raises(ValidationError, match="either run_at or delay, not both"):
        prepare(_registry(), LIMIT, "k", run_at=when, delay=5)


def test_prepare_many_names_the_bad_item():
    registry = _registry()
    items = [("a", {}), {"kind": "b", "priority": 1}, ("c", {"x": float("nan")})]
    with pytest.raises(PayloadError, match=r"^items\[2\]: payload\['x'\]=nan") as caught:
        prepare_many(registry, LIMIT, items)
    assert caught.value.field == "payload"


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        (None, r"^items=None: must be a list"),
        ("ab", r"^items='ab': must be a list"),
        ({"kind": "a"}, r"^items=\{'kind': 'a'\}: must be a list"),
        ([("a",)], r"^items\[0\]: item=\('a',\): must be a \(kind, payload\) pair"),
        ([("a", {}, 1)], r"^items\[0\]: item=.*must be a \(kind, payload\) pair"),
        ([7], r"^items\[0\]: item=7: must be a \(kind, payload\) pair or a dict"),
        ([{"payload": {}}], r"^items\[0\]: item=\{'payload': \{\}\}: has no 'kind'"),
        ([{"kind": "a", "bogus": 1}], r"^items\[0\]: item=.*unknown keys \['bogus'\]"),
        ([("a", {}), ("", {})], r"^items\[1\]: kind='': must not be empty"),
    ],
)
def test_prepare_many_rejects_malformed_items(items, problem):
    with pytest.raises(ValidationError, match=problem):
        prepare_many(_registry(), LIMIT, items)


def test_prepare_many_accepts_pairs_dicts_and_generators():
    specs = prepare_many(
        _registry(), LIMIT, (item for item in [("a", [1]), {"kind": "send_receipt"}])
    )
    assert [(s.kind, s.queue, s.payload) for s in specs] == [
        ("a", "default", "[1]"),
        ("send_receipt", "mail", "{}"),
    ]
    assert prepare_many(_registry(), LIMIT, []) == []


def test_prepare_many_checks_each_pair_as_prepare_does():
    # Pairs of one kind share its checks (made once per call), never one payload's.
    registry = _registry()
    items: list[tuple[str, Any]] = [("send_receipt", {"i": i}) for i in range(3)]
    items += [("a", None), ("send_receipt", [])]
    specs = prepare_many(registry, LIMIT, items)
    assert specs == [prepare(registry, LIMIT, kind, payload) for kind, payload in items]
    assert [s.payload for s in specs] == ['{"i":0}', '{"i":1}', '{"i":2}', "{}", "[]"]
    bad = [("send_receipt", {}), ("send_receipt", {"x": b"x"}), ("bad kind", {"x": b"x"})]
    with pytest.raises(PayloadError, match=r"^items\[1\]: payload\['x'\]"):
        prepare_many(registry, LIMIT, bad)
    # A bad kind is named before its payload, as prepare() does.
    with pytest.raises(ValidationError, match=r"^items\[0\]: kind='bad kind'"):
        prepare_many(registry, LIMIT, bad[2:])
    fair = JobQueue(Job)
    fair.task("fair", fair=True)(lambda ctx: None)
    with pytest.raises(ValidationError, match=r"^items\[1\]: concurrency_key=None: is needed"):
        prepare_many(fair.registry, LIMIT, [{"kind": "fair", "concurrency_key": "k"}, ("fair", {})])


def test_prepare_many_pairs_after_the_first_of_their_kind_are_what_prepare_makes():
    # After its first pair, a kind's pairs take a faster path: every field the same.
    registry = _registry()
    fair = JobQueue(Job)
    fair.task("fair", fair=True, queue="slow", max_attempts=3)(lambda ctx: None)
    items: list[tuple[str, Any]] = [("send_receipt", None), ("a", 1), ("send_receipt", None)]
    items += [("a", None), ("send_receipt", {"é": ["x", 2.5]}), ("a", "text")]
    specs = prepare_many(registry, LIMIT, items)
    assert specs == [prepare(registry, LIMIT, kind, payload) for kind, payload in items]
    with pytest.raises(PayloadError, match=r"^items\[2\]: payload="):
        prepare_many(registry, 8, [("a", 1), ("a", 2), ("a", "longer than 8")])
    with pytest.raises(ValidationError, match=r"^items\[0\]: concurrency_key=None: is needed"):
        prepare_many(fair.registry, LIMIT, [("fair", {}), ("fair", {})])


def test_jobqueue_rejects_bad_configuration():
    for bad in (0, -1, 1.5, "1"):
        with pytest.raises(ConfigurationError, match="max_payload_bytes"):
            JobQueue(Job, max_payload_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="JobMixin"):
        JobQueue(dict)  # type: ignore[type-var]
    assert JobQueue(Job, max_payload_bytes=10).max_payload_bytes == 10


def test_task_options_are_validated_at_registration():
    jobs = JobQueue(Job)
    with pytest.raises(ConfigurationError, match="max_attempts=0"):
        jobs.task("a", max_attempts=0)(lambda ctx: None)
    with pytest.raises(ConfigurationError, match="queue=''"):
        jobs.task("a", queue="")(lambda ctx: None)
    with pytest.raises(ConfigurationError, match="kind='bad kind'"):
        jobs.task("bad kind")(lambda ctx: None)
    jobs.task("a")(lambda ctx: None)
    with pytest.raises(ConfigurationError, match="already registered"):
        jobs.task("a")(lambda ctx: None)
