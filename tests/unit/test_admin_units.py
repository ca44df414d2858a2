"""Pure helpers of the operations module: no database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sa_jobqueue import ConfigurationError
from sa_jobqueue.cli.render import age as _age
from sa_jobqueue.cli.render import grid as _grid
from sa_jobqueue.cli.render import plural as _plural
from sa_jobqueue.cli.render import span as _span
from sa_jobqueue.ops.admin import (
    DEFAULT_RETENTION,
    Pruner,
    PruneResult,
    QueueStats,
    Stats,
    model_for_table,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(hours=1.5)),
        ("500ms", timedelta(milliseconds=500)),
        ("2 d", timedelta(days=2)),
        ("90", timedelta(seconds=90)),
        ("0s", timedelta(0)),
    ],
)
def test_parse_duration_accepts(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "x", "5q", "1h x", "-1d", "-5", "inf", "nan", "9" * 30 + "w"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_stats_total_sums_counts_and_takes_the_largest_lag():
    stats = Stats(
        at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        queues=[QueueStats("a", pending=2, lag_seconds=3.0), QueueStats("b", done=5)],
    )
    assert (stats.total.pending, stats.total.done, stats.total.lag_seconds) == (2, 5, 3.0)
    assert stats.to_dict()["at"] == "2026-01-01T00:00:00+00:00"
    assert PruneResult(deleted={"done": 2, "failed": 1}).to_dict()["total"] == 3


def test_pruner_defaults_and_validation():
    assert Pruner(model_for_table("jobs")).retention == dict(DEFAULT_RETENTION)
    assert Pruner(model_for_table("jobs"), {}).retention == {}
    with pytest.raises(ConfigurationError, match="status must be among"):
        Pruner(model_for_table("jobs"), {"pending": timedelta(days=1)})
    with pytest.raises(ConfigurationError, match="must not be negative"):
        Pruner(model_for_table("jobs"), {"done": timedelta(days=-1)})
    with pytest.raises(ConfigurationError, match="prune_interval"):
        Pruner(model_for_table("jobs"), None, 0)
    assert model_for_table("jobs") is model_for_table("jobs")
    with pytest.raises(ConfigurationError):
        model_for_table("jobs; drop table x")


def test_human_formatting():
    assert [_age(s) for s in (None, 4.24, 187, 7500, 3 * 86400 + 4 * 3600)] == [
        "-", "4.2s", "3m07s", "2h05m", "3d04h",
    ]  # fmt: skip
    assert _grid(["name", "n"], [["a", 1], ["long", 100]], right=1).splitlines() == [
        "name    n",
        "a       1",
        "long  100",
    ]


def test_prune_summary_words():
    assert [_span(timedelta(days=7)), _span(timedelta(minutes=90)), _span(timedelta(0))] == [
        "7d",
        "1h30m",
        "0s",
    ]
    assert _span(timedelta(seconds=1.5)) == "1.5s"
    assert [_plural(1, "batch"), _plural(2, "batch"), _plural(0, "job")] == [
        "1 batch",
        "2 batches",
        "0 jobs",
    ]
