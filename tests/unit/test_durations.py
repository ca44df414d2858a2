"""Durations: one explicit, case-sensitive grammar, bounded at 100 years (no database)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sa_jobqueue import ConfigurationError
from sa_jobqueue.core.durations import MAX_DURATION, check_duration, parse_duration
from sa_jobqueue.ops.admin import Pruner, model_for_table


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1m", timedelta(minutes=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1h 30m", timedelta(hours=1, minutes=30)),
        ("2w", timedelta(weeks=2)),
        ("500ms", timedelta(milliseconds=500)),
        ("1m30s", timedelta(seconds=90)),
        ("36525d", MAX_DURATION),
    ],
)
def test_duration_grammar_accepts_lower_case_units(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["1M", "1D", "1H", "1W", "1S", "1MS", "1Ms", "1h30M"])
def test_duration_units_are_case_sensitive_so_capital_m_is_refused_not_a_minute(text):
    with pytest.raises(ValueError, match="lower case"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["1min", "2 days", "1y", "1mo", "m", "1.d", "+1d"])
def test_duration_refuses_anything_outside_the_grammar(text):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["999999999d", "36526d", "5300w", "9" * 20])
def test_duration_out_of_range_is_refused_in_one_line(text):
    with pytest.raises(ValueError, match="too long a duration") as raised:
        parse_duration(text)
    assert "\n" not in str(raised.value)


def test_check_duration_bounds_python_values():
    assert check_duration("d", timedelta(days=1)) == timedelta(days=1)
    assert check_duration("d", 90, allow_seconds=True) == timedelta(seconds=90)
    with pytest.raises(ValueError, match="at most 100 years"):
        check_duration("older_than", timedelta(days=999999999))
    with pytest.raises(ValueError, match="negative"):
        check_duration("older_than", timedelta(seconds=-1))
    with pytest.raises(ValueError, match="must be a timedelta"):
        check_duration("older_than", "7d")
    with pytest.raises(ValueError, match="0 to 100 years"):
        check_duration("delay", float("inf"), allow_seconds=True)


def test_worker_retention_out_of_range_is_refused_at_construction():
    with pytest.raises(ConfigurationError, match="at most 100 years"):
        Pruner(model_for_table("jobs"), {"done": timedelta(days=999999999)})
