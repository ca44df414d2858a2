"""The jobs page's filters and keyset cursor, parsed from a query string: no database, no web.

>>> f = JobFilter.parse({"status": "failed", "kind": "send_receipt", "payload": "order_id=4"})
>>> f.bound()["payload_value"]
{'order_id': 4}
>>> JobFilter.parse({"status": "lost"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sa_jobqueue.dashboard.filters.FilterError: status must be one of pending, ..., not 'lost'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from sa_jobqueue import statements
from sa_jobqueue.ops.bulk import Match
from sa_jobqueue.schema.model import Status
from sa_jobqueue.statements.dashboard import like_pattern

__all__ = ["MAX_TEXT", "FilterError", "JobFilter", "like_pattern"]

#: The longest filter value accepted (a queue, a kind, a search text).
MAX_TEXT = 200
_STATUSES = tuple(s.value for s in Status)
_FIELDS = ("status", "queue", "kind", "error", "payload", "after")


class FilterError(ValueError):
    """A filter or cursor in the query string that cannot be used; the message says why."""


def _payload_filter(text: str) -> tuple[str | None, dict[str, Any] | None]:
    """``key`` -> has that key; ``key=value`` or a JSON object -> contains it."""
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as error:
            raise FilterError(f"payload filter is not valid JSON: {error}") from None
        if not isinstance(value, dict):
            raise FilterError('a JSON payload filter must be an object, e.g. {"order_id": 4}')
        return None, value
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not key:
        raise FilterError("payload filter needs a key: 'order_id', 'order_id=4' or a JSON object")
    if not sep:
        return key, None
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = raw  # a bare word is a string: customer=dave
    return None, {key: parsed}


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What the jobs page shows: every field optional, empty meaning "any".

    Attributes:
        status: one status; it also picks the order (`statements.LIST_ORDERS`).
        queue: exact queue name.
        kind: exact kind.
        error: text that ``last_error`` contains (case-insensitive).
        payload: ``key`` (the payload has it), ``key=value`` (JSON value, or a
            string) or a JSON object the payload contains.
        after: the keyset cursor: the previous page's last key, comma-separated.
    """

    status: str | None = None
    queue: str | None = None
    kind: str | None = None
    error: str | None = None
    payload: str | None = None
    after: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> JobFilter:
        """Read the filters from a query string's mapping; `FilterError` on a bad one."""
        values: dict[str, str | None] = {}
        for name in _FIELDS:
            raw = query.get(name)
            text = raw.strip() if isinstance(raw, str) else ""
            if len(text) > MAX_TEXT:
                raise FilterError(f"{name} filter is longer than {MAX_TEXT} characters")
            values[name] = text or None
        result = cls(**values)
        if result.status is not None and result.status not in _STATUSES:
            raise FilterError(
                f"status must be one of {', '.join(_STATUSES)} (or empty for all), "
                f"not {result.status!r}"
            )
        result.bound()  # check the payload filter and the cursor now
        return result

    def flags(self) -> dict[str, Any]:
        """The keyword arguments of `statements.job_page` for these filters."""
        payload_key, payload_value = _payload_filter(self.payload) if self.payload else (None, None)
        return {
            "status": self.status,
            "by_queue": self.queue is not None,
            "by_kind": self.kind is not None,
            "by_error": self.error is not None,
            "by_payload_key": payload_key is not None,
            "by_payload_value": payload_value is not None,
            "after": self.after is not None,
        }

    def bound(self) -> dict[str, Any]:
        """The bound parameters of `statements.job_page` for these filters (without ``limit``)."""
        params: dict[str, Any] = {}
        if self.queue is not None:
            params["queue_name"] = self.queue
        if self.kind is not None:
            params["kind_name"] = self.kind
        if self.error is not None:
            params["error_pattern"] = like_pattern(self.error)
        if self.payload:
            payload_key, payload_value = _payload_filter(self.payload)
            if payload_key is not None:
                params["payload_key"] = payload_key
            if payload_value is not None:
                params["payload_value"] = payload_value
        if self.after is not None:
            params.update(self._cursor_values(self.after))
        return params

    def _cursor_values(self, cursor: str) -> dict[str, Any]:
        names = statements.cursor_params(self.status)
        parts = cursor.split(",")
        if len(parts) != len(names):
            raise FilterError(f"cursor {cursor!r} does not fit a {self.status or 'all'} list")
        values: dict[str, Any] = {}
        for name, part in zip(names, parts, strict=True):
            try:
                if name.endswith(("_at", "_until")):
                    moment = datetime.fromisoformat(part)
                    if moment.tzinfo is None:
                        raise ValueError(part)
                    values[name] = moment
                elif part.isascii():  # int() takes other scripts' digits too
                    values[name] = int(part)
                else:
                    raise ValueError(part)
            except ValueError:
                raise FilterError(f"cursor {cursor!r} is malformed") from None
        return values

    def cursor_after(self, row: Any) -> str:
        """The cursor of the page that follows `row` (the last row shown)."""
        mapping = row._mapping if hasattr(row, "_mapping") else row
        parts = []
        for name in statements.cursor_params(self.status):
            value = mapping[name.removeprefix("after_")]
            parts.append(value.isoformat() if isinstance(value, datetime) else str(value))
        return ",".join(parts)

    def match(self) -> Match:
        """These filters (without the cursor) as an `ops.bulk.Match`: "all matching"."""
        payload_key, payload_value = _payload_filter(self.payload) if self.payload else (None, None)
        return Match(
            status=self.status,
            queue=self.queue,
            kind=self.kind,
            error=self.error,
            payload_key=payload_key,
            payload_value=payload_value,
        )

    def query_string(self, **changes: str | None) -> str:
        """These filters (with `changes`) as a query string; empty fields are left out."""
        changed = replace(self, **changes)
        pairs = [(name, getattr(changed, name)) for name in _FIELDS]
        return urlencode([(name, value) for name, value in pairs if value])
