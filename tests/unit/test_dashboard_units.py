"""The dashboard's pure parts: filters and cursors, credentials, charts, formatting."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone

import pytest
from starlette.datastructures import Headers

from sa_jobqueue import ConfigurationError
from sa_jobqueue.dashboard import charts
from sa_jobqueue.dashboard.filters import FilterError, JobFilter
from sa_jobqueue.dashboard.history import RANGES, Minute, buckets
from sa_jobqueue.dashboard.security import Credentials, same_origin

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def test_filter_reads_every_field_and_drops_empty_ones():
    f = JobFilter.parse(
        {"status": "failed", "queue": " mail ", "kind": "", "error": "50%", "payload": "k"}
    )
    assert (f.status, f.queue, f.kind, f.error, f.payload) == ("failed", "mail", None, "50%", "k")
    assert f.bound() == {"queue_name": "mail", "error_pattern": "%50\\%%", "payload_key": "k"}
    assert f.flags()["by_payload_key"]
    assert not f.flags()["by_kind"]
    assert (
        f.query_string(after="x,1") == "status=failed&queue=mail&error=50%25&payload=k&after=x%2C1"
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("order_id=4", {"order_id": 4}),
        ("customer=dave", {"customer": "dave"}),
        ('customer="4"', {"customer": "4"}),
        ('{"a": {"b": true}}', {"a": {"b": True}}),
    ],
)
def test_payload_filter_contains(text, value):
    assert JobFilter.parse({"payload": text}).bound()["payload_value"] == value


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"status": "lost"}, "status must be one of"),
        ({"payload": "=4"}, "needs a key"),
        ({"payload": "{nope"}, "not valid JSON"),
        ({"status": "running", "after": "5"}, "does not fit a running list"),
        ({"status": "done", "after": "2026-12-01T09:00:00,5"}, "malformed"),  # no offset
        ({"after": "abc"}, "malformed"),
        ({"queue": "q" * 201}, "longer than 200"),
    ],
)
def test_bad_filters_say_what_is_wrong(query, message):
    with pytest.raises(FilterError, match=message):
        JobFilter.parse(query)


@pytest.mark.parametrize(
    ("status", "row"),
    [
        ("pending", {"priority": 2, "run_at": T0, "id": 7}),
        ("running", {"locked_until": T0, "id": 7}),
        ("cancelled", {"finished_at": T0 + timedelta(microseconds=5), "id": 7}),
        (None, {"id": 7}),
    ],
)
def test_cursor_round_trips_the_last_rows_key(status, row):
    f = JobFilter(status=status)
    cursor = f.cursor_after(row)
    bound = JobFilter.parse({"status": status or "", "after": cursor}).bound()
    assert bound == {f"after_{key}": value for key, value in row.items()}


def test_basic_credentials_accept_only_the_exact_pair():
    creds = Credentials.from_options("ops:pa:ss", None)
    assert creds is not None
    header = "Basic " + base64.b64encode(b"ops:pa:ss").decode()
    assert creds.accepts(header)
    assert not creds.accepts("Basic " + base64.b64encode(b"ops:pa").decode())
    assert not creds.accepts("Basic !!!notbase64")
    assert not creds.accepts("Bearer pa:ss")
    assert not creds.accepts(None)


def test_token_works_as_bearer_or_as_basic_password():
    creds = Credentials.from_options(None, "0123456789abcdef")
    assert creds is not None
    assert creds.accepts("Bearer 0123456789abcdef")
    assert creds.accepts("Basic " + base64.b64encode(b"anyone:0123456789abcdef").decode())
    assert not creds.accepts("Bearer 0123456789abcdeX")


@pytest.mark.parametrize(
    ("basic", "token", "message"),
    [(":x", None, "USER:PASSWORD"), ("u", None, "USER:PASSWORD"), (None, "x" * 15, "16")],
)
def test_bad_credentials_options(basic, token, message):
    with pytest.raises(ConfigurationError, match=message):
        Credentials.from_options(basic, token)


@pytest.mark.parametrize(
    ("headers", "same"),
    [
        ({"host": "h:1"}, True),
        ({"host": "h:1", "origin": "http://h:1"}, True),
        ({"host": "h:1", "origin": "http://evil:1"}, False),
        ({"host": "h:1", "origin": "null"}, False),
        ({"host": "h:1", "referer": "http://h:1/jobs/3"}, True),
        ({"host": "h:1", "referer": "https://evil/"}, False),
    ],
)
def test_same_origin(headers, same):
    assert same_origin(Headers(headers)) is same


def test_minutes_fill_the_whole_hour_and_weight_averages_by_jobs():
    at = T0 + timedelta(seconds=30)

    class Row:
        def __init__(self, bucket, status, jobs, avg, most):
            self.bucket, self.status, self.jobs = bucket, status, jobs
            self.avg_seconds, self.max_seconds = avg, most

    rows = [Row(T0, "done", 3, 1.0, 2.0), Row(T0, "failed", 1, 9.0, 9.0)]
    minutes = buckets(at, rows, RANGES["hour"])
    assert len(minutes) == 60
    assert minutes[-1] == Minute(T0, done=3, failed=1, avg_seconds=1.0, max_seconds=2.0)
    assert minutes[0].start == T0 - timedelta(minutes=59)
    assert minutes[0].done == 0


def test_a_week_has_56_bars_of_three_hours_aligned_on_the_epoch():
    at = T0 + timedelta(hours=4, minutes=10)
    bars = buckets(at, [], RANGES["week"])
    assert len(bars) == 56
    assert all(bar.start.timestamp() % (3 * 3600) == 0 for bar in bars)
    assert bars[-1].start <= at < bars[-1].start + timedelta(hours=3)
    assert bars[0].start == bars[-1].start - timedelta(hours=3 * 55)


def test_latency_chart_skips_minutes_without_jobs():
    minutes = [Minute(T0, avg_seconds=1.0, max_seconds=4.0), Minute(T0), Minute(T0, done=1)]
    chart = charts.latency(minutes, width=300, height=100)
    assert chart.peak == 5
    assert chart.lines == {"avg": "50.0,80.0", "max": "50.0,20.0"}
