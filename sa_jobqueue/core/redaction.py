"""Masking secrets in payloads wherever they are shown: CLI, dashboard. Never in the row.

See docs/tasks.md#secrets-in-payloads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_REDACTED_KEYS", "MASK", "check_redacted_keys", "redact"]

#: Payload keys masked by default: a key is masked when, lowercased and without ``-``
#: and ``_``, it contains one of these (``new_password``, ``X-Api-Key``, ``refreshToken``).
DEFAULT_REDACTED_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "secret",
    "token",
    "authorization",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "cookie",
    "cardnumber",
    "cvv",
)

#: What a masked value is shown as.
MASK = "[redacted]"

#: Deeper than this (payloads are limited to 200 levels at enqueue) is shown masked.
_MAX_DEPTH = 256


def _normal(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def check_redacted_keys(keys: object) -> tuple[str, ...]:
    """`keys` as a tuple of normalised non-empty strings, or `ValueError` naming the bad one.

    >>> check_redacted_keys(["Password", "api_key"])
    ('password', 'apikey')
    """
    if isinstance(keys, str) or not isinstance(keys, Iterable):
        raise ValueError(f"redact_keys must be a list of strings, not {keys!r}")
    checked = []
    for key in keys:
        if not isinstance(key, str) or not _normal(key):
            raise ValueError(f"redact_keys: {key!r} is not a non-empty key name")
        checked.append(_normal(key))
    return tuple(checked)


def redact(value: Any, keys: Iterable[str] = DEFAULT_REDACTED_KEYS) -> Any:
    """A copy of the JSON `value` whose object members named like `keys` show `MASK`.

    A member is masked whatever its value (a nested object too); lists and nested
    objects are searched. The value itself is never changed.

    >>> redact({"email": "a@b.c", "password": "hunter2", "auth": {"Token": "x", "n": 1}})
    {'email': 'a@b.c', 'password': '[redacted]', 'auth': {'Token': '[redacted]', 'n': 1}}
    """
    needles = tuple(keys)
    return _redact(value, needles, 0) if needles else value


def _redact(value: Any, needles: tuple[str, ...], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return MASK
    if isinstance(value, Mapping):
        return {
            key: MASK
            if isinstance(key, str) and any(n in _normal(key) for n in needles)
            else _redact(item, needles, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact(item, needles, depth + 1) for item in value]
    return value
