"""The rules every enqueued value must pass, checked before anything touches a session.

Names, idempotency keys, payloads (JSON, at most ``max_payload_bytes``), ``run_at`` and
``delay``; each bad value is a `ValidationError` naming it. See docs/enqueue.md#validation.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from sa_jobqueue.errors import PayloadError, ValidationError

__all__ = [
    "BIGINT_RANGE",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "MAX_COUNT",
    "MAX_DELAY_SECONDS",
    "MAX_KEY_LENGTH",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "check_aware",
    "check_delay",
    "check_job_id",
    "check_key",
    "check_max_attempts",
    "check_name",
    "check_priority",
    "cron_step_problem",
    "dump_payload",
    "dump_result",
]

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
MAX_NAME_LENGTH = 128
MAX_KEY_LENGTH = 512
#: The longest delay (100 years): PostgreSQL computes ``now() + delay`` inside the
#: INSERT, so a larger one would abort the caller's transaction (timestamp out of
#: range) or insert a row whose ``run_at`` Python cannot load (after year 9999).
MAX_DELAY_SECONDS = 100 * 365.25 * 86400
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*")
_SMALLINT = (-(2**15), 2**15 - 1)
_INT4_MAX = 2**31 - 1
#: The most a count argument takes (a list's limit, a batch size): a PostgreSQL ``integer``.
MAX_COUNT = _INT4_MAX
#: A job id is a ``bigint``.
BIGINT_RANGE = (-(2**63), 2**63 - 1)
MAX_DEPTH = 200


def check_name(field: str, value: object) -> str:
    """Return `value` if it is a valid kind or queue name, else raise `ValidationError`."""
    if not isinstance(value, str):
        raise ValidationError(field, value, f"must be a str, not {type(value).__name__}")
    if not value:
        raise ValidationError(field, value, "must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise ValidationError(field, value, f"must be at most {MAX_NAME_LENGTH} characters")
    if not NAME_PATTERN.fullmatch(value):
        raise ValidationError(
            field,
            value,
            "may only hold ASCII letters, digits and _ . : / - "
            "(and start with a letter, digit or _)",
        )
    return value


def check_key(value: object, field: str = "idempotency_key") -> str | None:
    """Return a valid key (or None) for `field` (``idempotency_key``, ``unique_key``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(field, value, f"must be a str or None, not {type(value).__name__}")
    if not value:
        raise ValidationError(field, value, "must not be empty (use None for no key)")
    if len(value) > MAX_KEY_LENGTH:
        raise ValidationError(field, value, f"must be at most {MAX_KEY_LENGTH} chars")
    _check_text(field, value, value, ValidationError)
    return value


def check_priority(value: object) -> int:
    """Return a valid priority (a smallint; lower runs first), else raise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError("priority", value, f"must be an int, not {type(value).__name__}")
    low, high = _SMALLINT
    if not low <= value <= high:
        raise ValidationError("priority", value, f"must be between {low} and {high}")
    return value


def check_job_id(value: object) -> int:
    """Return `value` as a job id (an int that fits the ``bigint`` id column), else raise.

    >>> check_job_id(12)
    12
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError("job id", value, f"must be an int, not {type(value).__name__}")
    low, high = BIGINT_RANGE
    if not low <= value <= high:
        raise ValidationError("job id", value, f"is not a job id: ids are bigint, at most {high}")
    return value


def check_max_attempts(value: object) -> int:
    """Return a valid ``max_attempts`` (1 to 2**31 - 1), else raise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError("max_attempts", value, f"must be an int, not {type(value).__name__}")
    if not 1 <= value <= _INT4_MAX:
        raise ValidationError("max_attempts", value, f"must be between 1 and {_INT4_MAX}")
    return value


def check_aware(field: str, value: object) -> datetime:
    """Return `value` if it is a timezone-aware datetime, else raise."""
    if not isinstance(value, datetime):
        raise ValidationError(field, value, f"must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            field, value, "must be timezone-aware (e.g. datetime.now(timezone.utc))"
        )
    try:
        # PostgreSQL stores it in UTC: year 1 at +05:00 is 1 BC there, and the row
        # could not be loaded back into Python (found by the hypothesis test).
        value.astimezone(timezone.utc)
    except OverflowError:
        raise ValidationError(field, value, "is outside years 1 to 9999 in UTC") from None
    return value


def check_delay(field: str, value: object) -> float:
    """Return `value` (a timedelta or seconds) as finite, non-negative seconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond float range
            seconds = math.inf if value > 0 else -math.inf
    else:
        raise ValidationError(
            field, value, f"must be a timedelta or seconds, not {type(value).__name__}"
        )
    if not math.isfinite(seconds):
        raise ValidationError(field, value, "must be finite")
    if seconds < 0:
        raise ValidationError(field, value, "must not be negative")
    if seconds > MAX_DELAY_SECONDS:
        raise ValidationError(field, value, f"must be at most {MAX_DELAY_SECONDS:.0f}s (100 years)")
    return seconds


#: Each cron field's name and range, for 5 fields (6: seconds first).
_CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)


def cron_step_problem(expression: str) -> str | None:
    """What is wrong with a step (``*/N``) of the cron `expression`, or None.

    A step that reaches past its field's range (``*/1000000`` or ``*/60``
    minutes) matches the field's first value only: almost surely not what was
    meant, so it is refused rather than read as ``0``. Other mistakes are the cron
    parser's to name.

    >>> cron_step_problem("*/15 * * * *") is None
    True
    >>> print(cron_step_problem("*/1000000 * * * *")[-50:])
    reaches past its range 0-59: it would match 0 only
    """
    parts = expression.split()
    fields = _CRON_FIELDS if len(parts) != 6 else (("second", 0, 59), *_CRON_FIELDS)
    for text, (name, low, high) in zip(parts, fields, strict=False):
        for item in text.split(","):
            _, slash, step = item.partition("/")
            if slash and step.isascii() and step.isdigit() and int(step) > high - low:
                start = item.split("-")[0].split("/")[0]
                first = low if start == "*" else start
                return (
                    f"step {int(step)} of the {name} field ({item}) reaches past its range "
                    f"{low}-{high}: it would match {first} only"
                )
    return None


def _check_text(
    path: str, text: str, shown: object, error: type[ValidationError] = PayloadError
) -> None:
    if "\x00" in text:
        raise error(path, shown, "holds a NUL character (\\u0000), which PostgreSQL refuses")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise error(
            path, shown, "holds a lone surrogate, which is not valid Unicode text"
        ) from None


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether `value` is plainly storable: built-in JSON types, str keys, no NUL, finite.

    The quick look `dump_payload` takes first (no path strings are built); anything it
    is unsure of (a subclass, a bad value) is walked again by `_walk`, which says what
    and where. Lone surrogates show when the JSON text is encoded.
    """
    if depth > MAX_DEPTH:
        return False
    kind = type(value)
    if kind is str:
        return "\x00" not in value
    if kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or "\x00" in key or not _plain_json(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        return all(_plain_json(item, depth + 1) for item in value)
    return False


#: `json.dumps` with these arguments builds an encoder per call; one is kept instead.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _plain_encoder() -> Any:
    """`_ENCODER.encode` for a value `_plain_json` passed, without its per-call setup.

    ``JSONEncoder.encode`` builds the C encoder anew on every call, which costs more
    than encoding a small payload; this one is built once. It keeps no markers (no
    circular check): a plain value is a tree no deeper than `MAX_DEPTH`. None where
    the C encoder is missing or answers differently (another Python): then
    `_ENCODER.encode` does it all.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        chunks = make(
            None, None, json.encoder.encode_basestring, None, ":", ",", False, False, False
        )
    except TypeError:  # another signature
        return None

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    probe = {"a": [1, 2.5, -0.0, True, None, 'é\n"', 10**20], "": {"b": 1e16}}
    try:
        same = encode(probe) == _ENCODER.encode(probe) and encode("x") == '"x"'
    except Exception:  # noqa: BLE001 - any surprise means: do not use it
        return None
    return encode if same else None


#: `_ENCODER.encode` for plain values (see `_plain_encoder`), or None.
_encode_plain = _plain_encoder()


def _walk(value: Any, path: str, depth: int = 0) -> None:
    """Raise `PayloadError` at the first value that JSON/JSONB cannot store exactly."""
    if depth > MAX_DEPTH:
        raise PayloadError(path, "...", f"is nested deeper than {MAX_DEPTH} levels (or circular)")
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, str):
        _check_text(path, value, value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise PayloadError(path, value, "NaN and Infinity are not JSON")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(
                    path,
                    key,
                    f"has a key of type {type(key).__name__}; JSON object keys must be str",
                )
            _check_text(f"{path}[{key!r}]", key, key)
            _walk(item, f"{path}[{key!r}]", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", depth + 1)
    else:
        raise PayloadError(path, value, f"{type(value).__name__} is not JSON-serialisable")


def dump_payload(payload: Any, max_bytes: int, *, name: str = "payload") -> str:
    """Validate `payload` and return its JSON text, or raise `PayloadError`.

    `name` starts the path the error shows (``result`` for a handler's return value).

    >>> dump_payload({"order_id": 4}, 1024)
    '{"order_id":4}'
    """
    plain = _plain_json(payload)
    if not plain:
        _walk(payload, name)
    encode = _encode_plain if plain and _encode_plain is not None else _ENCODER.encode
    try:
        text = encode(payload)
    except ValueError as exc:  # an int too long to print (sys.get_int_max_str_digits())
        raise PayloadError(name, "<a very long int>", str(exc)) from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: `_walk` names where
        _walk(payload, name)
        raise
    if size > max_bytes:
        raise PayloadError(
            name, f"<{size} bytes of JSON>", f"is larger than the {max_bytes}-byte limit"
        )
    return text


def dump_result(value: Any, max_bytes: int) -> str | None:
    """A handler's return value as JSON text for the ``result`` column (None: nothing).

    Raises:
        PayloadError: the value cannot be stored as JSON (the path starts ``result``).

    >>> dump_result({"invoice_id": 17}, 1024)
    '{"invoice_id":17}'
    >>> dump_result(None, 1024) is None
    True
    """
    return None if value is None else dump_payload(value, max_bytes, name="result")
