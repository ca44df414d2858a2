"""The click parameter types the commands share: durations, job ids, counts, moments.

Each checks its value before any database is asked and fails with a one-line usage
error (exit 2). Ids and counts are ASCII digits within range (``int()`` would also take
``"١٢"``). See docs/cli.md.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import click

from sa_jobqueue.core.validation import MAX_COUNT, check_job_id

__all__ = ["Count", "Duration", "JobId", "Moment"]


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in click 8.2+
    """A duration option: ``30s``, ``5m``, ``2h``, ``7d`` (`core.durations.parse_duration`)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse `value`, or fail with a one-line usage error."""
        if isinstance(value, timedelta):
            return value
        from sa_jobqueue.core.durations import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


_ASCII_INT = re.compile(r"-?[0-9]{1,40}", re.ASCII)  # past 40 digits: nothing we take


def _ascii_int(value: Any) -> int | None:
    """`value` as an int when it is one, or ASCII digits (``int()`` also takes ``"١٢"``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip(" \t")
    return int(text) if _ASCII_INT.fullmatch(text) else None


class JobId(click.ParamType):  # type: ignore[type-arg]
    """A job id argument: ASCII digits that fit the ``bigint`` id column."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse `value`, or fail with a one-line usage error."""
        number = _ascii_int(value)
        if number is None:
            self.fail(f"{value!r} is not a job id (ASCII digits, e.g. 42)", param, ctx)
        try:
            return check_job_id(number)
        except ValueError:
            self.fail(f"{value} is not a job id: ids are bigint, at most {2**63 - 1}", param, ctx)


class Count(click.ParamType):  # type: ignore[type-arg]
    """A whole-number option (a count, a limit, a size): ASCII digits within a range.

    Checked before the database is asked, so ``--limit 99999999999`` is a usage error
    (exit 2), not a database error; the default upper bound is what a PostgreSQL
    ``integer`` holds.

    Args:
        minimum: the smallest value taken (None: no bound here, the library checks).
        maximum: the largest value taken (None: no bound here, the library checks).
    """

    name = "integer"

    def __init__(self, minimum: int | None = 1, maximum: int | None = MAX_COUNT) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse `value`, or fail with a one-line usage error."""
        number = _ascii_int(value)
        if number is None:
            self.fail(f"{value!r} is not a valid integer (ASCII digits, e.g. 20)", param, ctx)
        low = number if self.minimum is None else self.minimum
        high = number if self.maximum is None else self.maximum
        if not low <= number <= high:
            self.fail(f"{value} is not between {self.minimum} and {self.maximum}", param, ctx)
        return number


class Moment(click.ParamType):  # type: ignore[type-arg]
    """An ISO 8601 date and time option that must carry a UTC offset."""

    name = "datetime"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse `value`, or fail with a one-line usage error."""
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 date and time", param, ctx)
        if moment.tzinfo is None:
            self.fail(f"{value!r} needs a UTC offset, e.g. 2026-12-01T09:00:00+00:00", param, ctx)
        return moment
